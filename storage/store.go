package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/memrec/memrec/storage/internal/chunk"
)

// FormatVersion is the version of the file layout this package writes.
const FormatVersion = 1

// Errors a caller can test with errors.Is.
var (
	ErrNoRun   = errors.New("no such run")
	ErrExists  = errors.New("a run with that name already exists")
	ErrLocked  = errors.New("database is locked by another memrec process")
	ErrVersion = errors.New("unsupported database format version")
	ErrNoDB    = errors.New("no database")
	// ErrNotMemrec is a file that is not a memrec database: another
	// program's bbolt file, an empty (0-byte) file, anything else.
	ErrNotMemrec = errors.New("not a memrec database")
	// ErrNoName is an imported run without a name (none given, none in
	// the input); ErrRenameMany a rename of an input that holds several.
	ErrNoName     = errors.New("run has no name")
	ErrRenameMany = errors.New("a second run in the input, but a rename applies to exactly one run")
	// ErrCorrupt is returned, wrapped with the run and chunk, for a chunk
	// that cannot be decoded or whose series lack their kind's columns. It
	// is the chunk codec's own sentinel, under this package's name.
	ErrCorrupt = chunk.ErrCorrupt
)

var (
	bucketMeta  = []byte("meta")
	bucketRuns  = []byte("runs")  // id -> Run JSON
	bucketNames = []byte("names") // name -> id
	bucketData  = []byte("data")  // id -> {series: JSON, chunks: {key -> chunk}}
	keyVersion  = []byte("version")
	keySeries   = []byte("series")
	keyChunks   = []byte("chunks")
)

// Options configure Open.
type Options struct {
	// ReadOnly opens the file with a shared lock: any number of readers may
	// hold it together, but not while a writer holds it.
	ReadOnly bool
	// LockTimeout is how long Open waits for the file lock before it fails
	// with ErrLocked. Zero means one second.
	LockTimeout time.Duration
	// MustExist makes a writer refuse a missing (or empty) file with
	// ErrNoDB instead of creating it: commands that only change what is
	// there (rm, tag) set it, so a mistyped path leaves no new file behind.
	MustExist bool
	// ShortLock makes a writer hold the file's lock only while a
	// transaction of its own runs: Open checks the file and lets it go, and
	// each of Run, Runs, FreeName, NewAppender's and the Appender's
	// transactions and Close opens the file, takes the lock (waiting up to
	// LockTimeout; an Appender's timed commit waits less and tries again
	// at the next), runs and closes it. Readers and other writers use the
	// file in between. Other methods of such a handle fail with bbolt's
	// "database not open". A recorder sets it (docs/design.md).
	ShortLock bool

	retries int // Open's own: times it found its locked file removed
}

// DB is one memrec database file. It is safe for concurrent use; Close it
// when done.
type DB struct {
	bolt     *bolt.DB
	path     string
	readOnly bool
	openTx   int // the file's last transaction when it was opened
	// created is a file this handle made: Close removes it again if no
	// run is in it then (a refused merge, a failed import, a recording
	// that never started), so a command that stored nothing leaves no
	// empty database behind.
	created  bool
	checked  checkedChunks // the chunks read whose checksum was verified
	rowTimes rowTimesCache // the row times of the chunk an iterator read last

	// shortLock is Options.ShortLock: bolt is closed between transactions,
	// and hold opens it (under fileMu) for one.
	shortLock bool
	timeout   time.Duration
	fileMu    sync.Mutex
}

