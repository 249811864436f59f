package storage

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/storage/internal/chunk"
	"github.com/memrec/memrec/storage/wire"
)

// Range bounds of a time range scan, Unix ns. All reads every sample.
const (
	MinTime int64 = math.MinInt64
	MaxTime int64 = math.MaxInt64
)

// Iter walks one series over a time range, decoding one chunk at a time: a
// run of any length is read in constant memory. Use it as
//
//	for it.Next() { s := it.At() ... }
//	if err := it.Err(); err != nil { ... }
//
// An exporter that writes every sample reads it a block (a decoded chunk)
// at a time instead, and never mixes the two ways:
//
//	for ts := it.NextBlock(); len(ts) > 0; ts = it.NextBlock() {
//		for i := range ts { s := it.BlockAt(i) ... }
//	}
//	if err := it.Err(); err != nil { ... }
//
// An Iter is not safe for concurrent use; iterators of one DB may be used
// from several goroutines at once, one each. It holds no transaction
// between chunks, so it needs no Close; it must not be used after the DB
// is closed. A zero Iter is not usable: get one from the DB.
type Iter[T any] struct {
	db       *DB
	run      uint64
	group    uint32
	id       uint32
	found    bool
	from, to int64 // µs, to exclusive
	lastKey  []byte
	started  bool
	d        *chunk.Decoded
	i        int
	lo       int // the first sample of it.d that NextBlock returned
	// get is the schema's: one call a sample, not two through a closure.
	get    func(d *chunk.Decoded, i int, k seriesKey) T
	fields func(d *chunk.Decoded, i int, dst []int64) []int64 // the schema's
	key    seriesKey
	schema *schema // the columns a decoded chunk must have
	hi     int     // end of the samples of it.d in range
	last   bool    // it.d reaches past the range's end: no chunk after it
	err    error
	done   bool
	// overview: a chunk wholly in range that has a summary is read as its
	// pieces (into pieces, it.d left empty), not decoded (Overview).
	overview bool
	pieces   []Piece
}

// Next advances to the next sample; it returns false at the end or on error.
func (it *Iter[T]) Next() bool {
	if it.i+1 < it.hi || it.more() { // within the decoded chunk's part in range, or the next's
		it.i++
		return true
	}
	return false
}

// more decodes chunks until one has samples in range after it.i; false
// at the end or on error, the buffers released.
func (it *Iter[T]) more() bool {
	for it.i+1 >= it.hi {
		if it.done || it.last {
			it.done = true
			it.release()
			return false
		}
		it.load()
		if len(it.pieces) > 0 {
			return true
		}
	}
	return true
}

// At returns the current sample.
func (it *Iter[T]) At() T { return it.get(it.d, it.i, it.key) }

// NextBlock is Next a chunk at a time, for the exports and Blocks: it
// moves past the samples of the current chunk to those of the next one in
// range and returns their times (µs, as stored: ns / 1000), empty at the
// end or on error; BlockAt(i) is then the sample of time ts[i]. The slice
// is valid until the next call. Do not mix it with Next.
func (it *Iter[T]) NextBlock() (ts []int64) {
	if !it.more() {
		return nil
	}
	return it.take()
}

// take moves past the samples of the decoded chunk that are in range
// and returns their times (µs).
func (it *Iter[T]) take() []int64 {
	it.lo, it.i = it.i+1, it.hi-1
	return it.d.T[it.lo:it.hi]
}

// BlockAt is the sample of time ts[i] of the block NextBlock returned.
func (it *Iter[T]) BlockAt(i int) T { return it.get(it.d, it.lo+i, it.key) }

// BlockFields appends to dst the values of the fields of BlockAt(i) that
// are not keys, in the order of the kind's wire table (DeviceFields,
// ProcFields, TorchFields), as that table's Get reads them from BlockAt(i):
// for an export that writes every sample, without building each one.
func (it *Iter[T]) BlockFields(dst []int64, i int) []int64 {
	j := it.lo + i
	if it.fields != nil {
		return it.fields(it.d, j, dst)
	}
	for _, c := range it.d.Ints {
		dst = append(dst, c[j])
	}
	for range len(it.schema.ints) - len(it.d.Ints) { // later columns a series written before them lacks
		dst = append(dst, 0)
	}
	return dst
}

