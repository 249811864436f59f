package storage

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// ErrOutOfOrder is returned for a sample older than data already sealed
// into a chunk. Samples that arrive out of order within the buffer (the last
// chunkEntries samples of their group) are accepted and sorted.
var ErrOutOfOrder = errors.New("sample is older than data already written")

// chunkEntries is the number of samples per sealed chunk; a group buffers up
// to twice that, which is also the window for out-of-order samples.
const chunkEntries = 16384

// chunkStrBytes bounds the strings of a chunk (marks' texts, sites'
// stacks) about as chunkEntries bounds its rows: a reader decodes a
// chunk's strings whole, so a chunk of long mark texts is sealed early,
// half its entries at a time once it holds twice this.
const chunkStrBytes = 4 << 20

// runWriter turns appended samples into chunks of one run. It is not safe
// for concurrent use.
type runWriter struct {
	run    Run
	series []seriesInfo
	index  map[seriesKey]uint32
	groups []*groupBuf // by group id
	gpus   map[int]bool
	pids   map[seriesKey]int // processes kept apart, by kind and GPU (pid 0)
	nextG  uint32            // next torch group id
	// maxSeries is MaxSeries but where a Load lowers it (WithMaxSeries), so that the
	// bound is reached without building that many series.
	maxSeries int
	ints      []int64
	strs      []string
}

func newRunWriter(run Run) *runWriter {
	w := &runWriter{run: run, index: map[seriesKey]uint32{}, gpus: map[int]bool{}, pids: map[seriesKey]int{}, nextG: groupTorch0, maxSeries: MaxSeries}
	for _, g := range run.GPUs {
		w.gpus[g.Index] = true
	}
	if w.run.EndNS < w.run.StartNS {
		w.run.EndNS = w.run.StartNS
	}
	return w
}

func (w *runWriter) kind(id uint32) seriesKind { return w.series[id].Kind }

