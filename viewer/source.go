package viewer

import (
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
)

// Source is where the viewer's data comes from: a database file
// (DBSource) or a recording as it happens (the recorder's live index),
// wired together in cmd. Implementations must be safe for concurrent use:
// the server answers requests in parallel.
type Source interface {
	// Runs lists the runs the source can show, oldest first.
	Runs() ([]storage.Run, error)
	// Index returns the run's index (its lines, marks and steps), built
	// on first use, and the reader of its samples where the index keeps
	// none (nil: the index answers from its own buckets and ring).
	Index(run storage.Run) (*series.Index, Reader, error)
}

// SiteSource is a Source that also reads allocation-site snapshots
// (DBSource from the file; the live page's, in cmd, from the snapshots the
// recorder keeps in memory). Implementations must be safe for concurrent
// use.
type SiteSource interface {
	// SiteGPUs lists the GPUs of the run that have site snapshots, in
	// increasing order; none is an empty list.
	SiteGPUs(run storage.Run) ([]int, error)
	// Sites returns one GPU's site snapshots, read on first use; a Sites
	// of Len 0 when the GPU has none.
	Sites(run storage.Run, gpu int) (*sites.Sites, error)
}

// Reader reads one line's samples of a run in a time range.
type Reader func(run storage.Run, k series.Key) series.RawReader

// ErrLockedStale says the database is locked by a recorder and what is
// shown was read before it took the file.
var ErrLockedStale = errors.New("the database is being written by a recording; showing what was read before")

// DBSource reads a database file. It holds the file's shared lock only
// while it reads: a handle is opened for a request (requests in flight
// share it) and closed linger after the last one ends, so a recorder that
// starts on the same file waits at most that long for it (its store holds
// samples in memory meanwhile and writes them once it has the file, see
// recorder.HeldStore). While a recorder holds the file, Open fails after
// LockTimeout with storage.ErrLocked; the source then answers from the
// indexes it built before, at their buckets' resolution, and says so.
type DBSource struct {
	path        string
	lockTimeout time.Duration
	linger      time.Duration

	mu    sync.Mutex // guards db, users, timer
	db    *storage.DB
	users int
	timer *time.Timer

	imu     sync.Mutex // guards indexes, sweep and each dbIndex's used and bytes
	indexes map[uint64]*dbIndex
	sweep   *time.Timer // the next idle sweep, while indexes are kept
	// runs is the run list read last, kept for when the file is locked.
	runs   []storage.Run
	cmu    sync.Mutex  // guards recent
	recent []*pairRead // the newest reads, oldest first
	smu    sync.Mutex  // guards sites
	sites  map[siteKey]*dbSites
	// Built, when set, is told of each index built: the run, its samples
	// and how long the scan took (the command prints it).
	Built func(run storage.Run, samples int64, took time.Duration)
	// direct and refineMax are directSamples and refineSamples (tests set
	// them lower).
	direct, refineMax int64
	// maxIndexBytes and idle bound the indexes kept: MaxIndexBytes and
	// IndexIdle (tests set them lower); now is the clock they are kept by.
	maxIndexBytes int64
	idle          time.Duration
	now           func() time.Time
}

type dbIndex struct {
	once   sync.Once
	done   bool // once has run (under imu)
	x      *series.Index
	counts storage.Counts
	end    int64
	err    error
	prev   *series.Index // the index this one replaces, for while the file is locked
	// refined is closed once x is the index of every sample, or will not
	// be (see refine).
	refined chan struct{}
	// used is when the index was last asked for, bytes what x takes (0
	// until built): what eviction goes by.
	used  time.Time
	bytes int64
}

// The indexes a DBSource keeps: at most MaxIndexBytes of them, the least
// recently used given up first (the one in use is kept whatever its
// size), and none unused for IndexIdle. A run asked for again is indexed
// again. The site snapshots read for the sites charts are given up with
// their run's index.
const (
	MaxIndexBytes = 512 << 20
	IndexIdle     = 5 * time.Minute
)