// Repeats says whether BlockAt(i) has every stored column but the time
// equal to BlockAt(i-1)'s, and so the same values: an export may then copy
// the line before instead of decoding and formatting the sample. It is
// false for i = 0.
func (it *Iter[T]) Repeats(i int) bool {
	j := it.lo + i
	if i == 0 {
		return false
	}
	for _, c := range it.d.Ints {
		if c[j] != c[j-1] {
			return false
		}
	}
	for _, c := range it.d.Strs {
		if c[j] != c[j-1] {
			return false
		}
	}
	return true
}

// RepeatsUntil is the first j > i such that Repeats(j) is false (the
// block's length if none): the samples of i+1 to j-1 repeat that of i.
// An export asks it once a run of repeats, column by column, where
// Repeats would be asked once a sample, every column each time.
func (it *Iter[T]) RepeatsUntil(i int) int {
	lo, end := it.lo+i, it.hi
	for _, c := range it.d.Ints {
		c := c[:end]
		j := lo + 1
		for j < end && c[j] == c[lo] {
			j++
		}
		end = j
	}
	for _, c := range it.d.Strs {
		c := c[:end]
		j := lo + 1
		for j < end && c[j] == c[lo] {
			j++
		}
		end = j
	}
	return end - it.lo
}

// Err returns the error that stopped the iteration, if any.
func (it *Iter[T]) Err() error { return it.err }

// decodedPool recycles the decode buffers of finished iterators: a fresh
// iterator would otherwise allocate and clear them for every series read.
var decodedPool = sync.Pool{New: func() any { return new(chunk.Decoded) }}

// load decodes the next chunk of the series into it.d and sets the span
// [i+1, hi) of its samples that fall in the range.
func (it *Iter[T]) load() {
	if it.d == nil {
		it.d = decodedPool.Get().(*chunk.Decoded)
	}
	it.d.T, it.i, it.hi = it.d.T[:0], -1, 0
	it.pieces = it.pieces[:0]
	if !it.found {
		it.done = true
		return
	}
	defer func() {
		t := it.d.T
		lo := sort.Search(len(t), func(i int) bool { return t[i] >= it.from })
		it.hi = sort.Search(len(t), func(i int) bool { return t[i] >= it.to })
		it.last = it.hi < len(t)
		it.i = lo - 1
	}()
	err := it.db.bolt.View(func(tx *bolt.Tx) error {
		data, chunks, err := runChunks(tx, it.run)
		if err != nil || data == nil {
			it.done = true
			return err
		}
		var sums *bolt.Bucket
		if it.overview {
			sums = data.Bucket(keySummaries)
		}
		c := chunks.Cursor()
		k, v := resumeChunks(c, it.group, it.from, &it.started, it.lastKey)
		for ; k != nil; k, v = c.Next() {
			group, t0, _, ok := parseChunkKey(k)
			if !ok || group != it.group || t0 >= it.to {
				it.done = true
				return nil
			}
			it.lastKey = append(it.lastKey[:0], k...)
			if sum := getIn(sums, k); sum != nil {
				switch inRange, err := it.readPieces(sum); {
				case err != nil:
					return fmt.Errorf("run %d chunk %x: %w", it.run, k, err)
				case inRange:
					return nil
				case len(it.pieces) == 0:
					continue // the chunk holds none of the series, or none of it in range
				}
				it.pieces = it.pieces[:0] // the range cuts the chunk: its samples
			}
			body, err := it.db.checked.body(it.run, k, v)
			found := false
			if err == nil {
				found, err = it.db.rowTimes.decode(it.run, k, v, body, it.id, it.d)
			}
			if err == nil && found {
				err = it.schema.checkCols(it.d)
			}
			if err != nil {
				return fmt.Errorf("run %d chunk %x: %w", it.run, k, err)
			}
			if found && len(it.d.T) > 0 && it.d.T[len(it.d.T)-1] >= it.from {
				return nil
			}
		}
		it.done = true
		return nil
	})
	if err != nil {
		it.err, it.done = err, true
		it.d.T = it.d.T[:0]
	}
}