func (w *runWriter) seriesFor(k seriesKey) (uint32, *groupBuf) {
	id, ok := w.index[k]
	if !ok {
		id = uint32(len(w.series))
		var group uint32
		switch k.kind {
		case kindMark:
			group = groupMarks
		case kindDevice, kindProc:
			group = groupDevice
		default:
			group = w.nextG
			w.nextG++
		}
		w.series = append(w.series, seriesInfo{ID: id, Kind: k.kind, GPU: k.gpu, PID: k.pid, Group: group})
		w.index[k] = id
	}
	g := w.series[id].Group
	for int(g) >= len(w.groups) {
		w.groups = append(w.groups, newGroupBuf(uint32(len(w.groups))))
	}
	return id, w.groups[g]
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// fold keeps the processes of one kind on one GPU past MaxPIDsPerGPU (or
// any past MaxSeries in the run) together under OtherPID, so that no input
// makes series without bound.
func (w *runWriter) fold(k seriesKey) seriesKey {
	if k.kind == kindDevice || k.kind == kindMark || k.pid == OtherPID {
		return k
	}
	if _, ok := w.index[k]; ok {
		return k
	}
	per := seriesKey{kind: k.kind, gpu: k.gpu}
	if w.pids[per] >= MaxPIDsPerGPU || len(w.series) >= w.maxSeries {
		k.pid = OtherPID
		return k
	}
	w.pids[per]++
	return k
}

func (w *runWriter) add(k seriesKey, tns int64) error {
	if k.kind != kindMark && !w.gpus[k.gpu] {
		return fmt.Errorf("GPU %d is not declared in run %q", k.gpu, w.run.Name)
	}
	if err := checkTime("time", tns, w.run.StartNS); err != nil {
		return err
	}
	k = w.fold(k)
	id, g := w.seriesFor(k)
	t := floorDiv(tns, 1000)
	if g.sealed && t < g.floor {
		return fmt.Errorf("%w: time %d is before %d", ErrOutOfOrder, tns, g.floor*1000)
	}
	g.add(t, id, w.ints, w.strs)
	if len(g.entries) >= 2*chunkEntries {
		g.seal(chunkEntries, w.kind)
	} else if g.strBytes >= 2*chunkStrBytes {
		g.seal(max(1, len(g.entries)/2), w.kind)
	}
	if tns > w.run.EndNS {
		w.run.EndNS = tns
	}
	return nil
}

// appendRow checks v and buffers it as one row of its kind's series.
func appendRow[T any](w *runWriter, sc *rowSchema[T], v T) error {
	if err := sc.check(v); err != nil {
		return err
	}
	w.ints, w.strs = sc.put(v, w.ints[:0], w.strs[:0])
	if err := w.add(sc.key(v), sc.time(v)); err != nil {
		return err
	}
	*sc.count(&w.run.Counts)++
	return nil
}

// A live recording rewrites each group's open chunk at every commit, so the
// Appender keeps it small: at a commit, a group's entries older than
// liveLateWindow before its newest are sealed once there are liveSealMin of
// them. Without this the open chunk grows to 2·chunkEntries, which at one
// GPU and 100 Hz is minutes of samples encoded again every second
// (BenchmarkAppenderSecond). Half a chunk, not less: each sealed chunk
// carries a summary of its series (summary.go), whose pieces cannot span
// chunks, so smaller live chunks make a compacted live file larger than
// the same run imported (TestCompactLiveFile; bench/README.md, "Chunk
// summaries", has both costs). Imports seal by count alone.
const (
	liveSealMin    = 8192
	liveLateWindow = 10 * time.Second
)

// sealLive seals what a live recording will no longer receive out of order.
// The device group is appended in time order by the sampler alone, so all
// but its newest tick can be sealed; marks and allocator samples come from
// probes and may arrive up to liveLateWindow late.
func (w *runWriter) sealLive() {
	for _, g := range w.groups {
		if len(g.entries) < liveSealMin {
			continue
		}
		g.sort()
		cut := g.entries[len(g.entries)-1].t // µs
		if g.id != groupDevice {
			cut -= liveLateWindow.Microseconds()
		}
		n, _ := slices.BinarySearchFunc(g.entries, cut, func(e entry, t int64) int { return cmp.Compare(e.t, t) })
		if n >= liveSealMin {
			g.seal(n, w.kind)
		}
	}
}

// sealAll seals every group's buffered entries, for the last write of a
// run: its last chunks then carry summaries like the others, where an open
// chunk has none.
func (w *runWriter) sealAll() {
	for _, g := range w.groups {
		if len(g.entries) > 0 {
			g.seal(len(g.entries), w.kind)
		}
	}
}

// dropPending drops the oldest sealed chunks that wait for a commit until
// they hold at most max bytes, and returns what they held. The run's counts
// no longer include it.
func (w *runWriter) dropPending(max int) (lost Counts, size int) {
	total := 0
	for _, g := range w.groups {
		for _, kv := range g.pending {
			total += len(kv.v)
		}
	}
	for total > max {
		// The group whose oldest waiting chunk starts first (key bytes 4-12).
		var oldest *groupBuf
		for _, g := range w.groups {
			if len(g.pending) > 0 && (oldest == nil || bytes.Compare(g.pending[0].k[4:12], oldest.pending[0].k[4:12]) < 0) {
				oldest = g
			}
		}
		kv := oldest.pending[0]
		oldest.pending = oldest.pending[1:]
		total -= len(kv.v)
		size += len(kv.v)
		lost.plus(kv.counts, 1)
	}
	w.run.Counts.plus(lost, -1)
	return lost, size
}

// flush writes every sealed chunk and the open (partial) chunk of each group
// into tx, with the series table and the run's metadata. The open chunk is
// rewritten by the next flush. The returned function must be called once tx
// has committed; if the commit fails, nothing is lost and the next flush
// writes it all again.
func (w *runWriter) flush(tx *bolt.Tx) (committed func(), err error) {
	data, err := tx.Bucket(bucketData).CreateBucketIfNotExists(idKey(w.run.ID))
	if err != nil {
		return nil, err
	}
	chunks, err := data.CreateBucketIfNotExists(keyChunks)
	if err != nil {
		return nil, err
	}
	chunks.FillPercent = 0.95 // keys arrive in order within a group; pack pages full
	var sums *bolt.Bucket     // made with the first summary
	openKeys := make([][]byte, len(w.groups))
	for i, g := range w.groups {
		if g.openKey != nil {
			if err := chunks.Delete(g.openKey); err != nil {
				return nil, err
			}
		}
		for _, kv := range g.pending {
			if err := chunks.Put(kv.k, kv.v); err != nil {
				return nil, err
			}
			if kv.sum == nil {
				continue
			}
			if sums == nil {
				if sums, err = data.CreateBucketIfNotExists(keySummaries); err != nil {
					return nil, err
				}
				sums.FillPercent = 0.95
			}
			if err := sums.Put(kv.k, kv.sum); err != nil {
				return nil, err
			}
		}
		if len(g.entries) > 0 {
			g.sort()
			k := chunkKey(g.id, g.entries[0].t, g.seq)
			v, _ := g.encode(g.entries, w.kind, false)
			if err := chunks.Put(k, v); err != nil {
				return nil, err
			}
			openKeys[i] = k
		}
	}
	v, err := json.Marshal(w.series)
	if err != nil {
		return nil, err
	}
	if err := data.Put(keySeries, v); err != nil {
		return nil, err
	}
	if err := putRun(tx, w.run); err != nil {
		return nil, err
	}
	return func() {
		for i, g := range w.groups {
			g.pending = nil
			g.openKey = openKeys[i]
		}
	}, nil
}

// createRun stores a new run's metadata in tx and returns it with its id.
// A run of the same name is refused with ErrExists, or deleted first if
// replace is set.
func createRun(tx *bolt.Tx, r Run, replace bool) (Run, error) {
	return createRunNamed(tx, r, replace, false)
}

// createRunNamed is createRun; with unique, a name that is taken gets the
// first free suffix (freeName) instead of failing.
func createRunNamed(tx *bolt.Tx, r Run, replace, unique bool) (Run, error) {
	if r.Name == "" {
		return r, errors.New("run has no name")
	}
	if unique {
		r.Name = freeName(tx, r.Name)
	}
	if err := checkRun(r); err != nil {
		return r, err
	}
	names := tx.Bucket(bucketNames)
	if id := names.Get([]byte(r.Name)); id != nil {
		if !replace {
			return r, fmt.Errorf("run %q: %w", r.Name, ErrExists)
		}
		old, err := lookupRun(tx, r.Name)
		if err != nil {
			return r, err
		}
		if err := deleteRun(tx, old); err != nil {
			return r, err
		}
	}
	runs := tx.Bucket(bucketRuns)
	id, err := runs.NextSequence()
	if err != nil {
		return r, err
	}
	r.ID = id
	if err := names.Put([]byte(r.Name), idKey(id)); err != nil {
		return r, err
	}
	return r, putRun(tx, r)
}

// freeName is base if no run has that name, else the first of base-2,
// base-3, ... that none has: the name of a run whose name memrec made up
// (run-DATE-TIME, for two recordings started in the same second).
func freeName(tx *bolt.Tx, base string) string {
	names := tx.Bucket(bucketNames)
	name := base
	for n := 2; names.Get([]byte(name)) != nil; n++ {
		name = base + "-" + strconv.Itoa(n)
	}
	return name
}

// FreeName returns base if no run in the file has that name, else the
// first of base-2, base-3, ... that none has. Safe for concurrent use; a
// writer that holds the file keeps the name free until it creates the run.
func (db *DB) FreeName(base string) (string, error) {
	var name string
	err := db.view(func(tx *bolt.Tx) error {
		name = freeName(tx, base)
		return nil
	})
	return name, err
}

// AppendOptions configure an Appender.
type AppendOptions struct {
	// UniqueName gives the run the first free name of NAME, NAME-2,
	// NAME-3, ... instead of failing with ErrExists when its name is taken
	// (for names memrec made up, and a recording that waited for a locked
	// file while another took the name); Run says the name it got.
	UniqueName bool
	// CommitInterval is how often buffered samples are committed; a crash
	// loses at most this much. Zero means one second; negative means only
	// on Commit and Close.
	CommitInterval time.Duration
	// OnError is called (from the committing goroutine) when a timed commit
	// fails. The data stays buffered and the next commit tries again.
	OnError func(error)
	// MaxPending bounds the memory that sealed chunks take while commits
	// fail: past it, the oldest are dropped (and counted, see Lost). Zero
	// means 64 MiB, over an hour of 8 GPUs at 1 kHz.
	MaxPending int
}

// defaultMaxPending is MaxPending's default.
const defaultMaxPending = 64 << 20

// Appender writes one run as it is recorded. Its methods are safe for
// concurrent use: the sampler and the marks listener append together.
// Appends never block on disk; commits happen on a timer and on Close.
type Appender struct {
	db   *DB
	mu   sync.Mutex
	w    *runWriter
	stop chan struct{}
	done chan struct{}
	opts AppendOptions
	lost Counts // dropped while commits failed
	// committed is the run as its last successful commit stored it.
	committed Run
	deferred  int64 // timed commits left for later: a reader held the file
	dropped   bool  // the last failed commit dropped data to bound memory
	// countSealOnly turns sealLive off (the benchmark's baseline).
	countSealOnly bool
}

// NewAppender creates the run (incomplete until Close) and starts its
// commit timer. The caller must Close it.
func (db *DB) NewAppender(r Run, opts AppendOptions) (*Appender, error) {
	if r.Host == "" {
		r.Host, _ = os.Hostname()
	}
	r.Complete, r.Writer = false, thisWriter()
	err := db.update(func(tx *bolt.Tx) error {
		var err error
		r, err = createRunNamed(tx, r, false, opts.UniqueName)
		return err
	})
	if err != nil {
		return nil, err
	}
	a := &Appender{db: db, w: newRunWriter(r), stop: make(chan struct{}), done: make(chan struct{}), opts: opts}
	a.committed = a.w.run
	interval := opts.CommitInterval
	if interval == 0 {
		interval = time.Second
	}
	if interval < 0 {
		close(a.done)
		return a, nil
	}
	go a.commitLoop(interval)
	return a, nil
}

func (a *Appender) commitLoop(interval time.Duration) {
	defer close(a.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
			err := a.commit(commitWait)
			a.mu.Lock()
			deferred := errors.Is(err, ErrLocked) && !a.dropped
			if deferred {
				// A reader has the file (ShortLock): the samples wait in
				// memory for the next commit; not an error of the recording
				// unless the wait costs samples.
				a.deferred++
			}
			a.mu.Unlock()
			if deferred {
				continue
			}
			if err != nil && a.opts.OnError != nil {
				a.opts.OnError(err)
			}
		}
	}
}