// How a run's index is built. An index of every sample costs memory and
// time in proportion to the samples; one from the chunks' summaries is
// several times smaller and quicker to build, but windows of fewer samples
// a pixel than a piece holds then read their samples from the file, which
// is several times slower than the buckets of every sample (see
// bench/README.md, "Figures behind the code's constants"). So a run of up
// to directSamples samples is
// indexed from every sample at once; a larger one from its summaries
// first, so the page draws at once, and then from every sample in the
// background, served once whole; past refineSamples (about 250 MiB of
// index) it stays with the summaries'.
const (
	directSamples = 20_000_000
	refineSamples = 300_000_000
)

// NewDBSource returns a source over the database file at path; nothing is
// opened until the first request.
func NewDBSource(path string) *DBSource {
	return &DBSource{path: path, lockTimeout: 250 * time.Millisecond, linger: 200 * time.Millisecond, indexes: map[uint64]*dbIndex{},
		sites: map[siteKey]*dbSites{}, direct: directSamples, refineMax: refineSamples,
		maxIndexBytes: MaxIndexBytes, idle: IndexIdle, now: time.Now}
}

// with runs f with the database open (shared lock), opening it if no
// other request has it open.
func (s *DBSource) with(f func(db *storage.DB) error) error {
	s.mu.Lock()
	if s.db == nil {
		db, err := storage.Open(s.path, storage.Options{ReadOnly: true, LockTimeout: s.lockTimeout})
		if err != nil {
			s.mu.Unlock()
			return err
		}
		s.db = db
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.users++
	db := s.db
	s.mu.Unlock()
	defer s.release()
	return f(db)
}

func (s *DBSource) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users--
	if s.users > 0 || s.db == nil {
		return
	}
	s.timer = time.AfterFunc(s.linger, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.users == 0 && s.db != nil {
			s.db.Close()
			s.db = nil
		}
	})
}

// Close closes the file if it is open. No request may be in flight.
func (s *DBSource) Close() error {
	s.imu.Lock()
	if s.sweep != nil {
		s.sweep.Stop()
		s.sweep = nil
	}
	s.imu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.timer != nil {
		s.timer.Stop()
	}
	if s.db == nil {
		return nil
	}
	err := s.db.Close()
	s.db = nil
	return err
}

// Runs lists the file's runs; while a recorder holds the file, the list
// read before with ErrLockedStale (or storage.ErrLocked if none was).
func (s *DBSource) Runs() ([]storage.Run, error) {
	var runs []storage.Run
	err := s.with(func(db *storage.DB) error {
		var err error
		runs, err = db.Runs()
		return err
	})
	s.imu.Lock()
	defer s.imu.Unlock()
	if errors.Is(err, storage.ErrLocked) && s.runs != nil {
		return s.runs, fmt.Errorf("%w: %w", ErrLockedStale, err)
	}
	if err == nil {
		s.runs = runs
	}
	return runs, err
}

// Index returns the run's index, scanning the run once; a run that has
// grown since (an incomplete run a recorder went on writing) is scanned
// again. While the file is locked the index built before is returned,
// with no reader.
func (s *DBSource) Index(run storage.Run) (*series.Index, Reader, error) {
	s.imu.Lock()
	di := s.indexes[run.ID]
	if di != nil && di.done && (di.err != nil || di.counts != run.Counts || di.end != run.EndNS) {
		prev := di.x
		if prev == nil {
			prev = di.prev
		}
		di = &dbIndex{prev: prev, refined: make(chan struct{})}
	}
	if di == nil {
		di = &dbIndex{refined: make(chan struct{})}
	}
	if di.x == nil && !di.done {
		di.counts, di.end = run.Counts, run.EndNS
	}
	di.used = s.now()
	s.indexes[run.ID] = di
	s.imu.Unlock()
	di.once.Do(func() {
		start := time.Now()
		c := run.Counts
		samples := c.Samples + c.ProcSamples + c.TorchSamples
		var x *series.Index
		err := s.with(func(db *storage.DB) error {
			var err error
			x, err = buildIndex(db, run, samples > s.direct)
			return err
		})
		s.imu.Lock()
		di.x, di.err, di.done = x, err, true
		if x != nil {
			di.bytes = x.Bytes()
		}
		s.evictLocked(run.ID)
		s.imu.Unlock()
		if err == nil && s.Built != nil {
			s.Built(run, x.Samples(), time.Since(start))
		}
		if err != nil || samples > s.refineMax || !x.Coarse() {
			close(di.refined)
			return
		}
		go s.refine(run, di)
	})
	s.imu.Lock()
	x, err := di.x, di.err
	s.imu.Unlock()
	switch {
	case err == nil:
		return x, s.reader, nil
	case errors.Is(err, storage.ErrLocked) && di.prev != nil:
		return di.prev, nil, fmt.Errorf("%w: %w", ErrLockedStale, err)
	}
	return nil, nil, err
}