// Open opens the database at path; a writer creates it unless MustExist
// (and Close removes a file it created if no run was stored in it).
// A second writer, or a reader while a writer holds the file, gets
// ErrLocked after the lock timeout; it never hangs. A missing file is
// ErrNoDB (unless created); a file that is not memrec's (another program's
// bbolt file, a 0-byte file) is ErrNotMemrec and is left as it is. A file
// Open created is removed again if it cannot be made a database (a full
// disk), so no empty file is left behind.
func Open(path string, opts Options) (*DB, error) {
	timeout := opts.LockTimeout
	if timeout == 0 {
		timeout = time.Second
	}
	create := !opts.MustExist && !opts.ReadOnly
	created := false
	fi, err := statSettled(path)
	switch {
	case errors.Is(err, os.ErrNotExist) && !create:
		return nil, fmt.Errorf("%s: %w", path, ErrNoDB)
	case errors.Is(err, os.ErrNotExist):
		created = true
	case err != nil:
		return nil, err // an *fs.PathError: it names the path and the call
	case fi.IsDir():
		return nil, fmt.Errorf("%s is a folder: %w", path, ErrNotMemrec)
	case fi.Size() == 0:
		// Not ours to take over: an empty file may be another program's
		// (a mktemp, a file about to be written), whatever the command.
		return nil, fmt.Errorf("%s is empty (0 bytes): %w", path, ErrNotMemrec)
	}
	b, err := openBolt(path, timeout, opts.ReadOnly)
	if errors.Is(err, errGone) && opts.retries < 3 {
		// Another memrec created the file, held it while this one waited
		// for the lock, stored nothing and removed it (Close): start again
		// on the path as it is now.
		opts.retries++
		return Open(path, opts)
	}
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%s: %w", path, ErrLocked)
	}
	if errors.Is(err, berrors.ErrInvalid) || errors.Is(err, berrors.ErrVersionMismatch) || errors.Is(err, berrors.ErrChecksum) {
		return nil, fmt.Errorf("%s: %w (%v)", path, ErrNotMemrec, err)
	}
	var pathErr *fs.PathError
	if err != nil && !created && !errors.As(err, &pathErr) {
		// Not the system's error but bbolt's reading of the bytes ("file
		// size too small 5000"): another kind of file.
		return nil, fmt.Errorf("%s: %w (%v)", path, ErrNotMemrec, err)
	}
	if err != nil {
		if created {
			os.Remove(path)
		}
		if errors.As(err, &pathErr) {
			return nil, err // it names the path and the call
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Grow the file in small steps: bbolt's default rounds small files up to
	// a power of two, which can double the size of a small database.
	b.AllocSize = 256 << 10
	db := &DB{bolt: b, path: path, readOnly: opts.ReadOnly, created: created, shortLock: opts.ShortLock && !opts.ReadOnly, timeout: timeout}
	if err := db.init(opts.ReadOnly, create); err != nil {
		b.Close()
		if created {
			os.Remove(path)
		}
		return nil, err
	}
	if db.shortLock {
		b.Close() // hold opens it again for each transaction
	}
	db.readAround()
	return db, nil
}

// hold opens the file of a ShortLock handle for the transactions that
// follow, waiting up to wait (0: the handle's LockTimeout) for its lock,
// and release closes it again; calls are serialised. For any other handle
// it does nothing. A lock still held by another process at the end of the
// wait is ErrLocked.
func (db *DB) hold(wait time.Duration) (release func(), err error) {
	if !db.shortLock {
		return func() {}, nil
	}
	if wait <= 0 {
		wait = db.timeout
	}
	db.fileMu.Lock()
	b, err := openBolt(db.path, wait, false)
	if err != nil {
		db.fileMu.Unlock()
		if errors.Is(err, berrors.ErrTimeout) {
			return nil, fmt.Errorf("%s: %w", db.path, ErrLocked)
		}
		return nil, fmt.Errorf("open %s: %w", db.path, err)
	}
	b.AllocSize = 256 << 10
	db.bolt = b
	return func() {
		b.Close()
		db.fileMu.Unlock()
	}, nil
}

// view and update run f in a read or write transaction, holding the file
// around it if the handle has ShortLock.
func (db *DB) view(f func(*bolt.Tx) error) error {
	release, err := db.hold(0)
	if err != nil {
		return err
	}
	defer release()
	return db.bolt.View(f)
}

func (db *DB) update(f func(*bolt.Tx) error) error {
	release, err := db.hold(0)
	if err != nil {
		return err
	}
	defer release()
	return db.bolt.Update(f)
}

// errGone is openBolt's: the file it locked was removed meanwhile.
var errGone = errors.New("the file was removed while waiting for its lock")

// openBolt opens path with bbolt, waiting up to timeout for its lock. If
// the file at path was replaced while this process waited for the lock (a
// compaction renames a new file over the old, see compact.go), the lock
// it got is the old file's, which nothing else will read: it opens the
// path again, so that what it writes lands in the file others read. If it
// was removed (a memrec that created it stored nothing), errGone.
func openBolt(path string, timeout time.Duration, readOnly bool) (*bolt.DB, error) {
	for {
		var f *os.File
		open := func(name string, flag int, perm os.FileMode) (*os.File, error) {
			var err error
			f, err = os.OpenFile(name, flag, perm)
			return f, err
		}
		b, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: timeout, ReadOnly: readOnly, OpenFile: open})
		if err != nil {
			return nil, err
		}
		held, err1 := f.Stat()
		now, err2 := os.Stat(path)
		if err1 == nil && errors.Is(err2, os.ErrNotExist) {
			b.Close()
			return nil, errGone
		}
		if err1 != nil || err2 != nil || os.SameFile(held, now) {
			return b, nil
		}
		b.Close()
	}
}

