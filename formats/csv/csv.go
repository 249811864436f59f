package csv

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"
	"time"

	"github.com/memrec/memrec/merge"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// CSV columns (docs/interop.md has the table):
//
//	t_ns, time_s, time     Unix ns; seconds since the run's start; ISO 8601 UTC
//	epoch, step            the furthest epoch_start and step mark of any rank at the tick
//	epoch_rankR, step_rankR  the latest of rank R, where the run has marks of 2+ ranks
//
// epoch and step are -1 before the first such mark, as in the Parquet
// export and /metrics, so every cell is an integer (pandas reads int64).
//
// then per GPU N in index order:
//
//	gpuN_used_bytes                 device memory used (NVML)
//	gpuN_driver_reserved_bytes      memory the driver reserves (NVML)
//	gpuN_allocated_bytes            allocator figures, summed over the
//	gpuN_reserved_bytes             GPU's processes, each holding its last
//	gpuN_step_peak_allocated_bytes  value between reports
//	gpuN_inactive_split_bytes
//	gpuN_alloc_retries …            the allocator's event counters, one per
//	                                wire.TorchFields row with a Stat, in its
//	                                order, summed the same way
//	gpuN_params_bytes               where the run has a budget (memrec.watch):
//	gpuN_grads_bytes                the watched model's, summed over the GPU's
//	gpuN_optimizer_bytes            processes, each holding its last value
//	gpuN_buffers_bytes
//	gpuN_pidP_used_bytes            with Options.Procs: each process (NVML)
//
// One row per NVML tick (per allocator sample when the run has no device
// samples). A cell is empty where its value is unknown: a figure with no
// report yet, a GPU without a sample at that tick, a driver that does not
// report its reserved memory (stored as 0), a process not in the GPU's
// latest list. Never 0 for unknown.
var csvFigures = []string{"used_bytes", "driver_reserved_bytes", "allocated_bytes", "reserved_bytes",
	"step_peak_allocated_bytes", "inactive_split_bytes"}

// csvCounters are the allocator's event counters, a column each after
// csvFigures: a new row of the table is a new column here.
var csvCounters = wire.Counters(wire.TorchFields)

// Options choose Export's optional columns. The zero value: none.
type Options struct {
	// Procs adds a column per process and GPU (gpuN_pidP_used_bytes).
	Procs bool
}