// refine builds the run's index again from every sample, and serves it
// in place of the one from the summaries once it is whole: windows of
// fewer samples a pixel than a piece holds are then drawn from its
// buckets, not read from the file. Until then, and where it fails (the
// file locked by a recorder meanwhile), the first index serves.
func (s *DBSource) refine(run storage.Run, di *dbIndex) {
	defer close(di.refined)
	var x *series.Index
	err := s.with(func(db *storage.DB) error {
		var err error
		x, err = buildIndex(db, run, false)
		return err
	})
	if err != nil {
		return
	}
	s.imu.Lock()
	di.x, di.bytes = x, x.Bytes()
	if s.indexes[run.ID] == di {
		s.evictLocked(run.ID)
	}
	s.imu.Unlock()
}

// evictLocked gives up the least recently used indexes but keep's until
// those kept take at most maxIndexBytes, and arms the idle sweep. The
// caller holds imu.
func (s *DBSource) evictLocked(keep uint64) {
	var total int64
	for _, di := range s.indexes {
		total += di.bytes
	}
	for total > s.maxIndexBytes {
		var lru uint64
		var oldest *dbIndex
		for id, di := range s.indexes {
			if id != keep && di.done && (oldest == nil || di.used.Before(oldest.used)) {
				lru, oldest = id, di
			}
		}
		if oldest == nil {
			break
		}
		total -= oldest.bytes
		s.dropLocked(lru)
	}
	if s.sweep == nil && len(s.indexes) > 0 {
		s.sweep = time.AfterFunc(s.idle, s.sweepIdle)
	}
}

// dropLocked gives up a run's index and its site snapshots. The caller
// holds imu.
func (s *DBSource) dropLocked(id uint64) {
	delete(s.indexes, id)
	s.smu.Lock()
	for k := range s.sites {
		if k.run == id {
			delete(s.sites, k)
		}
	}
	s.smu.Unlock()
}

// sweepIdle gives up the indexes unused for idle, and comes again while
// any is kept. What was given up is handed back to the system at once: a
// viewer left open holds no more than the indexes in use.
func (s *DBSource) sweepIdle() {
	s.imu.Lock()
	s.sweep = nil
	var freed int64
	now := s.now()
	for id, di := range s.indexes {
		if di.done && now.Sub(di.used) >= s.idle {
			freed += di.bytes
			s.dropLocked(id)
		}
	}
	if len(s.indexes) > 0 {
		s.sweep = time.AfterFunc(s.idle/4+time.Millisecond, s.sweepIdle)
	}
	s.imu.Unlock()
	if freed > 0 {
		debug.FreeOSMemory()
	}
}

// kept reports how many indexes are kept and the bytes they take (tests).
func (s *DBSource) kept() (n int, bytes int64) {
	s.imu.Lock()
	defer s.imu.Unlock()
	for _, di := range s.indexes {
		bytes += di.bytes
	}
	return len(s.indexes), bytes
}