// init checks that the file is memrec's, of this version; a writer with
// create makes the buckets of a new (bucketless) file.
func (db *DB) init(readOnly, create bool) error {
	check := func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if m == nil {
			foreign := false
			tx.ForEach(func([]byte, *bolt.Bucket) error { foreign = true; return nil })
			switch {
			case foreign:
				return fmt.Errorf("%s: %w (a bbolt file of another program: it has no %q bucket)", db.path, ErrNotMemrec, bucketMeta)
			case !readOnly && !create:
				return fmt.Errorf("%s holds no memrec data: %w", db.path, ErrNoDB)
			}
			return nil // a new file: a reader finds no runs, a creator makes the buckets
		}
		v, err := strconv.Atoi(string(m.Get(keyVersion)))
		if err != nil || v != FormatVersion {
			return fmt.Errorf("%s: %w: file has %q, this memrec reads %d", db.path, ErrVersion, m.Get(keyVersion), FormatVersion)
		}
		for _, name := range [][]byte{bucketRuns, bucketNames, bucketData} {
			if tx.Bucket(name) == nil {
				return fmt.Errorf("%s: %w (it has no %q bucket)", db.path, ErrNotMemrec, name)
			}
		}
		return nil
	}
	// A file that is memrec's already is only read here: a write
	// transaction, even one that changes nothing, rewrites a meta page, and
	// a command that then fails (a bad import, rm of no such run) must
	// leave the file byte for byte as it was.
	var isNew bool
	if err := db.bolt.View(func(tx *bolt.Tx) error {
		isNew = tx.Bucket(bucketMeta) == nil
		db.openTx = tx.ID()
		return check(tx)
	}); err != nil || readOnly || !isNew {
		return err
	}
	return db.bolt.Update(func(tx *bolt.Tx) error {
		if err := check(tx); err != nil || tx.Bucket(bucketMeta) != nil {
			return err
		}
		m, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if err := m.Put(keyVersion, []byte(strconv.Itoa(FormatVersion))); err != nil {
			return err
		}
		for _, b := range [][]byte{bucketRuns, bucketNames, bucketData} {
			if _, err := tx.CreateBucket(b); err != nil {
				return err
			}
		}
		return nil
	})
}

// Path returns the file's path.
func (db *DB) Path() string { return db.path }

// Close releases the file. Iterators must not be used after it, and it
// must not run concurrently with other methods. A writer first cuts off the
// room bbolt grew the file by ahead of its pages (up to AllocSize, 256 KiB:
// as much as 10 minutes of 8 GPUs take), while it still holds the lock.
//
// A file this handle created and that holds no run is removed, while the
// lock is still held: a command that stored nothing leaves no file.
func (db *DB) Close() error {
	if db.shortLock {
		// The last transaction: wait for readers as long as they take,
		// within reason, so that the file is trimmed or removed.
		if _, err := db.hold(closeWait); err != nil {
			return err
		}
		defer db.fileMu.Unlock() // the file is closed below, under it
		db.shortLock = false
	}
	var trimErr error
	if !db.readOnly {
		if db.created && db.empty() {
			os.Remove(db.path)
			return db.bolt.Close()
		}
		trimErr = db.trim()
	}
	return errors.Join(db.bolt.Close(), trimErr)
}