// Export writes a run as CSV, one row per tick and a column per GPU and
// figure, for pandas and spreadsheets. It streams: memory does not grow
// with the run's length (it grows with the number of processes and
// ranks). It is safe to call while other readers read.
func Export(out io.Writer, db *storage.DB, r storage.Run, opts Options) error {
	series, err := db.Series(r)
	if err != nil {
		return err
	}
	gpus := make([]int, 0, len(r.GPUs))
	for _, g := range r.GPUs {
		gpus = append(gpus, g.Index)
	}
	slices.Sort(gpus)
	col := map[int]int{} // GPU index → position in gpus
	for i, g := range gpus {
		col[g] = i
	}
	c := &csvWriter{w: bufio.NewWriterSize(out, 1<<20), start: r.RunStartNS(), gpus: len(gpus), col: col,
		last: map[[2]int]storage.TorchSample{}, alloc: make([]csvAlloc, len(gpus)), dev: make([]*storage.DeviceSample, len(gpus)),
		procCol: map[[2]int]int{}, rankCol: map[int]int{},
		lastKeys: make([][]int64, len(gpus)), keys: make([][]int64, len(gpus)), texts: make([][]byte, len(gpus))}
	var devs []merge.Iterator[storage.DeviceSample]
	var torchs []merge.Iterator[storage.TorchSample]
	var procs []merge.Iterator[storage.ProcSample]
	var budgets []merge.Iterator[storage.BudgetSample]
	var procNames [][2]int
	for _, s := range series {
		if _, ok := col[s.GPU]; !ok {
			continue
		}
		switch s.Kind {
		case storage.SeriesDevice:
			devs = append(devs, db.DeviceSamples(r, s.GPU, storage.MinTime, storage.MaxTime))
		case storage.SeriesTorch:
			torchs = append(torchs, db.TorchSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime))
		case storage.SeriesBudget:
			budgets = append(budgets, db.BudgetSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime))
		case storage.SeriesProc:
			if opts.Procs {
				procs = append(procs, db.ProcSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime))
				procNames = append(procNames, [2]int{s.GPU, s.PID})
			}
		}
	}
	// The ranks with marks: one pass over the marks before the rows, for
	// the header.
	ranks, err := markRanks(db, r)
	if err != nil {
		return err
	}
	if len(ranks) > 1 {
		for i, rk := range ranks {
			c.rankCol[rk] = i
		}
	}
	c.rankEpoch, c.rankStep = make([]int, len(c.rankCol)), make([]int, len(c.rankCol))
	for i := range c.rankEpoch {
		c.rankEpoch[i], c.rankStep[i] = storage.None, storage.None
	}
	c.epoch, c.step = storage.None, storage.None
	c.torch = merge.New(func(s storage.TorchSample) int64 { return s.T }, torchs...)
	c.marks = db.Marks(r, storage.MinTime, storage.MaxTime)
	c.procs = merge.New(func(s storage.ProcSample) int64 { return s.T }, procs...)
	if len(budgets) > 0 {
		c.budget = &csvBudget{it: merge.New(func(s storage.BudgetSample) int64 { return s.T }, budgets...),
			last: map[[2]int]storage.BudgetSample{}, sums: make([]csvBudgetSum, len(gpus))}
		c.budget.next()
	}

	c.header(gpus, ranks, procNames)
	if _, err := c.w.Write(append(c.row, '\n')); err != nil {
		return err
	}
	c.nextTorch()
	c.nextMark()
	c.nextProc()
	if len(devs) > 0 {
		err = c.deviceRows(merge.New(func(s storage.DeviceSample) int64 { return s.T }, devs...))
	} else {
		err = c.torchRows()
	}
	if err != nil {
		return err
	}
	return c.w.Flush()
}

// header writes the header row into c.row and lays out the columns: the
// time and mark columns, then per GPU its figures, counters, budget and
// (with Options.Procs) one column per process, in GPU order.
func (c *csvWriter) header(gpus, ranks []int, procNames [][2]int) {
	c.row = []byte("t_ns,time_s,time,epoch,step")
	if len(c.rankCol) > 0 {
		for _, rk := range ranks {
			c.row = fmt.Appendf(c.row, ",epoch_rank%d,step_rank%d", rk, rk)
		}
	}
	c.procStart = make([]int, len(gpus)+1) // procs of GPU group i: procStart[i] ≤ k < procStart[i+1]
	slices.SortFunc(procNames, func(a, b [2]int) int {
		if a[0] != b[0] {
			return c.col[a[0]] - c.col[b[0]]
		}
		return a[1] - b[1]
	})
	k := 0
	for i, g := range gpus {
		c.procStart[i] = k
		for _, f := range csvFigures {
			c.row = fmt.Appendf(c.row, ",gpu%d_%s", g, f)
		}
		for _, f := range csvCounters {
			c.row = fmt.Appendf(c.row, ",gpu%d_%s", g, f.ColumnName())
		}
		if c.budget != nil {
			for _, f := range csvBudgetFigures {
				c.row = fmt.Appendf(c.row, ",gpu%d_%s", g, f)
			}
		}
		for ; k < len(procNames) && procNames[k][0] == g; k++ {
			c.procCol[procNames[k]] = k
			c.row = fmt.Appendf(c.row, ",gpu%d_pid%d_used_bytes", g, procNames[k][1])
		}
	}
	c.procStart[len(gpus)] = k
	c.proc = make([]csvProc, len(procNames))
	c.listT = make([]int64, len(gpus))
}