// waitRefined waits until the run's index is refined (refine) or will
// not be, for tests and benchmarks.
func (s *DBSource) waitRefined(run storage.Run) {
	s.imu.Lock()
	di := s.indexes[run.ID]
	s.imu.Unlock()
	if di != nil {
		<-di.refined
	}
}

type siteKey struct {
	run uint64
	gpu int
}

// dbSites is one GPU's site snapshots as read for a run's counts and end:
// a run that has grown since is read again.
type dbSites struct {
	once   sync.Once
	counts storage.Counts
	end    int64
	sites  *sites.Sites
	err    error
}

// SiteGPUs lists the run's GPUs with site snapshots, from its series.
func (s *DBSource) SiteGPUs(run storage.Run) ([]int, error) {
	var gpus []int
	err := s.with(func(db *storage.DB) error {
		refs, err := db.Series(run)
		for _, r := range refs {
			if r.Kind == storage.SeriesSites && !slices.Contains(gpus, r.GPU) {
				gpus = append(gpus, r.GPU)
			}
		}
		return err
	})
	slices.Sort(gpus)
	return gpus, err
}

// Sites reads one GPU's site snapshots once per state of the run (a
// failed read is tried again on the next call).
func (s *DBSource) Sites(run storage.Run, gpu int) (*sites.Sites, error) {
	k := siteKey{run.ID, gpu}
	s.smu.Lock()
	ds := s.sites[k]
	if ds == nil || ds.counts != run.Counts || ds.end != run.EndNS {
		ds = &dbSites{counts: run.Counts, end: run.EndNS}
		s.sites[k] = ds
	}
	s.smu.Unlock()
	ds.once.Do(func() {
		ds.err = s.with(func(db *storage.DB) error {
			// A budget per read: the index cache bounds what the reads
			// it keeps hold together.
			in, err := analysis.SitesInput(db, run, gpu, storage.NewDecodeBudget(storage.DefaultDecodeBudget))
			if err != nil {
				return err
			}
			ds.sites, err = sites.ReadSites(db, run, gpu, in)
			return err
		})
	})
	if ds.err != nil {
		s.smu.Lock()
		if s.sites[k] == ds {
			delete(s.sites, k)
		}
		s.smu.Unlock()
	}
	return ds.sites, ds.err
}

// reader reads a line's samples from the file; storage.ErrLocked while a
// recorder holds it, which the window then answers from buckets. Both
// fields of a stored series (used and driver-reserved, allocated and
// reserved) come from one read, kept for the next request (the page asks
// for a GPU's lines together).
func (s *DBSource) reader(run storage.Run, k series.Key) series.RawReader {
	return func(from, to int64, add func(t, v int64)) error {
		r, err := s.readPair(run, k, from, to)
		if errors.Is(err, storage.ErrLocked) {
			return series.ErrNoSamples
		}
		if err != nil {
			return err
		}
		vs := r.v[fieldSlot(k.Field)]
		for i, t := range r.t {
			add(t, vs[i])
		}
		return nil
	}
}

// pairRead is one read of a stored series over [from, to): its times and
// every field the viewer draws of it (two, or the budget's four).
type pairRead struct {
	run      uint64
	gpu, pid int
	kind     storage.SeriesKind
	from, to int64
	t        []int64
	v        [4][]int64
}

// kindOf is the stored series a line is read from.
func kindOf(f series.Field) storage.SeriesKind {
	switch {
	case f == series.Used || f == series.DriverReserved:
		return storage.SeriesDevice
	case f.Budget():
		return storage.SeriesBudget
	}
	return storage.SeriesTorch
}

// fieldSlot is where a line's values are in a pairRead.
func fieldSlot(f series.Field) int {
	switch f {
	case series.DriverReserved, series.Reserved:
		return 1
	case series.Params, series.Grads, series.OptimizerState, series.Buffers:
		return int(f - series.Params)
	}
	return 0
}

// pairCacheSamples bounds the samples the recent reads keep (24 B each).
const pairCacheSamples = 1 << 21