// closeWait is how long Close of a ShortLock handle, and an Appender's
// final commit, wait for a reader to let the file go.
const closeWait = time.Minute

// empty says whether no run is stored in the file.
func (db *DB) empty() bool {
	empty := false
	db.bolt.View(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		empty = b == nil || b.Stats().KeyN == 0
		return nil
	})
	return empty
}

// statSettled stats path; an empty file is looked at again for up to
// 100 ms, since another memrec creating the database has it at 0 bytes
// until bbolt writes its first pages, a moment after it made it.
func statSettled(path string) (os.FileInfo, error) {
	fi, err := os.Stat(path)
	for i := 0; i < 5 && err == nil && fi.Mode().IsRegular() && fi.Size() == 0; i++ {
		time.Sleep(20 * time.Millisecond)
		fi, err = os.Stat(path)
	}
	return fi, err
}

// trim truncates the file to its last page in use, if this handle wrote
// to it: a file nothing was committed to is left as it was.
func (db *DB) trim() error {
	var used int64
	wrote := false
	err := db.bolt.View(func(tx *bolt.Tx) error {
		used, wrote = tx.Size(), tx.ID() != db.openTx
		return nil
	})
	if err != nil || !wrote {
		return err
	}
	fi, err := os.Stat(db.path)
	if err != nil || fi.Size() <= used {
		return err
	}
	if err := os.Truncate(db.path, used); err != nil {
		return fmt.Errorf("trim %s: %w", db.path, err)
	}
	return nil
}

// Size returns the size in bytes of the file's pages in use (the file is
// that long once closed).
func (db *DB) Size() (int64, error) {
	var n int64
	err := db.bolt.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n, err
}

func idKey(id uint64) []byte { return binary.BigEndian.AppendUint64(nil, id) }

// Runs returns every run in the file, oldest first.
func (db *DB) Runs() ([]Run, error) {
	var runs []Run
	err := db.view(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketRuns)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			var r Run
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("run %x: %w", k, err)
			}
			runs = append(runs, r)
			return nil
		})
	})
	slices.SortStableFunc(runs, func(a, b Run) int {
		switch {
		case a.StartNS < b.StartNS:
			return -1
		case a.StartNS > b.StartNS:
			return 1
		}
		return 0
	})
	return runs, err
}

// Run returns the run named ref, or, if no run has that name, the run whose
// id is ref. It returns an error wrapping ErrNoRun if there is none.
func (db *DB) Run(ref string) (Run, error) {
	var r Run
	err := db.view(func(tx *bolt.Tx) error {
		var err error
		r, err = lookupRun(tx, ref)
		return err
	})
	return r, err
}

func lookupRun(tx *bolt.Tx, ref string) (Run, error) {
	runs := tx.Bucket(bucketRuns)
	if runs == nil {
		return Run{}, fmt.Errorf("run %q: %w", ref, ErrNoRun)
	}
	var v []byte
	if id := tx.Bucket(bucketNames).Get([]byte(ref)); id != nil {
		v = runs.Get(id)
	} else if n, err := strconv.ParseUint(ref, 10, 64); err == nil {
		v = runs.Get(idKey(n))
	}
	if v == nil {
		return Run{}, fmt.Errorf("run %q: %w", ref, ErrNoRun)
	}
	var r Run
	if err := json.Unmarshal(v, &r); err != nil {
		return Run{}, fmt.Errorf("run %q: %w", ref, err)
	}
	return r, nil
}

func putRun(tx *bolt.Tx, r Run) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketRuns).Put(idKey(r.ID), v)
}

// DeleteOptions are Delete's options; the zero value is the safe one.
type DeleteOptions struct {
	// Force removes a run whose recorder stopped before its last commit
	// (ErrStaleWriter), or runs where it cannot be told. A run whose
	// recorder is alive is refused even so (ErrRecording).
	Force bool
}