// markRanks lists the ranks of the run's epoch and step marks, ascending
// (a mark without a rank counts as rank 0, as the probe's RANK default).
func markRanks(db *storage.DB, r storage.Run) ([]int, error) {
	seen := map[int]bool{}
	it := db.Marks(r, storage.MinTime, storage.MaxTime)
	for it.Next() {
		m := it.At()
		if m.Kind == wire.MarkEpochStart || m.Kind == wire.MarkStep {
			seen[max(m.Rank, 0)] = true
		}
	}
	ranks := make([]int, 0, len(seen))
	for rk := range seen {
		ranks = append(ranks, rk)
	}
	slices.Sort(ranks)
	return ranks, it.Err()
}

// csvWriter writes the rows of Export.
type csvWriter struct {
	w     *bufio.Writer
	start int64
	gpus  int
	col   map[int]int // GPU index → column group
	row   []byte
	dev   []*storage.DeviceSample // this tick's samples by column group

	torch    *merge.ByTime[storage.TorchSample]
	pending  storage.TorchSample // the next allocator sample not yet applied
	hasTorch bool
	last     map[[2]int]storage.TorchSample // (gpu, pid) → last applied
	alloc    []csvAlloc

	marks       *storage.Iter[storage.Mark]
	pendingMark storage.Mark
	hasMark     bool
	epoch, step int         // the furthest of any rank; None before the first
	rankCol     map[int]int // rank → its columns (empty: one rank)
	rankEpoch   []int       // by rankCol
	rankStep    []int       //
	procs       *merge.ByTime[storage.ProcSample]
	pendingProc storage.ProcSample
	hasProc     bool
	procCol     map[[2]int]int // (gpu, pid) → position in proc
	procStart   []int          // by column group: its first process
	proc        []csvProc
	listT       []int64    // by column group: the time of the GPU's newest process list
	budget      *csvBudget // nil: the run has no budget
	// By column group: the values its cells were last written from
	// (cellKey), their text, and scratch for the next row's values.
	lastKeys, keys [][]int64
	texts          [][]byte
}

// csvBudgetFigures are the budget's columns of each GPU.
var csvBudgetFigures = []string{"params_bytes", "grads_bytes", "optimizer_bytes", "buffers_bytes"}

// csvBudget sums the budget samples of each GPU's processes, each holding
// its last value, as csvAlloc does the allocator's.
type csvBudget struct {
	it      *merge.ByTime[storage.BudgetSample]
	pending storage.BudgetSample
	has     bool
	last    map[[2]int]storage.BudgetSample
	sums    []csvBudgetSum
}

type csvBudgetSum struct {
	seen bool
	v    [4]int64
}

func (b *csvBudget) next() {
	b.has = b.it.Next()
	if b.has {
		b.pending = b.it.At()
	}
}

// apply applies the budget samples up to time t.
func (b *csvBudget) apply(t int64, col map[int]int) error {
	for b.has && b.pending.T <= t {
		s := b.pending
		k := [2]int{s.GPU, s.PID}
		prev := b.last[k]
		b.last[k] = s
		sum := &b.sums[col[s.GPU]]
		sum.seen = true
		for i, d := range [4]int64{s.Params - prev.Params, s.Grads - prev.Grads, s.OptimizerState - prev.OptimizerState, s.Buffers - prev.Buffers} {
			sum.v[i] += d
		}
		b.next()
	}
	return b.it.Err()
}

// csvAlloc is a GPU's allocator figures summed over its processes;
// counts are csvCounters'.
type csvAlloc struct {
	seen                                 bool
	allocated, reserved, peak, inactSplt int64
	counts                               []int64
}

// csvProc is one process's latest NVML reading.
type csvProc struct {
	t, used int64
	seen    bool
}

func (c *csvWriter) nextTorch() {
	c.hasTorch = c.torch.Next()
	if c.hasTorch {
		c.pending = c.torch.At()
	}
}

