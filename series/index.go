package series

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// Field is the quantity a line draws.
type Field uint8

// The lines of a GPU: the device's view (NVML) and each process's
// allocator's (the probe).
const (
	Used           Field = iota // device memory used
	DriverReserved              // memory the driver reserves (NVML v2)
	Allocated                   // allocator: handed out to tensors
	Reserved                    // allocator: held from the driver
	// The budget (memrec.watch): what the model's tensors hold, drawn
	// stacked.
	Params
	Grads
	OptimizerState
	Buffers

	fieldCount = int(Buffers) + 1
)

var fieldNames = [...]string{Used: "used", DriverReserved: "driver", Allocated: "allocated", Reserved: "reserved",
	Params: "params", Grads: "grads", OptimizerState: "optimizer", Buffers: "buffers"}

// PerProcess says whether the field is a process's (its key has a pid).
func (f Field) PerProcess() bool { return f >= Allocated }

// Budget says whether the field is a part of the budget.
func (f Field) Budget() bool { return f >= Params }

// String is the field's name in a line's key.
func (f Field) String() string { return fieldNames[f] }

// Label is the field's name in a legend.
func (f Field) Label() string {
	return [...]string{Used: "device used", DriverReserved: "driver reserved", Allocated: "allocated", Reserved: "reserved",
		Params: "parameters", Grads: "gradients", OptimizerState: "optimizer state", Buffers: "buffers"}[f]
}

// Key names one line of a run: a field of a GPU, and for the allocator's
// the process.
type Key struct {
	Field Field
	GPU   int
	PID   int // 0 for the device's lines
}

// String is the key as the viewer's API spells it: gpu0.used,
// gpu3.allocated.4711.
func (k Key) String() string {
	s := "gpu" + strconv.Itoa(k.GPU) + "." + k.Field.String()
	if k.Field.PerProcess() {
		s += "." + strconv.Itoa(k.PID)
	}
	return s
}

// ParseKey reads a key written by Key.String.
func ParseKey(s string) (Key, error) {
	parts := strings.Split(s, ".")
	bad := fmt.Errorf("line %q: want gpuN.used, gpuN.driver, or gpuN.F.PID for F one of allocated, reserved, params, grads, optimizer, buffers", s)
	if len(parts) < 2 || len(parts) > 3 || !strings.HasPrefix(parts[0], "gpu") {
		return Key{}, bad
	}
	gpu, err := strconv.Atoi(parts[0][3:])
	if err != nil || gpu < 0 {
		return Key{}, bad
	}
	k := Key{GPU: gpu, Field: 255}
	for f, n := range fieldNames {
		if n == parts[1] {
			k.Field = Field(f)
		}
	}
	perProcess := k.Field != 255 && k.Field.PerProcess()
	switch {
	case k.Field == 255, perProcess != (len(parts) == 3):
		return Key{}, bad
	case perProcess:
		if k.PID, err = strconv.Atoi(parts[2]); err != nil || k.PID < 0 {
			return Key{}, bad
		}
	}
	return k, nil
}

// Step is a step mark's time, for the step axis.
type Step struct {
	T    int64 `json:"t"`
	Step int   `json:"step"`
}

// MaxSteps bounds the step table an Index keeps: past it every other entry
// goes and only every second step mark is kept from then on, so the table
// spans the whole run at the resolution the axis can label.
const MaxSteps = 4096

// MaxMarks bounds the marks other than steps an Index keeps (epochs,
// events, OOMs); past it the newest are counted, not kept.
const MaxMarks = 200_000

// Index holds one run's lines as pyramids, its epochs, its other marks
// but steps and a table of its steps, built from its samples as they are added. It is
// safe for concurrent use: adding takes a write lock, queries a read lock.
type Index struct {
	mu        sync.RWMutex
	lines     map[Key]*line
	keys      []Key // sorted
	marks     []storage.Mark
	lostMarks int64
	epochs    []Epoch
	epochAt   map[int]int // epoch number -> index in epochs
	steps     []Step
	stepEvery int // keep one step mark in stepEvery
	stepSeen  int
	ringSize  int
	// perLine is the samples a new line of a device field, and of an
	// allocator field, is expected to get (SizeHint); 0 for unknown.
	perLine [2]int64
	// recent is the line last added to for each field (written under mu's
	// write lock, read only there): a batch of one series' samples looks
	// its lines up once, not once a sample.
	recent [fieldCount]struct {
		k Key
		l *line
	}
}

type line struct {
	p    Pyramid
	ring *Ring // nil without one
	last int64 // time of the newest sample
}