// Run returns the run as it stands (counts so far).
func (a *Appender) Run() Run {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.w.run
}

// AddGPU declares a GPU of the run; samples of undeclared GPUs are refused.
func (a *Appender) AddGPU(g GPU) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for i, old := range a.w.run.GPUs {
		if old.Index == g.Index {
			a.w.run.GPUs[i] = g
			return
		}
	}
	a.w.run.GPUs = append(a.w.run.GPUs, g)
	a.w.gpus[g.Index] = true
}

// SetRecorder stores the recorder's own figures with the run.
func (a *Appender) SetRecorder(r Recorder) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.w.run.Recorder = r
}

// AppendDevice buffers one device sample.
func (a *Appender) AppendDevice(s DeviceSample) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return appendRow(a.w, &deviceSchema, s)
}

// AppendProc buffers one per-process sample.
func (a *Appender) AppendProc(s ProcSample) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return appendRow(a.w, &procSchema, s)
}

// AppendTorch buffers one allocator sample.
func (a *Appender) AppendTorch(s TorchSample) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return appendRow(a.w, &torchSchema, s)
}

// AppendSites buffers the rows of one site snapshot (wire.Record.Sites):
// all of them or, on an error, none.
func (a *Appender) AppendSites(rows []SiteSample) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return appendSites(a.w, rows)
}