// Delete removes a run and all its data. A run an Appender is writing is
// refused with ErrRecording while its process is alive: its next commit
// would write part of the run back (see storage/live.go).
func (db *DB) Delete(ref string, opts DeleteOptions) (Run, error) {
	var r Run
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		if r, err = lookupRun(tx, ref); err != nil {
			return err
		}
		if err := checkWriter(r, opts.Force); err != nil {
			return err
		}
		return deleteRun(tx, r)
	})
	return r, err
}

func deleteRun(tx *bolt.Tx, r Run) error {
	if err := tx.Bucket(bucketRuns).Delete(idKey(r.ID)); err != nil {
		return err
	}
	if err := tx.Bucket(bucketNames).Delete([]byte(r.Name)); err != nil {
		return err
	}
	err := tx.Bucket(bucketData).DeleteBucket(idKey(r.ID))
	if errors.Is(err, berrors.ErrBucketNotFound) {
		return nil
	}
	return err
}

// SetTags sets (or, with an empty value, removes) tags of a run.
func (db *DB) SetTags(ref string, tags map[string]string) (Run, error) {
	var r Run
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		if r, err = lookupRun(tx, ref); err != nil {
			return err
		}
		if r.Tags == nil {
			r.Tags = map[string]string{}
		}
		for k, v := range tags {
			if v == "" {
				delete(r.Tags, k)
			} else {
				r.Tags[k] = v
			}
		}
		return putRun(tx, r)
	})
	return r, err
}

// seriesTable reads a run's series table. Parsed tables are cached by
// their bytes, so iterators over a run do not parse it again and again.
func seriesTable(tx *bolt.Tx, id uint64) ([]seriesInfo, error) {
	b := tx.Bucket(bucketData).Bucket(idKey(id))
	if b == nil {
		return nil, nil
	}
	v := b.Get(keySeries)
	if v == nil {
		return nil, nil
	}
	seriesCache.Lock()
	defer seriesCache.Unlock()
	if c, ok := seriesCache.m[id]; ok && bytes.Equal(c.raw, v) {
		return c.table, nil
	}
	var s []seriesInfo
	if err := json.Unmarshal(v, &s); err != nil {
		return nil, fmt.Errorf("series table of run %d: %w", id, err)
	}
	if len(seriesCache.m) > 64 {
		clear(seriesCache.m)
	}
	seriesCache.m[id] = cachedSeries{raw: bytes.Clone(v), table: s}
	return s, nil
}

type cachedSeries struct {
	raw   []byte
	table []seriesInfo
}

var seriesCache = struct {
	sync.Mutex
	m map[uint64]cachedSeries
}{m: map[uint64]cachedSeries{}}