// NewIndex returns an empty index. With ring > 0 each line also keeps its
// newest ring samples, for the live view that has no database to read
// them from.
func NewIndex(ring int) *Index {
	return &Index{lines: map[Key]*line{}, stepEvery: 1, ringSize: ring, epochAt: map[int]int{}}
}

// SizeHint says how many samples each line of a device series (device,
// the driver's reserve) and of an allocator series is expected to get, so
// that their levels are sized once: a day of 8 GPUs is 8.6 M samples a
// line, and levels grown by doubling copy themselves about twice over.
// Not safe for use beside adds; lines made before it keep their sizes.
func (x *Index) SizeHint(device, allocator int64) { x.perLine = [2]int64{device, allocator} }

func (x *Index) line(k Key) *line {
	if l := x.recentLine(k); l != nil {
		return l
	}
	l := x.lines[k]
	if l != nil && int(k.Field) < len(x.recent) {
		x.recent[k.Field].k, x.recent[k.Field].l = k, l
	}
	if l == nil {
		l = &line{last: -1 << 63}
		switch {
		case k.Field == Used || k.Field == DriverReserved:
			l.p.Reserve(x.perLine[0])
		case k.Field == Allocated || k.Field == Reserved:
			l.p.Reserve(x.perLine[1])
		}
		if x.ringSize > 0 {
			l.ring = NewRing(x.ringSize)
		}
		x.lines[k] = l
		i, _ := slices.BinarySearchFunc(x.keys, k, compareKeys)
		x.keys = slices.Insert(x.keys, i, k)
	}
	return l
}

// recentLine is k's line where it is the one last added to for its
// field, else nil.
func (x *Index) recentLine(k Key) *line {
	if int(k.Field) < len(x.recent) {
		if r := &x.recent[k.Field]; r.k == k {
			return r.l
		}
	}
	return nil
}

// known reports whether k has a line, through the recent lines first.
func (x *Index) known(k Key) bool { return x.recentLine(k) != nil || x.lines[k] != nil }

func compareKeys(a, b Key) int {
	if a.GPU != b.GPU {
		return a.GPU - b.GPU
	}
	if a.PID != b.PID {
		return a.PID - b.PID
	}
	return int(a.Field) - int(b.Field)
}

// add adds a sample to a line; one older than the line's newest is dropped
// (a pyramid is built in time order).
func (x *Index) add(k Key, t, v int64) { x.addRun(k, []int64{t}, []int64{v}) }

// addRun adds samples of one line, ts ascending, as add does each.
func (x *Index) addRun(k Key, ts, vs []int64) {
	if len(ts) == 0 {
		return // no line for nothing: a line known is one that had samples
	}
	l := x.line(k)
	i := 0
	for i < len(ts) && ts[i] < l.last {
		i++
	}
	ts, vs = ts[i:], vs[i:]
	if len(ts) == 0 {
		return
	}
	l.last = ts[len(ts)-1]
	l.p.AddAll(ts, vs)
	if l.ring != nil {
		for i, t := range ts {
			l.ring.Add(t, vs[i])
		}
	}
}

// AddDeviceColumns adds a block of GPU gpu's device samples (times ts,
// ascending), as AddDevice does each, under one lock.
func (x *Index) AddDeviceColumns(gpu int, ts, used, reserved []int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.addDeviceColumns(gpu, ts, used, reserved)
}

// addDeviceColumns adds device samples: their used memory, and the
// driver's reserve from the first that is not zero on.
func (x *Index) addDeviceColumns(gpu int, ts, used, reserved []int64) {
	x.addRun(Key{Field: Used, GPU: gpu}, ts, used)
	k := Key{Field: DriverReserved, GPU: gpu}
	i := 0
	if !x.known(k) {
		for i < len(reserved) && reserved[i] == 0 {
			i++
		}
	}
	x.addRun(k, ts[i:], reserved[i:])
}

// AddPieces adds a stored summary's pieces of one line (column col of
// each), in time order, as buckets: a piece that starts before the line's
// newest sample is dropped, as such a sample is. The driver's reserve
// starts at the first piece that is not all zero (a sample-read line
// starts at its first sample that is not).
func (x *Index) AddPieces(k Key, col int, ps []storage.Piece) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, p := range ps {
		c := p.Cols[col]
		if k.Field == DriverReserved && c.Max == 0 && !x.known(k) {
			continue
		}
		l := x.line(k)
		if p.T0 < l.last {
			continue
		}
		l.last = p.T1
		l.p.AddBucket(Bucket{T0: p.T0, T1: p.T1, First: c.First, Last: c.Last, Min: c.Min, Max: c.Max, TMin: c.TMin, TMax: c.TMax, N: p.N})
	}
}

