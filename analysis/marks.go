package analysis

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// A run's marks, read once and indexed (markIndex): steps, epochs, the
// warm-up, and the lookups the passes make by time.

// markIndex is a run's marks, sorted and grouped.
//
// A long run has millions of step marks: they are kept as Steps (8 bytes
// each) and no other copy of them, so a week of 8 ranks costs about 150 MB
// here.
type markIndex struct {
	other     []storage.Mark // every mark but steps and epoch bounds, in time order
	exit      *storage.Mark  // the last exit mark
	epochs    []epochSpan
	steps     map[int]*growth.Steps // by rank (None for unranked)
	stepCount int
	events    []storage.Mark
	ooms      []storage.Mark
	probe     []string // the probe's notes about itself, once each
	// traces are the allocator traces the marks carry (storage.AllocTraces),
	// traceErr what was wrong with any.
	traces   []storage.AllocTrace
	traceErr error
	endNS    int64
	warm     growth.Warmup // where the run's warm-up ends (runWarmup)
	// leftOut counts the marks not kept, past the budget; leftErr says why.
	leftOut int
	leftErr error
}

type epochSpan struct {
	n          int
	start, end int64
	open       bool
}

// loadMarks reads a run's marks; the pieces of allocator traces go to
// traces, and are decoded at the end (nil: they are not read). Every mark
// kept other than a step, and every epoch, is taken from budget first:
// past it they are counted (leftOut) and not kept, so no number or size
// of marks makes the index grow past the command's budget. Steps are kept
// apart, 8 bytes each (growth.Steps).
func loadMarks(db *storage.DB, run storage.Run, budget *storage.DecodeBudget, traces *storage.AllocTraceSet) (*markIndex, error) {
	mi := &markIndex{steps: map[int]*growth.Steps{}, endNS: run.EndNS}
	it := db.Marks(run, storage.MinTime, storage.MaxTime)
	starts := map[int]int64{}
	keep := func(n int64) bool {
		if mi.leftOut > 0 {
			mi.leftOut++ // once past, later marks are left out too, whatever their size
			return false
		}
		if err := budget.Take(n, "the run's marks"); err != nil {
			mi.leftOut, mi.leftErr = 1, err
			return false
		}
		return true
	}
	for ts := it.NextBlock(); len(ts) > 0; ts = it.NextBlock() {
		for i := range ts {
			// Steps, most marks, are read without building the mark.
			if t, step, rank, ok := storage.StepAt(it, i); ok {
				steps, ok := mi.steps[rank]
				if !ok {
					steps = growth.NewSteps(int(perGPUShare(run, run.Counts.Marks)))
					mi.steps[rank] = steps
				}
				steps.Add(t, step)
				mi.stepCount++
				continue
			}
			mi.add(it.BlockAt(i), starts, traces, keep)
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if traces != nil {
		mi.traces, mi.traceErr = traces.Traces()
	}
	for n, s := range starts { // an epoch that never ended (the job died)
		mi.epochs = append(mi.epochs, epochSpan{n: n, start: s, end: run.EndNS, open: true})
	}
	sort.Slice(mi.epochs, func(i, j int) bool { return mi.epochs[i].start < mi.epochs[j].start })
	w, err := runWarmup(db, run, mi)
	if err != nil {
		return nil, err
	}
	mi.warm = w
	return mi, nil
}

// add takes a mark that is not a step: epochs' starts not yet ended go in
// starts, allocation traces to traces, and what is kept is paid for by keep.
func (mi *markIndex) add(m storage.Mark, starts map[int]int64, traces *storage.AllocTraceSet, keep func(int64) bool) {
	switch m.Kind {
	case wire.MarkEpochStart:
		if m.Epoch != storage.None {
			if _, ok := starts[m.Epoch]; !ok && keep(epochCost) {
				starts[m.Epoch] = m.T
			}
		}
		return
	case wire.MarkEpochEnd:
		if s, ok := starts[m.Epoch]; ok && m.Epoch != storage.None {
			mi.epochs = append(mi.epochs, epochSpan{n: m.Epoch, start: s, end: m.T})
			delete(starts, m.Epoch)
		}
		return
	case storage.MarkAllocTrace:
		if traces != nil {
			traces.Add(m)
		}
		return
	case wire.MarkProbe:
		if m.Text != "" && len(mi.probe) < maxProbeNotes && !slices.Contains(mi.probe, m.Text) && keep(int64(len(m.Text))+16) {
			mi.probe = append(mi.probe, m.Text)
		}
		return
	}
	copies := int64(1) // other
	if m.Kind == wire.MarkOOM || m.Kind == wire.MarkEvent {
		copies++ // events
	}
	if m.Kind == wire.MarkOOM {
		copies++ // ooms
	}
	if !keep(copies*markCost + int64(len(m.Text))) {
		return
	}
	switch m.Kind {
	case wire.MarkOOM:
		mi.ooms = append(mi.ooms, m)
		mi.events = append(mi.events, m)
	case wire.MarkEvent:
		mi.events = append(mi.events, m)
	case wire.MarkExit:
		e := m
		mi.exit = &e
	}
	mi.other = append(mi.other, m)
}

// What keeping a mark costs the budget: its struct in each slice that
// holds it (its text is shared), and an epoch's span with its entry in
// the map of open epochs. The slices grow by doubling, so what they hold
// at once is up to twice this; the budget leaves room for it under the
// heap bound.
const (
	markCost  = int64(unsafe.Sizeof(storage.Mark{}))
	epochCost = int64(unsafe.Sizeof(epochSpan{})) + 16
	// maxProbeNotes bounds the probe's distinct notes about itself; a
	// probe sends a handful.
	maxProbeNotes = 16
)

// leftOutNote says how many marks were left out of the analysis, and why.
func (mi *markIndex) leftOutNote() string {
	if mi.leftOut == 0 {
		return ""
	}
	what := fmt.Sprintf("%d marks", mi.leftOut)
	if mi.leftOut == 1 {
		what = "1 mark"
	}
	return fmt.Sprintf("%s left out of the analysis (events, OOMs and epochs after them are not seen): %v", what, mi.leftErr)
}

// runWarmup is where the run's warm-up ends: at the end of its first epoch
// when it has two or more; else each series settles (growth rule). A
// window takes the warm-up of its whole run, not of its own first epoch:
// the run's marks are read from its start until its first epoch has ended
// and a second has begun (or to the end, for a run of one epoch).
func runWarmup(db *storage.DB, run storage.Run, mi *markIndex) (growth.Warmup, error) {
	if _, _, ok := run.Window(); !ok {
		if len(mi.epochs) >= 2 {
			return growth.Warmup{ByEpoch: true, EndNS: mi.epochs[0].end}, nil
		}
		return growth.Warmup{}, nil
	}
	whole, err := db.Run(run.Name)
	if err != nil || whole.ID != run.ID {
		whole, err = db.Run(strconv.FormatUint(run.ID, 10))
	}
	if err != nil {
		return growth.Warmup{}, err
	}
	it := db.Marks(whole, storage.MinTime, storage.MaxTime)
	first, started := int64(0), false
	for it.Next() {
		m := it.At()
		switch {
		case m.Kind == wire.MarkEpochStart && !started:
			started = true
		case m.Kind == wire.MarkEpochEnd && started && first == 0:
			first = m.T
		case m.Kind == wire.MarkEpochStart && first != 0:
			return growth.Warmup{ByEpoch: true, EndNS: first}, it.Err()
		}
	}
	return growth.Warmup{}, it.Err()
}

// stepsFor returns the step marks for the rank that runs on a GPU.
func (mi *markIndex) stepsFor(rank int) *growth.Steps {
	if s, ok := mi.steps[rank]; ok && rank != storage.None {
		return s
	}
	if s, ok := mi.steps[storage.None]; ok {
		return s
	}
	if s, ok := mi.steps[0]; ok {
		return s
	}
	for _, s := range mi.steps {
		return s
	}
	return nil
}

func (mi *markIndex) stepTime() float64 {
	s := mi.stepsFor(0)
	if s.Len() < 3 {
		return math.NaN()
	}
	d := make([]float64, 0, s.Len()-1)
	for i := 1; i < s.Len(); i++ {
		d = append(d, float64(s.T(i)-s.T(i-1))/1e9)
	}
	// The median of d sorted, by selection: a week of steps is millions.
	return growth.SelectQuantile(d, 0.5)
}

// epochAt and stepAt place a time.
func (mi *markIndex) epochAt(t int64) *int {
	for _, e := range mi.epochs {
		if t >= e.start && t <= e.end {
			return intp(e.n)
		}
	}
	return nil
}

func stepAt(steps *growth.Steps, t int64) *int {
	// The step a time falls in: the first step mark at or after it (marks
	// end their step).
	if i := steps.Search(t); i < steps.Len() {
		return intp(steps.Step(i))
	}
	return nil
}

// nearestMark names the event or epoch boundary nearest to t, with the
// time from it to t.
func (mi *markIndex) nearestMark(t int64) string {
	best, bestT, dist := "", int64(0), int64(math.MaxInt64)
	consider := func(name string, mt int64) {
		if d := abs64(mt - t); d < dist {
			best, bestT, dist = name, mt, d
		}
	}
	for _, m := range mi.events {
		consider(describeMark(m), m.T)
	}
	for _, e := range mi.epochs {
		consider(fmt.Sprintf("epoch %d start", e.n), e.start)
		if !e.open {
			consider(fmt.Sprintf("epoch %d end", e.n), e.end)
		}
	}
	if best == "" {
		return ""
	}
	return best + " " + units.FormatSince(float64(t-bestT)/1e9)
}

func describeMark(m storage.Mark) string {
	text := strings.SplitN(m.Text, "\n", 2)[0]
	switch m.Kind {
	case wire.MarkExit:
		return fmt.Sprintf("exit %d", m.Code)
	case wire.MarkOOM:
		return "OOM"
	}
	if len(text) > 60 {
		text = text[:60] + "…"
	}
	return fmt.Sprintf("%q", text)
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// perGPUShare is about how many of count (one of the run's counts, kept
// whole through a window) a GPU or rank has in what is analysed: count
// shared by the run's GPUs, and by the window's part of the run's time,
// and 1/64 more (GPUs' shares differ by a few, and a slice one short of
// them grows by a quarter, a copy and the zeroing of a new array). Slices
// sized by it are made once: a week of steps is millions.
func perGPUShare(run storage.Run, count int64) int64 {
	n := count / int64(max(1, len(run.GPUs)))
	n += n/64 + 16
	if _, _, ok := run.Window(); ok {
		whole := float64(max(1, run.RunEndNS()-run.RunStartNS()))
		part := float64(max(0, run.EndNS-run.StartNS))
		n = int64(float64(n) * min(1, part/whole))
	}
	return min(max(n, 0), 1<<24) // a count that is off does not make a huge slice
}