// appendSites checks every row before it buffers any.
func appendSites(w *runWriter, rows []SiteSample) error {
	for _, s := range rows {
		if err := siteSchema.check(s); err != nil {
			return err
		}
	}
	for _, s := range rows {
		if err := appendRow(w, &siteSchema, s); err != nil {
			return err
		}
	}
	return nil
}

// AppendMark buffers one mark.
func (a *Appender) AppendMark(m Mark) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return appendRow(a.w, &markSchema, m)
}

// commitWait is how long a timed commit of a ShortLock handle waits for a
// reader to let the file go before it leaves its samples for the next one:
// appends never wait for it, but the commit's own goroutine need not spin.
const commitWait = 100 * time.Millisecond

// Commit writes everything buffered so far in one transaction. It blocks
// for the disk write (appends wait meanwhile); on a ShortLock handle it
// first waits for the file's lock (appends do not wait for that).
func (a *Appender) Commit() error { return a.commit(0) }

func (a *Appender) commit(wait time.Duration) error {
	release, err := a.db.hold(wait)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		return a.failed(fmt.Errorf("commit run %q: %w", a.w.run.Name, err))
	}
	defer release()
	return a.commitLocked()
}

// Deferred is how many timed commits found the file held by a reader (a
// ShortLock handle) and left their samples for the next commit.
func (a *Appender) Deferred() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.deferred
}