// AddTorchColumns adds a block of one process's allocator samples (times
// ts, ascending), as AddTorch does each, under one lock.
func (x *Index) AddTorchColumns(gpu, pid int, ts, allocated, reserved []int64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.addRun(Key{Field: Allocated, GPU: gpu, PID: pid}, ts, allocated)
	x.addRun(Key{Field: Reserved, GPU: gpu, PID: pid}, ts, reserved)
}

// AddDevice adds a device sample: its used memory, and the driver's
// reserve once it is not zero.
func (x *Index) AddDevice(d storage.DeviceSample) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.addDevice(d)
}

func (x *Index) addDevice(d storage.DeviceSample) {
	x.addDeviceColumns(d.GPU, []int64{d.T}, []int64{d.Used}, []int64{d.Reserved})
}

// AddBudgets adds budget samples (their four parts) under one lock.
func (x *Index) AddBudgets(bs []storage.BudgetSample) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, b := range bs {
		x.addBudget(b)
	}
}

// AddBudget adds a budget sample.
func (x *Index) AddBudget(b storage.BudgetSample) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.addBudget(b)
}

func (x *Index) addBudget(b storage.BudgetSample) {
	for f, v := range BudgetParts(b) {
		x.add(Key{Field: Params + Field(f), GPU: b.GPU, PID: b.PID}, b.T, v)
	}
}

// BudgetParts are a budget sample's parts in the order of the fields
// Params, Grads, OptimizerState, Buffers.
func BudgetParts(b storage.BudgetSample) [4]int64 {
	return [4]int64{b.Params, b.Grads, b.OptimizerState, b.Buffers}
}

// AddTorch adds an allocator sample.
func (x *Index) AddTorch(s storage.TorchSample) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.addTorch(s)
}

func (x *Index) addTorch(s storage.TorchSample) {
	x.add(Key{Field: Allocated, GPU: s.GPU, PID: s.PID}, s.T, s.Allocated)
	x.add(Key{Field: Reserved, GPU: s.GPU, PID: s.PID}, s.T, s.Reserved)
}

// Epoch is an epoch's span: from its first start mark to its last end
// mark (every rank marks it); End is 0 while it has none.
type Epoch struct {
	Epoch      int
	Start, End int64
}

// AddMark adds a mark: a step to the step table, an epoch's start or end
// to its span, any other to the marks.
func (x *Index) AddMark(m storage.Mark) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if (m.Kind == wire.MarkEpochStart || m.Kind == wire.MarkEpochEnd) && m.Epoch >= 0 {
		i, ok := x.epochAt[m.Epoch]
		if !ok {
			i = len(x.epochs)
			x.epochAt[m.Epoch] = i
			x.epochs = append(x.epochs, Epoch{Epoch: m.Epoch, Start: m.T})
		}
		e := &x.epochs[i]
		if m.Kind == wire.MarkEpochStart {
			e.Start = min(e.Start, m.T)
		} else {
			e.End = max(e.End, m.T)
		}
		return
	}
	if m.Kind != wire.MarkStep {
		if len(x.marks) >= MaxMarks {
			x.lostMarks++
			return
		}
		i := sort.Search(len(x.marks), func(i int) bool { return x.marks[i].T > m.T })
		x.marks = slices.Insert(x.marks, i, m)
		return
	}
	if m.Step < 0 {
		return
	}
	x.stepSeen++
	if x.stepSeen%x.stepEvery != 0 {
		return
	}
	if len(x.steps) >= MaxSteps {
		kept := x.steps[:0]
		for i := 0; i < len(x.steps); i += 2 {
			kept = append(kept, x.steps[i])
		}
		x.steps, x.stepEvery = kept, x.stepEvery*2
	}
	if n := len(x.steps); n > 0 && m.T < x.steps[n-1].T {
		return // ranks' steps arrive interleaved: the table keeps time order
	}
	x.steps = append(x.steps, Step{T: m.T, Step: m.Step})
}

// Keys lists the run's lines by GPU, process and field.
func (x *Index) Keys() []Key {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Clone(x.keys)
}

// Last is the time of a line's newest sample; ok is false for a line the
// index does not hold.
func (x *Index) Last(k Key) (t int64, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if l := x.lines[k]; l != nil {
		return l.last, true
	}
	return 0, false
}

// Span is the first and last time of any line.
func (x *Index) Span() (first, last int64, ok bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, l := range x.lines {
		f, e, has := l.p.Span()
		if !has {
			continue
		}
		if !ok {
			first, last, ok = f, e, true
		}
		first, last = min(first, f), max(last, e)
	}
	return first, last, ok
}