// Check verifies that every chunk of every run decodes, belongs to a known
// series, and gives each series its kind's columns, and that its summary,
// where it has one, is the one its samples give. It reads the whole
// file; it is meant for tests and for `memrec runs --check`. Every run is
// checked, a damaged one does not hide the next: the problems come back as
// a *CheckError, which matches ErrCorrupt (errors.Is) where a chunk is
// damaged. An error reading the file itself ends the check.
func (db *DB) Check() error {
	ce := &CheckError{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketRuns).ForEach(func(k, _ []byte) error {
			ce.Runs++
			id := binary.BigEndian.Uint64(k)
			p := RunProblem{ID: id}
			known, err := knownSeries(tx, id)
			if err != nil {
				p.Err = fmt.Errorf("run %d: %w", id, err)
				ce.Problems = append(ce.Problems, p)
				return nil
			}
			b := tx.Bucket(bucketData).Bucket(k)
			if b == nil {
				return nil
			}
			var d chunk.Decoded
			chunks := b.Bucket(keyChunks)
			if chunks == nil {
				p.Err = fmt.Errorf("run %d: %w: no chunks bucket", id, ErrCorrupt)
				ce.Problems = append(ce.Problems, p)
				return nil
			}
			sums := b.Bucket(keySummaries)
			_ = chunks.ForEach(func(ck, cv []byte) error {
				stored := getIn(sums, ck)
				version := byte(summaryVersion)
				if len(stored) > 0 {
					version = stored[0] // a file's older summaries are checked as written
				}
				sum, err := checkChunk(ck, cv, known, &d, version)
				if err == nil && stored != nil {
					err = sameSummary(stored, sum)
				}
				if err != nil {
					if p.Err == nil {
						p.Err = fmt.Errorf("run %d: chunk %x: %w", id, ck, err)
					}
					p.BadChunks++
				}
				return nil
			})
			if p.Err != nil {
				ce.Problems = append(ce.Problems, p)
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	if len(ce.Problems) == 0 {
		return nil
	}
	return ce
}

// CheckError is what Check found: each damaged run's first problem, of
// Runs checked.
type CheckError struct {
	Runs     int
	Problems []RunProblem
}

// RunProblem is one damaged run: its first problem and how many of its
// chunks are damaged (0 when the run's tables are).
type RunProblem struct {
	ID        uint64
	Err       error
	BadChunks int
}

func (e *CheckError) Error() string {
	msgs := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		msgs[i] = p.Err.Error()
		if p.BadChunks > 1 {
			msgs[i] += fmt.Sprintf(" (and %d more damaged chunks)", p.BadChunks-1)
		}
	}
	return fmt.Sprintf("%d of %d runs have problems: %s", len(e.Problems), e.Runs, strings.Join(msgs, "; "))
}

// Unwrap is the runs' problems, for errors.Is and errors.As.
func (e *CheckError) Unwrap() []error {
	errs := make([]error, len(e.Problems))
	for i, p := range e.Problems {
		errs[i] = p.Err
	}
	return errs
}

// knownSeries is a run's series table by series id.
func knownSeries(tx *bolt.Tx, run uint64) (map[uint32]seriesInfo, error) {
	series, err := seriesTable(tx, run)
	known := make(map[uint32]seriesInfo, len(series))
	for _, s := range series {
		known[s.ID] = s
	}
	return known, err
}

// checkChunk decodes every series of one chunk, and returns the summary
// of the given version its samples give (nil: it holds no summarised
// series), read off the same decoding.
func checkChunk(key, value []byte, known map[uint32]seriesInfo, d *chunk.Decoded, version byte) (sum []byte, err error) {
	group, _, _, ok := parseChunkKey(key)
	if !ok {
		return nil, fmt.Errorf("%w: bad key", ErrCorrupt)
	}
	body, err := chunk.Body(value) // the checksum once, not once a series
	if err != nil {
		return nil, err
	}
	ids, _, err := chunk.SeriesIDsBody(body)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids) // a summary's order
	sum = []byte{version}
	for _, id := range ids {
		s, ok := known[id]
		if !ok || s.Group != group || schemas[s.Kind] == nil {
			return nil, fmt.Errorf("%w: holds unknown series %d", ErrCorrupt, id)
		}
		if _, err := chunk.DecodeSeriesBody(body, id, d); err != nil {
			return nil, err
		}
		if err := schemas[s.Kind].checkCols(d); err != nil {
			return nil, err
		}
		if n := summaryCols(version, s.Kind, len(d.Ints)); n > 0 && len(d.T) > 0 {
			sum = appendSummary(sum, id, d.T, d.Ints[:n])
		}
	}
	return sealSummary(sum), nil
}

// boltMagic is the number at byte 16 of a bbolt file: its first page's
// header is 16 bytes (page id, flags, count, overflow), then the meta
// record starts with this magic and the format version, 2, both in the
// writer's byte order (little endian on every machine memrec runs on).
const boltMagic = 0xED0CDAED

// IsDatabaseFile reports whether path starts like a bbolt database,
// memrec's or another program's. It reads 24 bytes and takes no lock, so
// it also answers for a file a recorder is writing.
func IsDatabaseFile(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var b [24]byte
	if _, err := io.ReadFull(f, b[:]); err != nil {
		return false
	}
	return binary.LittleEndian.Uint32(b[16:]) == boltMagic && binary.LittleEndian.Uint32(b[20:]) == 2
}