func (s *DBSource) readPair(run storage.Run, k series.Key, from, to int64) (*pairRead, error) {
	kind := kindOf(k.Field)
	pid := k.PID
	if kind == storage.SeriesDevice {
		pid = 0
	}
	s.cmu.Lock()
	for _, r := range s.recent {
		if r.run == run.ID && r.gpu == k.GPU && r.pid == pid && r.kind == kind && r.from == from && r.to == to {
			s.cmu.Unlock()
			return r, nil
		}
	}
	s.cmu.Unlock()
	r := &pairRead{run: run.ID, gpu: k.GPU, pid: pid, kind: kind, from: from, to: to}
	err := s.with(func(db *storage.DB) error { return readStored(db, run, k.GPU, pid, kind, from, to, r) })
	if err != nil {
		return nil, err
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	s.recent = append(s.recent, r)
	n := 0
	for _, c := range s.recent {
		n += len(c.t)
	}
	for len(s.recent) > 1 && n > pairCacheSamples {
		n -= len(s.recent[0].t)
		s.recent = s.recent[1:]
	}
	return r, nil
}

// readStored reads one stored series into r.
func readStored(db *storage.DB, run storage.Run, gpu, pid int, kind storage.SeriesKind, from, to int64, r *pairRead) error {
	slots := 2 // used and reserved, or allocated and reserved
	if kind == storage.SeriesBudget {
		slots = 4
	}
	return eachStored(db, run, gpu, pid, kind, from, to, func(t int64, v [4]int64) {
		r.t = append(r.t, t)
		for i := range slots {
			r.v[i] = append(r.v[i], v[i])
		}
	})
}

// eachStored calls fn with each sample of one stored series in [from, to),
// its values in the slots fieldSlot names (zero where the kind has fewer).
// Device and allocator samples are read as the decoded columns, not built
// into whole samples: an allocator sample has a dozen fields, of which two
// are read.
func eachStored(db *storage.DB, run storage.Run, gpu, pid int, kind storage.SeriesKind, from, to int64, fn func(t int64, v [4]int64)) error {
	if kind == storage.SeriesBudget {
		it := db.BudgetSamples(run, gpu, pid, from, to)
		for it.Next() {
			b := it.At()
			fn(b.T, series.BudgetParts(b))
		}
		return it.Err()
	}
	b, cols := pairBlocks(db, run, gpu, pid, kind, from, to)
	for b.Next() {
		ts, v0, v1 := b.T(), b.Ints(cols[0]), b.Ints(cols[1])
		for i, t := range ts {
			fn(t, [4]int64{v0[i], v1[i]})
		}
	}
	return b.Err()
}

// pairBlocks walks a device or allocator series; cols are the columns of
// slots 0 and 1.
func pairBlocks(db *storage.DB, run storage.Run, gpu, pid int, kind storage.SeriesKind, from, to int64) (*storage.Blocks, [2]int) {
	if kind == storage.SeriesDevice {
		return db.DeviceBlocks(run, gpu, from, to), [2]int{storage.DeviceUsed, storage.DeviceReserved}
	}
	return db.TorchBlocks(run, gpu, pid, from, to), [2]int{storage.TorchAllocated, storage.TorchReserved}
}

// BuildIndex reads every device and allocator series and the marks of a
// run once, up to four series at a time, into an index of every sample,
// not the chunks' summaries: the index the report embeds levels of
// (buckets of series.Base samples, finer than a summary's pieces), which
// the report builds from the samples the analysis reads instead
// (analysis.Options.Lines), and which its tests hold to this one.
func BuildIndex(db *storage.DB, run storage.Run) (*series.Index, error) {
	return buildIndex(db, run, false)
}

// addMarks adds a run's marks to x, but for the allocator trace's (data
// for the replay, not events to show).
func addMarks(db *storage.DB, run storage.Run, x *series.Index) error {
	it := db.Marks(run, storage.MinTime, storage.MaxTime)
	for it.Next() {
		if m := it.At(); m.Kind != storage.MarkAllocTrace {
			x.AddMark(m)
		}
	}
	return it.Err()
}

// LineReader reads one line's samples from db (the report's finest
// levels).
func LineReader(db *storage.DB, run storage.Run, k series.Key) series.RawReader {
	return func(from, to int64, add func(t, v int64)) error {
		pid := k.PID
		if kindOf(k.Field) == storage.SeriesDevice {
			pid = 0
		}
		kind, slot := kindOf(k.Field), fieldSlot(k.Field)
		if kind == storage.SeriesBudget {
			return eachStored(db, run, k.GPU, pid, kind, from, to, func(t int64, v [4]int64) { add(t, v[slot]) })
		}
		// The line's one column, without the pair eachStored gives.
		b, cols := pairBlocks(db, run, k.GPU, pid, kind, from, to)
		for b.Next() {
			ts, vs := b.T(), b.Ints(cols[slot])
			for i, t := range ts {
				add(t, vs[i])
			}
		}
		return b.Err()
	}
}

// buildIndex builds a run's index; with summaries, from the chunks'
// summaries where they have them (the viewer, which reads the samples of
// the windows it is asked for that need them).
func buildIndex(db *storage.DB, run storage.Run, summaries bool) (*series.Index, error) {
	x := series.NewIndex(0)
	refs, err := db.Series(run)
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(refs)+1)
	sem := make(chan struct{}, 4)
	for i, ref := range refs {
		if ref.Kind != storage.SeriesDevice && ref.Kind != storage.SeriesTorch && ref.Kind != storage.SeriesBudget {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = scanSeries(db, run, ref, x, summaries)
		}()
	}
	errs[len(refs)] = addMarks(db, run, x)
	wg.Wait()
	return x, errors.Join(errs...)
}