// Samples is the number of samples the index holds.
func (x *Index) Samples() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var n int64
	for _, l := range x.lines {
		n += l.p.Len()
	}
	return n
}

// Coarse says whether any line was built from stored summaries' pieces
// (AddPieces): its finest buckets are then theirs, not Base samples.
func (x *Index) Coarse() bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, l := range x.lines {
		if l.p.BucketSize(0) > Base {
			return true
		}
	}
	return false
}

// Bytes is the memory the pyramids and rings take.
func (x *Index) Bytes() int64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var n int64
	for _, l := range x.lines {
		n += l.p.Bytes()
		if l.ring != nil {
			n += int64(cap(l.ring.t)) * 16
		}
	}
	return n
}

// ErrNoLine is a key the run has no line for.
var ErrNoLine = fmt.Errorf("no such line")

// Window reduces a line's [from, to) to points columns (see Query). raw
// reads the line's samples where the index keeps none of its own (the
// database); with a ring, the ring is read, and where it does not reach
// back far enough the buckets are drawn.
func (x *Index) Window(k Key, from, to int64, points int, raw RawReader) (Result, error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	l := x.lines[k]
	if l == nil {
		return Result{}, fmt.Errorf("%v: %w", k, ErrNoLine)
	}
	if l.ring != nil {
		raw = l.ring.Read
	}
	return Query(&l.p, from, to, points, raw)
}

// At is a line's last sample at or before t; ok is false when it has none.
// raw reads samples as in Window.
func (x *Index) At(k Key, t int64, raw RawReader) (st, v int64, ok bool, err error) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	l := x.lines[k]
	if l == nil {
		return 0, 0, false, fmt.Errorf("%v: %w", k, ErrNoLine)
	}
	b, exact, ok := l.p.LastAt(t)
	if !ok || exact {
		return b.T1, b.Last, ok, nil
	}
	if l.ring != nil {
		raw = l.ring.Read
	}
	if raw == nil {
		return b.T0, b.First, true, nil
	}
	st, v = b.T0, b.First // the bucket's first sample is at or before t
	err = raw(b.T0, t+1, func(tt, vv int64) {
		if tt <= t {
			st, v = tt, vv
		}
	})
	if err == ErrNoSamples {
		err = nil
	}
	return st, v, true, err
}

// Marks returns up to limit marks other than steps and epochs in [from, to), in time
// order, and how many more the window holds.
func (x *Index) Marks(from, to int64, limit int) ([]storage.Mark, int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	lo := sort.Search(len(x.marks), func(i int) bool { return x.marks[i].T >= from })
	hi := sort.Search(len(x.marks), func(i int) bool { return x.marks[i].T >= to })
	n := hi - lo
	if n > limit {
		return slices.Clone(x.marks[lo : lo+limit]), n - limit
	}
	return slices.Clone(x.marks[lo:hi]), 0
}

// Epochs returns the epochs' spans in the order they started.
func (x *Index) Epochs() []Epoch {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Clone(x.epochs)
}

// Steps returns the step table (at most MaxSteps entries, in time order)
// and how many step marks each entry stands for.
func (x *Index) Steps() ([]Step, int) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return slices.Clone(x.steps), x.stepEvery
}

// Ring keeps the newest samples of a line. Not safe for concurrent use.
type Ring struct {
	t, v    []int64
	next    int
	full    bool
	dropped bool
}

// NewRing returns a ring of n samples.
func NewRing(n int) *Ring { return &Ring{t: make([]int64, n), v: make([]int64, n)} }

// Add adds a sample, dropping the oldest once full.
func (r *Ring) Add(t, v int64) {
	if r.full {
		r.dropped = true
	}
	r.t[r.next], r.v[r.next] = t, v
	r.next++
	if r.next == len(r.t) {
		r.next, r.full = 0, true
	}
}

// Read is a RawReader over the ring: ErrNoSamples when the window starts
// before the oldest sample it holds and older ones were dropped.
func (r *Ring) Read(from, to int64, add func(t, v int64)) error {
	n, start := r.next, 0
	if r.full {
		n, start = len(r.t), r.next
	}
	if n == 0 {
		return nil
	}
	if r.dropped && from < r.t[start] {
		return ErrNoSamples
	}
	at := func(i int) int { return (start + i) % len(r.t) }
	i := sort.Search(n, func(i int) bool { return r.t[at(i)] >= from })
	for ; i < n && r.t[at(i)] < to; i++ {
		add(r.t[at(i)], r.v[at(i)])
	}
	return nil
}