func (c *csvWriter) nextMark() {
	c.hasMark = c.marks.Next()
	if c.hasMark {
		c.pendingMark = c.marks.At()
	}
}

func (c *csvWriter) nextProc() {
	c.hasProc = c.procs.Next()
	if c.hasProc {
		c.pendingProc = c.procs.At()
	}
}

// apply applies the allocator samples, marks and process lists up to time t.
func (c *csvWriter) apply(t int64) error {
	for c.hasTorch && c.pending.T <= t {
		s := c.pending
		k := [2]int{s.GPU, s.PID}
		prev := c.last[k]
		c.last[k] = s
		a := &c.alloc[c.col[s.GPU]]
		a.seen = true
		a.allocated += s.Allocated - prev.Allocated
		a.reserved += s.Reserved - prev.Reserved
		a.peak += s.PeakAllocated - prev.PeakAllocated
		a.inactSplt += s.InactiveSplit - prev.InactiveSplit
		if a.counts == nil {
			a.counts = make([]int64, len(csvCounters))
		}
		for j, f := range csvCounters {
			a.counts[j] += f.Get(s) - f.Get(prev)
		}
		c.nextTorch()
	}
	for c.hasMark && c.pendingMark.T <= t {
		m := c.pendingMark
		i, perRank := c.rankCol[max(m.Rank, 0)]
		switch {
		case m.Kind == wire.MarkEpochStart && m.Epoch >= 0:
			c.epoch = max(c.epoch, m.Epoch)
			if perRank {
				c.rankEpoch[i] = m.Epoch
			}
		case m.Kind == wire.MarkStep && m.Step >= 0:
			c.step = max(c.step, m.Step)
			if perRank {
				c.rankStep[i] = m.Step
			}
		}
		c.nextMark()
	}
	for c.hasProc && c.pendingProc.T <= t {
		p := c.pendingProc
		if k, ok := c.procCol[[2]int{p.GPU, p.PID}]; ok {
			c.proc[k] = csvProc{t: p.T, used: p.Used, seen: true}
			g := c.col[p.GPU]
			c.listT[g] = max(c.listT[g], p.T)
		}
		c.nextProc()
	}
	if c.budget != nil {
		if err := c.budget.apply(t, c.col); err != nil {
			return err
		}
	}
	if err := c.marks.Err(); err != nil {
		return err
	}
	if err := c.procs.Err(); err != nil {
		return err
	}
	return c.torch.Err()
}

// deviceRows writes a row per distinct device sample time.
func (c *csvWriter) deviceRows(devs *merge.ByTime[storage.DeviceSample]) error {
	t, open := int64(0), false
	for devs.Next() {
		s := devs.At()
		if open && s.T != t {
			if err := c.flushRow(t); err != nil {
				return err
			}
		}
		t, open = s.T, true
		c.dev[c.col[s.GPU]] = &s
	}
	if err := devs.Err(); err != nil {
		return err
	}
	if open {
		return c.flushRow(t)
	}
	return nil
}

// torchRows writes a row per allocator sample time.
func (c *csvWriter) torchRows() error {
	for c.hasTorch {
		if err := c.flushRow(c.pending.T); err != nil {
			return err
		}
	}
	return c.torch.Err()
}

// markInt appends ",v", or ",-1" where v is storage.None (no mark yet).
func markInt(row []byte, v int) []byte {
	if v == storage.None {
		v = -1
	}
	return strconv.AppendInt(append(row, ','), int64(v), 10)
}