// runChunks returns a run's data bucket and its chunks bucket; nil ones
// when the run has no data.
func runChunks(tx *bolt.Tx, run uint64) (data, chunks *bolt.Bucket, err error) {
	data = tx.Bucket(bucketData).Bucket(idKey(run))
	if data == nil {
		return nil, nil, nil
	}
	if chunks = data.Bucket(keyChunks); chunks == nil {
		return nil, nil, fmt.Errorf("run %d: %w: no chunks bucket", run, ErrCorrupt)
	}
	return data, chunks, nil
}

// resumeChunks moves c to the chunk after lastKey, the last one a walk of
// group read, or on the walk's first call (started false, then set) to the
// first that may hold samples at or after from (firstChunk).
func resumeChunks(c *bolt.Cursor, group uint32, from int64, started *bool, lastKey []byte) (k, v []byte) {
	if !*started {
		*started = true
		return firstChunk(c, group, from)
	}
	c.Seek(lastKey)
	return c.Next()
}

// firstChunk moves c to the first chunk of group that may hold samples at
// or after from (µs): the one before the first chunk that starts there may
// span it. It returns the chunk's key and value, or a key of another group
// (or nil) when the group has none.
func firstChunk(c *bolt.Cursor, group uint32, from int64) (k, v []byte) {
	start := chunkKey(group, from, 0)
	var pk, pv []byte
	if k, _ = c.Seek(start); k == nil {
		pk, pv = c.Last()
	} else {
		pk, pv = c.Prev()
	}
	if pk != nil && bytes.HasPrefix(pk, start[:4]) {
		return pk, pv
	}
	return c.Seek(start)
}

// getIn is b.Get(k), nil where b is.
func getIn(b *bolt.Bucket, k []byte) []byte {
	if b == nil {
		return nil
	}
	return b.Get(k)
}

// readPieces reads the series' pieces from a chunk's summary into
// it.pieces; inRange says they lie wholly in the range, and they are left
// empty where the chunk holds none of the series or ends before the range.
func (it *Iter[T]) readPieces(sum []byte) (inRange bool, err error) {
	ps, found, err := summaryPieces(sum, it.id, it.pieces[:0])
	it.pieces = ps
	if err != nil || !found {
		it.pieces = it.pieces[:0]
		return false, err
	}
	first, last := ps[0].T0/1000, ps[len(ps)-1].T1/1000 // µs, as stored
	if last < it.from {
		it.pieces = it.pieces[:0]
		return false, nil
	}
	return first >= it.from && last < it.to, nil
}

// release returns the decode buffers to the pool once iteration is over.
func (it *Iter[T]) release() {
	if it.d != nil {
		decodedPool.Put(it.d)
		it.d = nil
	}
}

func ceilMicro(ns int64) int64 {
	if ns == MaxTime || ns == MinTime {
		return ns
	}
	return -floorDiv(-ns, 1000)
}

func newIter[T any](db *DB, r Run, sc *rowSchema[T], k seriesKey, from, to int64) *Iter[T] {
	if w := r.window; w != nil {
		from, to = max(from, w.from), min(to, w.to)
	}
	// A stored time t µs is t*1000 ns: keep t*1000 >= from and t*1000 < to.
	it := &Iter[T]{db: db, run: r.ID, from: ceilMicro(from), to: ceilMicro(to), i: -1, schema: &sc.schema,
		get: sc.get, fields: sc.fields, key: k}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		series, err := seriesTable(tx, r.ID)
		for _, s := range series {
			if s.Kind == k.kind && s.GPU == k.gpu && s.PID == k.pid {
				it.id, it.group, it.found = s.ID, s.Group, true
			}
		}
		return err
	})
	if err != nil {
		it.err, it.done = err, true
	}
	return it
}

