package analysis

import (
	"errors"
	"slices"

	"github.com/memrec/memrec/storage"
)

// This file runs one GPU's analysis: it sets up the state the passes share
// (gpuAnalysis, gpupass.go) and runs the passes in order, each in its own
// file below this one.

// analyzeGPU analyses one GPU of a run, its per-step arrays lent by cols
// (nil: new ones), which must not lend them to another before it returns.
func analyzeGPU(db *storage.DB, run storage.Run, g storage.GPU, series []storage.SeriesRef, mi *markIndex, opts Options, cols *columns) (*GPUReport, error) {
	a := newGPUAnalysis(db, run, g, series, mi, opts, cols)
	if err := a.passes(); err != nil {
		return nil, err
	}
	a.unseen() // first: the sample times it pairs are dropped after it
	a.leak()
	a.epochDeltas() // after leak: it reads the job's span and the warm-up
	if err := a.inferStepTime(); err != nil {
		return nil, err
	}
	a.oomPostMortems()
	if err := a.budgetPass(); err != nil {
		return nil, err
	}
	if err := a.where(); err != nil {
		return nil, err
	}
	a.processes()
	a.allocTrace()
	a.oomCauses()                        // after the trace: its what-ifs
	if err := a.counters(); err != nil { // after leak: the rate's span
		return nil, err
	}
	return a.gr, nil
}

// counters sets the allocator's counters from the sums the allocator pass
// kept, or, where they changed too often to keep, from a second read.
func (a *gpuAnalysis) counters() error {
	if a.counterLog == nil {
		return nil
	}
	var ok bool
	if a.gr.Counters, ok = a.counterLog.counters(a.gr, a.mi.warm); ok {
		return nil
	}
	var err error
	a.gr.Counters, err = allocatorCounters(a.db, a.run, a.g.Index, a.torchPIDs, a.gr, a.mi.warm, torchCounters)
	return err
}

// allocTrace attaches the allocator trace of the GPU's one traced process.
func (a *gpuAnalysis) allocTrace() {
	var on []storage.AllocTrace
	for _, t := range a.mi.traces {
		if t.GPU == a.gr.GPU {
			on = append(on, t)
		}
	}
	if len(on) != 1 {
		return
	}
	a.gr.AllocTrace = &on[0]
	for _, op := range on[0].Ops {
		if !op.Free {
			a.gr.AllocTraceRequests++
		}
	}
}

// passes runs the device pass and the allocator pass at once: they read
// different series into different trackers, so one GPU's analysis keeps
// two cores busy and GPUs can be analysed fewer at a time (a week of
// steps holds about 200 bytes a step a GPU while it is analysed). The
// allocator's peaks follow the device's in the report, as when the passes
// ran one after the other.
func (a *gpuAnalysis) passes() error {
	a.lendAllocatorColumns()
	var devErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		devErr = a.devicePass()
	}()
	allocErr := a.allocatorPass()
	<-done
	giveBack(a.cols, a.frags) // the fragmentation's percentile is taken
	a.frags = nil
	if err := errors.Join(devErr, allocErr); err != nil {
		return err
	}
	a.gr.Peaks = append(a.gr.Peaks, a.allocPeaks...)
	return nil
}

// newGPUAnalysis finds the GPU's series, its rank and steps, and sets up
// the query times and spans the passes fill.
func newGPUAnalysis(db *storage.DB, run storage.Run, g storage.GPU, series []storage.SeriesRef, mi *markIndex, opts Options, cols *columns) *gpuAnalysis {
	a := &gpuAnalysis{db: db, run: run, g: g, mi: mi, opts: opts, cols: cols, stepHalf: -1,
		gr: &GPUReport{GPU: g.Index, Host: g.Host, HostGPU: g.HostGPU, UUID: g.UUID, Name: g.Name, TotalBytes: g.TotalBytes}}
	a.gpuSeries = seriesOf(series, g.Index)
	a.hasTorch = len(a.torchPIDs) > 0
	if len(a.torchPIDs) > 1 {
		a.gr.SharedBy = len(a.torchPIDs)
	}
	rank := a.rank()
	a.steps = mi.stepsFor(rank)
	a.gr.Steps = a.steps // shared: neither changes them
	a.procJobSpan()
	a.deviceJobSpan()
	a.inferEpochs()
	sliced := run
	if a.job != nil {
		sliced.StartNS, sliced.EndNS = a.job.FromNS, a.job.ToNS
	}
	a.slices = timeSlices(sliced, len(mi.epochs) == 0)
	a.ooms = oomsFor(mi, g.Index, rank, len(run.GPUs))
	for _, m := range a.ooms {
		a.oomT = append(a.oomT, m.T)
	}
	slices.Sort(a.oomT)
	a.oomT = slices.Compact(a.oomT)
	a.oomUsed, a.oomAlloc = newNearTimes[int64](a.oomT), newNearTimes[torchAtTime](a.oomT)
	a.queryTimes()
	a.floorSpans()
	a.start, a.end = run.StartNS, max(run.EndNS, run.StartNS+1)
	a.gr.Timeline = Timeline{StartNS: a.start, EndNS: a.end, Used: Series{Name: "device used"}, DriverReserved: Series{Name: "driver reserved"},
		Allocated: Series{Name: "allocated"}, Reserved: Series{Name: "reserved"}}
	a.used, a.alloc = a.newView(), a.newView()
	a.alloc.at.life = allocatorLife
	a.resFloors = newSpans(a.flo, a.fhi, keepMin, a.cols)
	a.stepPeaks = newSpans(a.plo, a.phi, keepMax, a.cols)
	return a
}

// procJobSpan sets the job's span from the GPU's process series, if it
// has them; a run without them gets its span from the device floors, in
// leak.
func (a *gpuAnalysis) procJobSpan() {
	if len(a.procPIDs) == 0 {
		return
	}
	from, to, ok, err := procSpan(a.db, a.run, a.g.Index, a.procPIDs)
	if err != nil || !ok || to <= from {
		return // the processes pass reports a read error
	}
	a.job = &JobSpan{FromNS: from, ToNS: to, Basis: "processes"}
}