func (c *csvWriter) flushRow(t int64) error {
	if err := c.apply(t); err != nil {
		return err
	}
	row := strconv.AppendInt(c.row[:0], t, 10)
	row = append(row, ',')
	row = strconv.AppendFloat(row, float64(t-c.start)/1e9, 'f', 6, 64)
	row = append(row, ',')
	row = time.Unix(0, t).UTC().AppendFormat(row, "2006-01-02T15:04:05.000000Z")
	row = markInt(markInt(row, c.epoch), c.step)
	for i := range c.rankEpoch {
		row = markInt(markInt(row, c.rankEpoch[i]), c.rankStep[i])
	}
	for i := 0; i < c.gpus; i++ {
		row = c.appendGPU(row, i)
	}
	c.row = row
	_, err := c.w.Write(append(row, '\n'))
	return err
}

// appendGPU appends the cells of column group i (a GPU's) to row. They
// mostly repeat from one tick to the next (device memory stays put, the
// allocator reports a few times a second): the cells' values are kept
// with their text, and a row whose values are those of the row before
// copies that text instead of formatting each number again.
func (c *csvWriter) appendGPU(row []byte, i int) []byte {
	key := c.cellKey(c.keys[i][:0], i)
	if c.texts[i] != nil && slices.Equal(key, c.lastKeys[i]) {
		c.keys[i] = key
		c.dev[i] = nil
		return append(row, c.texts[i]...)
	}
	start := len(row)
	row = c.formatGPU(row, i)
	c.keys[i], c.lastKeys[i] = c.lastKeys[i], key
	c.texts[i] = append(c.texts[i][:0], row[start:]...)
	return row
}

// cellKey appends to key every value that column group i's cells are
// written from, in formatGPU's order, with a flag for each cell or group
// of cells that may be empty.
func (c *csvWriter) cellKey(key []int64, i int) []int64 {
	if d := c.dev[i]; d != nil {
		key = append(key, 1, d.Used, d.Reserved)
	} else {
		key = append(key, 0, 0, 0)
	}
	if a := c.alloc[i]; a.seen {
		key = append(key, 1, a.allocated, a.reserved, a.peak, a.inactSplt)
		key = append(key, a.counts...)
	} else {
		key = append(key, 0)
	}
	if c.budget != nil {
		s := c.budget.sums[i]
		if s.seen {
			key = append(key, 1)
			key = append(key, s.v[:]...)
		} else {
			key = append(key, 0)
		}
	}
	for k := c.procStart[i]; k < c.procStart[i+1]; k++ {
		if p := c.proc[k]; p.seen && p.t == c.listT[i] {
			key = append(key, 1, p.used)
		} else {
			key = append(key, 0, 0)
		}
	}
	return key
}

// formatGPU appends the cells of column group i to row.
func (c *csvWriter) formatGPU(row []byte, i int) []byte {
	if d := c.dev[i]; d != nil {
		row = append(row, ',')
		row = strconv.AppendInt(row, d.Used, 10)
		row = append(row, ',')
		if d.Reserved != 0 {
			row = strconv.AppendInt(row, d.Reserved, 10)
		}
		c.dev[i] = nil
	} else {
		row = append(row, ',', ',')
	}
	if a := c.alloc[i]; a.seen {
		for _, v := range [...]int64{a.allocated, a.reserved, a.peak, a.inactSplt} {
			row = append(row, ',')
			row = strconv.AppendInt(row, v, 10)
		}
		for _, v := range a.counts {
			row = append(row, ',')
			row = strconv.AppendInt(row, v, 10)
		}
	} else {
		row = append(row, ',', ',', ',', ',')
		for range csvCounters {
			row = append(row, ',')
		}
	}
	if c.budget != nil {
		s := c.budget.sums[i]
		for _, v := range s.v {
			row = append(row, ',')
			if s.seen {
				row = strconv.AppendInt(row, v, 10)
			}
		}
	}
	for k := c.procStart[i]; k < c.procStart[i+1]; k++ {
		row = append(row, ',')
		// Only the GPU's newest list: a process missing from it is gone.
		if p := c.proc[k]; p.seen && p.t == c.listT[i] {
			row = strconv.AppendInt(row, p.used, 10)
		}
	}
	return row
}