// DeviceSamples iterates the device samples of one GPU of a run in [from, to).
func (db *DB) DeviceSamples(r Run, gpu int, from, to int64) *Iter[DeviceSample] {
	return newIter(db, r, &deviceSchema, seriesKey{kind: kindDevice, gpu: gpu}, from, to)
}

// ProcSamples iterates one process's samples on one GPU in [from, to).
func (db *DB) ProcSamples(r Run, gpu, pid int, from, to int64) *Iter[ProcSample] {
	return newIter(db, r, &procSchema, seriesKey{kind: kindProc, gpu: gpu, pid: pid}, from, to)
}

// TorchSamples iterates one process's allocator samples on one GPU in [from, to).
func (db *DB) TorchSamples(r Run, gpu, pid int, from, to int64) *Iter[TorchSample] {
	return newIter(db, r, &torchSchema, seriesKey{kind: kindTorch, gpu: gpu, pid: pid}, from, to)
}

// SiteSamples iterates one process's site snapshots on one GPU in [from,
// to): the rows of a snapshot share its time, its wire.SiteUntracked row first.
func (db *DB) SiteSamples(r Run, gpu, pid int, from, to int64) *Iter[SiteSample] {
	return newIter(db, r, &siteSchema, seriesKey{kind: kindSite, gpu: gpu, pid: pid}, from, to)
}

// Marks iterates the marks of a run in [from, to), in time order.
func (db *DB) Marks(r Run, from, to int64) *Iter[Mark] {
	return newIter(db, r, &markSchema, seriesKey{kind: kindMark}, from, to)
}

// StepAt says whether BlockAt(i) of a Marks iterator's block is a step
// mark, and gives its time (ns), step and rank: a reader of a run's steps,
// most of its marks, need not build each mark. It reads what BlockAt reads.
func StepAt(it *Iter[Mark], i int) (t int64, step, rank int, ok bool) {
	j := it.lo + i
	if MarkKind(it.d.Strs[0][j]) != wire.MarkStep {
		return 0, 0, 0, false
	}
	c := it.d.Ints
	return it.d.T[j] * 1000, optDecode(c[1][j]), optDecode(c[2][j]), true
}

// SeriesKind is what a stored series holds.
type SeriesKind string

// The kinds of series a run lists (Series); marks are read with Marks.
const (
	SeriesDevice SeriesKind = "device"
	SeriesProc   SeriesKind = "proc"
	SeriesTorch  SeriesKind = "torch"
	SeriesSites  SeriesKind = "sites"
	seriesMarks  SeriesKind = "mark"
)

// String is the kind's name.
func (k SeriesKind) String() string { return string(k) }

// SeriesRef names one stored series of a run.
type SeriesRef struct {
	Kind SeriesKind `json:"kind"`
	GPU  int        `json:"gpu"`
	PID  int        `json:"pid,omitempty"`
}

// Series lists the device, process, allocator and site series of a run, ordered
// by kind, GPU and pid.
func (db *DB) Series(r Run) ([]SeriesRef, error) {
	var out []SeriesRef
	err := db.bolt.View(func(tx *bolt.Tx) error {
		series, err := seriesTable(tx, r.ID)
		for _, s := range series {
			if sc := schemas[s.Kind]; sc != nil && s.Kind != kindMark {
				out = append(out, SeriesRef{sc.name, s.GPU, s.PID})
			}
		}
		return err
	})
	order := map[SeriesKind]int{SeriesDevice: 0, SeriesProc: 1, SeriesTorch: 2, SeriesSites: 3, SeriesBudget: 4}
	slices.SortFunc(out, func(a, b SeriesRef) int {
		if a.Kind != b.Kind {
			return order[a.Kind] - order[b.Kind]
		}
		if a.GPU != b.GPU {
			return a.GPU - b.GPU
		}
		return a.PID - b.PID
	})
	return out, err
}