func (a *Appender) commitLocked() error {
	if !a.countSealOnly {
		a.w.sealLive()
	}
	var done func()
	err := a.db.bolt.Update(func(tx *bolt.Tx) error {
		var err error
		done, err = a.w.flush(tx)
		return err
	})
	if err != nil {
		return a.failed(fmt.Errorf("commit run %q to %s: %w", a.w.run.Name, a.db.path, err))
	}
	done()
	a.committed = a.w.run
	return nil
}

// failed bounds what waits to be written after a failed commit: past
// MaxPending the oldest sealed chunks are dropped and counted.
func (a *Appender) failed(err error) error {
	max := a.opts.MaxPending
	if max <= 0 {
		max = defaultMaxPending
	}
	lost, size := a.w.dropPending(max)
	a.dropped = lost.Total() > 0
	if a.dropped {
		a.lost.plus(lost, 1)
		err = fmt.Errorf("%w; to bound memory, dropped the oldest %d samples and marks (%d bytes) waiting to be written", err, lost.Total(), size)
	}
	return err
}

// Committed returns the run as the last successful commit stored it (its
// counts and end); what Run counts beyond it is not in the file. Before
// any commit it is the run as NewAppender created it.
func (a *Appender) Committed() Run {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.committed
}

// Lost is what was dropped, unwritten, to bound memory while commits failed.
func (a *Appender) Lost() Counts {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.lost
}

// Close stops the timer, marks the run complete and commits. The run stays
// incomplete if the final commit fails, or if its command never started
// (Recorder.NotStarted).
func (a *Appender) Close() error {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
	release, err := a.db.hold(closeWait)
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		return fmt.Errorf("commit run %q: %w", a.w.run.Name, err)
	}
	defer release()
	a.w.run.Complete = a.w.run.Recorder.NotStarted == ""
	writer := a.w.run.Writer
	a.w.run.Writer = nil // the last commit: nothing writes the run after it
	a.w.sealAll()
	if err := a.commitLocked(); err != nil {
		a.w.run.Complete, a.w.run.Writer = false, writer
		return err
	}
	return nil
}