// scanSeries adds one stored series to the index a chunk at a time, so
// the index's lock is taken once per chunk, not per sample; with
// summaries, from the chunk's stored summary where it has one (the index
// then reads samples only for windows finer than its pieces).
func scanSeries(db *storage.DB, run storage.Run, ref storage.SeriesRef, x *series.Index, summaries bool) error {
	switch ref.Kind {
	case storage.SeriesDevice:
		o := db.DeviceOverview(run, ref.GPU, storage.MinTime, storage.MaxTime, summaries)
		for o.Next() {
			if ps := o.Pieces(); ps != nil {
				x.AddPieces(series.Key{Field: series.Used, GPU: ref.GPU}, storage.DeviceUsed, ps)
				x.AddPieces(series.Key{Field: series.DriverReserved, GPU: ref.GPU}, storage.DeviceReserved, ps)
				continue
			}
			x.AddDeviceColumns(ref.GPU, o.T(), o.Ints(storage.DeviceUsed), o.Ints(storage.DeviceReserved))
		}
		return o.Err()
	case storage.SeriesBudget:
		return inBatches(db.BudgetSamples(run, ref.GPU, ref.PID, storage.MinTime, storage.MaxTime), x.AddBudgets)
	}
	o := db.TorchOverview(run, ref.GPU, ref.PID, storage.MinTime, storage.MaxTime, summaries)
	for o.Next() {
		if ps := o.Pieces(); ps != nil {
			x.AddPieces(series.Key{Field: series.Allocated, GPU: ref.GPU, PID: ref.PID}, storage.TorchAllocated, ps)
			x.AddPieces(series.Key{Field: series.Reserved, GPU: ref.GPU, PID: ref.PID}, storage.TorchReserved, ps)
			continue
		}
		x.AddTorchColumns(ref.GPU, ref.PID, o.T(), o.Ints(storage.TorchAllocated), o.Ints(storage.TorchReserved))
	}
	return o.Err()
}

// inBatches hands the samples of it to add, 8192 at a time.
func inBatches[T any](it *storage.Iter[T], add func([]T)) error {
	const batch = 8192
	buf := make([]T, 0, batch)
	for it.Next() {
		if buf = append(buf, it.At()); len(buf) == batch {
			add(buf)
			buf = buf[:0]
		}
	}
	add(buf)
	return it.Err()
}
