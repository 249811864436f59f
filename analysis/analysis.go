package analysis

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// Report is the analysis of one run. Allocator-based fields are nil where
// the run has no allocator samples. It is plain data: safe to copy, to
// encode as JSON, and to hand to package report.
type Report struct {
	Run        string            `json:"run"`
	RunID      uint64            `json:"run_id"`
	Host       string            `json:"host,omitempty"`
	Job        string            `json:"job,omitempty"`
	StartNS    int64             `json:"start_ns"`
	EndNS      int64             `json:"end_ns"`
	DurationS  float64           `json:"duration_s"`
	Complete   bool              `json:"complete"`
	Tags       map[string]string `json:"tags,omitempty"`
	IntervalNS int64             `json:"interval_ns,omitempty"`
	Recorder   storage.Recorder  `json:"recorder"`
	Marks      MarkCounts        `json:"marks"`
	GPUs       []GPUReport       `json:"gpus"`
	// Hosts summarise each node of a merged run; nil for one machine.
	Hosts []HostSummary `json:"hosts,omitempty"`
	// Imbalance and Worst look at the GPUs together; nil under two GPUs.
	Imbalance *Imbalance `json:"imbalance,omitempty"`
	Worst     *Worst     `json:"worst_gpu,omitempty"`
	// Notes say what the run lacks and what was done instead.
	Notes []string `json:"notes,omitempty"`
	// Events are the run's event, oom and exit marks, for the report.
	Events []storage.Mark `json:"-"`
	// StepTimeS is the median time per step (rank 0 or unranked), if known.
	StepTimeS *float64 `json:"step_time_s"`
	// Window is the part of the run analysed, when not all of it; StartNS
	// and EndNS are then the window's.
	Window *WindowSpan `json:"window,omitempty"`
}

// WindowSpan is the part of a run analysed: [FromNS, ToNS] in Unix ns,
// and the same as seconds since the run's start.
type WindowSpan struct {
	FromNS int64   `json:"from_ns"`
	ToNS   int64   `json:"to_ns"`
	FromS  float64 `json:"from_s"`
	ToS    float64 `json:"to_s"`
}

// MarkCounts count the marks of a run by kind.
type MarkCounts struct {
	Epochs int `json:"epochs"`
	// Steps counts training steps, not step marks: each rank marks every
	// step, so a job of 300 steps on 2 ranks has 300 steps (the most any
	// one rank marked) and 600 step marks.
	Steps     int `json:"steps"`
	StepMarks int `json:"step_marks"`
	// StepsByRank is the steps each rank marked, where two or more did
	// (keys are ranks; "-1" for marks without one).
	StepsByRank map[string]int `json:"steps_by_rank,omitempty"`
	// Events are event and OOM marks; the exit mark is the run's end, not
	// an event.
	Events int `json:"events"`
	OOMs   int `json:"ooms"`
}

// GPUReport is the analysis of one GPU.
type GPUReport struct {
	GPU int `json:"gpu"`
	// Host and HostGPU place the GPU in a merged run: its node and its
	// index there (see Label). Host is "" for a run of one machine.
	Host          string `json:"host,omitempty"`
	HostGPU       int    `json:"host_gpu,omitempty"`
	UUID          string `json:"uuid,omitempty"`
	Name          string `json:"name,omitempty"`
	TotalBytes    int64  `json:"total_bytes,omitempty"`
	PeakUsedBytes *int64 `json:"peak_used_bytes"`
	// DriverReservedBytes is the most the driver reserved for itself
	// (NVML's Memory_v2), which no process can use; nil if not reported.
	DriverReservedBytes *int64 `json:"driver_reserved_bytes,omitempty"`
	PeakAllocatedBytes  *int64 `json:"peak_allocated_bytes"`
	PeakReservedBytes   *int64 `json:"peak_reserved_bytes"`
	PeakStepBytes       *int64 `json:"peak_step_allocated_bytes"` // the probe's true per-step peak (summed over the GPU's processes)
	// SharedBy is how many processes' allocators the GPU holds, where more
	// than one does (0 otherwise): each keeps a cache the others cannot
	// use, so near the limit whether they fit depends on when each one's
	// peak comes.
	SharedBy  int          `json:"shared_by,omitempty"`
	Peaks     []Peak       `json:"peaks"`
	Epochs    []EpochDelta `json:"epochs"`
	Intervals []EpochDelta `json:"intervals,omitempty"` // without epoch marks: fixed time slices
	Leak      growth.Leak  `json:"leak"`
	// JobSpan is where the job holds memory, when the leak is judged on
	// device memory over time: start-up and teardown are left out.
	JobSpan *JobSpan `json:"job_span,omitempty"`
	// InferredStepTimeS is a step time read from device memory alone (a
	// regular sawtooth) when the run has no step marks; the basis says how.
	InferredStepTimeS *float64 `json:"inferred_step_time_s,omitempty"`
	InferredStepBasis string   `json:"inferred_step_basis,omitempty"`
	// InferredEpochs are epochs read from device memory alone, for a run
	// without epoch and step marks: the step sawtooth broken by recurring
	// pauses. InferredEpochBasis says how they were found; where they were
	// looked for and none found, EpochsNotInferred says why.
	InferredEpochs     []EpochDelta `json:"inferred_epochs,omitempty"`
	InferredEpochBasis string       `json:"inferred_epoch_basis,omitempty"`
	EpochsNotInferred  string       `json:"epochs_not_inferred,omitempty"`
	Fragmentation      *Frag        `json:"fragmentation"`
	Unseen             *Unseen      `json:"unseen_by_pytorch"`
	OOMs               []OOM        `json:"ooms"`
	AllocRetries       *int64       `json:"alloc_retries"`
	FirstRetryNS       *int64       `json:"first_alloc_retry_ns,omitempty"`
	// NearLimitOverhead is, over the steps that made the allocator free its
	// cache and retry (the job ran at the GPU's limit) without an OOM, the
	// most its reserved memory exceeded the step's peak allocated, as a
	// share of that peak: what rounding and splitting cost at the limit.
	NearLimitOverhead *float64 `json:"near_limit_overhead,omitempty"`
	// LargestSegmentBytes is the largest segment the caching allocator was
	// seen to hold (the probe looks after the warm-up and each minute):
	// the size of the largest request it served; where processes share
	// the GPU, the most their largest segments added up to at once (each
	// allocator may strand one of its own). Nil when not looked at.
	LargestSegmentBytes *int64 `json:"largest_segment_bytes,omitempty"`
	// MostSegments is the most segments the GPU's allocators held at once.
	MostSegments *int64 `json:"most_segments,omitempty"`
	// MostInactiveSplitBytes is the most free room the GPU's allocators
	// held inside split segments at once (inactive_split_bytes);
	// traceless.go reads it.
	MostInactiveSplitBytes *int64 `json:"most_inactive_split_bytes,omitempty"`
	// SiteRowsLeftOut counts the site rows not read, past the command's
	// decoding budget (SiteRowsLeftOutWhy says why); 0 when none.
	SiteRowsLeftOut int `json:"site_rows_left_out,omitempty"`
	sitesLeftOutWhy error
	// AllocTrace is the allocator trace of the GPU's one process
	// (MEMREC_ALLOC_TRACE), which compare --by replays; nil where there is
	// none or several processes sent one. AllocTraceRequests counts its
	// requests.
	AllocTrace         *storage.AllocTrace `json:"-"`
	AllocTraceRequests int                 `json:"alloc_trace_requests,omitempty"`
	// AllocTraceWhatIf is the trace replayed whole, without a limit, under
	// the default allocator and each of replay.WhatIfSettings: the peak
	// reserved each would have held (oomcause.go).
	AllocTraceWhatIf []replay.WhatIf `json:"alloc_trace_what_if,omitempty"`
	// InconsistentSamples counts allocator samples that cannot be right
	// (allocated above reserved, or active below allocated): they are kept
	// as sent and flagged in the notes.
	InconsistentSamples int64 `json:"inconsistent_allocator_samples,omitempty"`
	// Counters are the allocator's event counters (wire.TorchFields' rows
	// with a Stat) over the GPU: counters.go. Nil without allocator samples.
	Counters  []Counter `json:"counters,omitempty"`
	Processes []Process `json:"processes,omitempty"`
	// Where holds the GPU's memory by allocation site; nil without site
	// snapshots.
	Where *sites.Where `json:"where,omitempty"`
	// Budget is the GPU's memory at its highest step peak, split into
	// parts, and what would help (budget.go, advice.go); nil without
	// allocator samples.
	Budget   *budget.Budget `json:"budget,omitempty"`
	Timeline Timeline       `json:"-"`
	// Floors are the floors of the series the leak was judged on, for
	// drawing: a long run keeps the first, lowest, highest and last of each
	// of about width runs of them. FitFromX is the x of the first one
	// fitted (after the warm-up), and SteadyFloorBytes the median of those
	// fitted, taken before they were thinned.
	Floors           []growth.FloorPoint `json:"-"`
	FitFromX         float64             `json:"-"`
	SteadyFloorBytes *int64              `json:"-"`
	FragSeries       []FragPoint         `json:"-"`
	StepPeaks        []growth.FloorPoint `json:"-"`
	// Steps are the step marks of the rank that runs on this GPU, in time
	// order.
	Steps *growth.Steps `json:"-"`
}

// StepAt is the training step a time falls in: the step of the first step
// mark at or after it (a mark ends its step), and false after the last one
// or without step marks.
func (g *GPUReport) StepAt(t int64) (int, bool) {
	i := g.Steps.Search(t)
	if i == g.Steps.Len() {
		return 0, false
	}
	return g.Steps.Step(i), true
}

// Peak is the highest value of one series, and where it happened.
type Peak struct {
	What     string `json:"what"` // device_used, allocated, reserved, step_peak
	Bytes    int64  `json:"bytes"`
	TNS      int64  `json:"t_ns"`
	Epoch    *int   `json:"epoch"`
	Step     *int   `json:"step"`
	NearMark string `json:"near_mark,omitempty"`
}

// EpochDelta is memory at an epoch's start and end: its floors there
// (DeltaBasis), so that Δ is growth, not a step's activations.
type EpochDelta struct {
	Epoch               int    `json:"epoch"`
	StartNS             int64  `json:"start_ns"`
	EndNS               int64  `json:"end_ns"`
	UsedStartBytes      *int64 `json:"used_start_bytes"`
	UsedEndBytes        *int64 `json:"used_end_bytes"`
	DeltaUsedBytes      *int64 `json:"delta_used_bytes"`
	AllocatedStartBytes *int64 `json:"allocated_start_bytes"`
	AllocatedEndBytes   *int64 `json:"allocated_end_bytes"`
	DeltaAllocatedBytes *int64 `json:"delta_allocated_bytes"`
	PeakUsedBytes       *int64 `json:"peak_used_bytes"`
	PeakAllocatedBytes  *int64 `json:"peak_allocated_bytes"`
	Open                bool   `json:"open,omitempty"` // no epoch_end mark: ends at the run's end
	// Warmup: the run's first epoch, whose growth is the job settling in.
	Warmup bool `json:"warmup,omitempty"`
	// DeltaBasis is what the start, end and Δ figures were read from.
	DeltaBasis DeltaBasis `json:"delta_basis,omitempty"`
}

// Unseen is device memory PyTorch's allocator does not account for.
//
// Each figure pairs a device sample with the allocator sums of the same
// moment: the two samples may be at most ToleranceNS apart, and a pair
// whose difference is negative (the two views are of different moments)
// is left out as well; Unpaired counts what was left out.
type Unseen struct {
	MeanBytes   int64 `json:"mean_bytes"`
	MedianBytes int64 `json:"median_bytes"`
	MaxBytes    int64 `json:"max_bytes"`
	FinalBytes  int64 `json:"final_bytes"`
	Samples     int   `json:"samples"`
	Unpaired    int   `json:"unpaired"`
	ToleranceNS int64 `json:"tolerance_ns"`
}

// OOM is the post-mortem of one out-of-memory mark.
type OOM struct {
	TNS              int64    `json:"t_ns"`
	Message          string   `json:"message"`
	Summary          string   `json:"summary,omitempty"`
	Epoch            *int     `json:"epoch"`
	Step             *int     `json:"step"`
	UsedBytes        *int64   `json:"used_bytes"`
	AllocatedBytes   *int64   `json:"allocated_bytes"`
	ReservedBytes    *int64   `json:"reserved_bytes"`
	Fragmentation    *float64 `json:"fragmentation"`
	LargestGrowth    *int64   `json:"largest_step_growth_bytes"`
	LargestGrowthAt  *int     `json:"largest_step_growth_step"`
	AllocRetriesRise *int64   `json:"alloc_retries_rise"`
	// The figures above are each view's at the OOM: the device sample
	// (UsedTNS) and the allocator sample (AllocatorTNS) nearest to it, each
	// at most PairToleranceNS away; a view without such a sample is left
	// out. UnseenBytes, device used − reserved, combines the two: it also
	// needs them at most PairToleranceNS apart and is never negative.
	// LeftOut says what was left out and why.
	UsedTNS         *int64   `json:"used_t_ns"`
	AllocatorTNS    *int64   `json:"allocator_t_ns"`
	UnseenBytes     *int64   `json:"unseen_bytes"`
	PairToleranceNS int64    `json:"pair_tolerance_ns"`
	LeftOut         []string `json:"left_out,omitempty"`

	// Outcome tells the OOMs the job survived (a fallback to a smaller
	// cuDNN workspace, an error the script caught) from the one that ended
	// it; OutcomeReason says what decided it.
	Outcome       OOMOutcome `json:"outcome"`
	OutcomeReason string     `json:"outcome_reason"`
	// From the message: the request and the free memory on the device.
	RequestedBytes *int64 `json:"requested_bytes,omitempty"`
	FreeBytes      *int64 `json:"free_bytes,omitempty"`
	// For the fatal OOM: what was missing, what the allocator held free in
	// its cache (reserved − allocated), whether that and the free memory
	// would have served the request (expandable_segments or empty_cache()
	// would have helped), and the largest batch that could have fitted
	// (from the run's batch_size tag), with its basis: step_peak (the run's
	// own per-step peak) or lower_bound (no step completed: only a lower
	// bound of the step's need is known), and the figure's kind that
	// follows: an estimate, or an upper bound on the batch.
	ShortBytes      *int64   `json:"short_bytes,omitempty"`
	CachedFreeBytes *int64   `json:"cached_free_bytes,omitempty"`
	CacheWouldHelp  *bool    `json:"cache_would_help,omitempty"`
	FittingBatch    *float64 `json:"fitting_batch_size,omitempty"`
	FitBasis        string   `json:"fitting_batch_basis,omitempty"`
	FitKind         FitKind  `json:"fitting_batch_kind,omitempty"`
	// WhatIf is, for the fatal OOM of a GPU with an allocator trace, the
	// trace up to the failed request replayed under the default allocator
	// and each of WhatIfSettings on the room the allocator had at the OOM
	// (reserved + free); WhatIfLines says it in words.
	WhatIf []replay.WhatIf `json:"what_if,omitempty"`
	// Holders are the sites that held the most at the OOM, from the
	// probe's snapshot in PyTorch's OOM observer; nil without one.
	Holders []sites.SiteFigure `json:"holders,omitempty"`
	// Budget splits what the fatal OOM's step had and asked for, where the
	// run has memrec.watch (budget.go).
	Budget *budget.OOM `json:"budget,omitempty"`
	// Cause is the fatal OOM's budget at that moment and the one change
	// that would have made its step fit (oomcause.go).
	Cause *OOMCause `json:"cause,omitempty"`
}

// Process is one process seen on the GPU.
type Process struct {
	PID       int    `json:"pid"`
	PeakBytes int64  `json:"peak_bytes"`
	Samples   int64  `json:"samples"`
	Source    string `json:"source"` // nvml or torch
	// Growth is the growth rule on the process's used memory, at the
	// GPU's floors (steps or time slices).
	Growth *growth.Growth `json:"growth,omitempty"`
}

// FragPoint is fragmentation at one allocator sample.
type FragPoint struct {
	TNS         int64
	Frag, Stuck float64
	I           int64 // position among the GPU's allocator samples (all processes merged)
}

func i64(v int64) *int64     { return &v }
func f64(v float64) *float64 { return &v }
func intp(v int) *int        { return &v }
func finite(v float64) bool  { return !math.IsNaN(v) && !math.IsInf(v, 0) }
func fptr(v float64) *float64 {
	if !finite(v) {
		return nil
	}
	return &v
}

// Options tune the analysis.
type Options struct {
	// Width is the number of timeline buckets kept for charts (0: 1600).
	Width int
	// Lines, when set, is given every device and allocator sample the
	// analysis reads, a block at a time, each series in time order (the
	// report builds its page's index from them rather than read the run a
	// second time). It must be safe for concurrent use: GPUs are analysed
	// side by side.
	Lines Lines
	// Budget bounds what reading the run keeps beyond its samples: its
	// allocator traces decoded, its marks other than steps, its site
	// snapshots. A command passes one budget to everything it reads, all
	// its runs (nil: one of storage.DefaultDecodeBudget for this run
	// alone). What is past it is left out, and a note says so.
	Budget *storage.DecodeBudget
}

// Lines receives the samples of a run's device and allocator series
// (series.Index has these methods).
type Lines interface {
	// SizeHint is told, before any sample, how many a line of a device
	// series and of an allocator series will get.
	SizeHint(device, allocator int64)
	AddDeviceColumns(gpu int, ts, used, reserved []int64)
	AddTorchColumns(gpu, pid int, ts, allocated, reserved []int64)
}

// Analyze reads a run from the store and analyses every GPU. It streams
// over the chunks (memory grows with the number of marks and steps, not
// with the number of samples).
func Analyze(db *storage.DB, run storage.Run, opts Options) (*Report, error) {
	if opts.Width <= 0 {
		opts.Width = 1600
	}
	rep := newReport(run)
	if opts.Budget == nil {
		opts.Budget = storage.NewDecodeBudget(storage.DefaultDecodeBudget)
	}
	marks, err := loadMarks(db, run, opts.Budget, storage.NewAllocTraceSet(opts.Budget))
	if err != nil {
		return nil, err
	}
	rep.Marks = MarkCounts{Epochs: len(marks.epochs), StepMarks: marks.stepCount, Events: len(marks.events), OOMs: len(marks.ooms)}
	for rank, steps := range marks.steps {
		rep.Marks.Steps = max(rep.Marks.Steps, steps.Len())
		if len(marks.steps) > 1 {
			if rep.Marks.StepsByRank == nil {
				rep.Marks.StepsByRank = map[string]int{}
			}
			rep.Marks.StepsByRank[strconv.Itoa(rank)] = steps.Len()
		}
	}
	rep.Events = marks.other
	if st := marks.stepTime(); finite(st) {
		rep.StepTimeS = &st
	}
	series, err := db.Series(run)
	if err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, runNotes(run, marks)...)
	if opts.Lines != nil {
		opts.Lines.SizeHint(linesSizes(run, series))
	}
	if rep.GPUs, err = analyzeGPUs(db, run, series, marks, opts); err != nil {
		return nil, err
	}
	for _, g := range rep.GPUs {
		if len(g.InferredEpochs) > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d epochs inferred from device memory (inferred_epochs), labelled as such; the time slices are still in intervals",
				g.Label(), len(g.InferredEpochs)))
			if i := slices.Index(rep.Notes, noEpochMarks); i >= 0 {
				rep.Notes[i] = noEpochMarksInferred
			}
		}
		if g.SiteRowsLeftOut > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d site rows left out of the analysis (the snapshots from the first of them on are not seen): %v",
				g.Label(), g.SiteRowsLeftOut, g.sitesLeftOutWhy))
		}
		if g.InconsistentSamples > 0 {
			what := fmt.Sprintf("%d allocator samples are", g.InconsistentSamples)
			if g.InconsistentSamples == 1 {
				what = "1 allocator sample is"
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("GPU %d: %s inconsistent (allocated above reserved, or active below allocated), used as sent",
				g.GPU, what))
		}
	}
	rep.summarize(run, marks)
	return rep, nil
}

// newReport returns a report holding what the run's record says about
// itself, with a note when only a window of it is analysed.
func newReport(run storage.Run) *Report {
	rep := &Report{Run: run.Name, RunID: run.ID, Host: run.Host, Job: run.Job, StartNS: run.StartNS, EndNS: run.EndNS,
		DurationS: run.Duration().Seconds(), Complete: run.Complete, Tags: run.Tags, IntervalNS: run.IntervalNS,
		Recorder: run.Recorder}
	if _, _, ok := run.Window(); ok {
		rep.Window = &WindowSpan{FromNS: run.StartNS, ToNS: run.EndNS,
			FromS: float64(run.StartNS-run.RunStartNS()) / 1e9, ToS: float64(run.EndNS-run.RunStartNS()) / 1e9}
		rep.Notes = append(rep.Notes, fmt.Sprintf("only the window from %.3f s to %.3f s of the run is analysed; times below count from the window's start",
			rep.Window.FromS, rep.Window.ToS))
	}
	return rep
}

// The note of a run without epoch marks, and its words where epochs were
// inferred from device memory.
const (
	noEpochMarks         = "no epoch marks: per-epoch deltas are replaced by deltas over ten equal time slices"
	noEpochMarksInferred = "no epoch marks: the per-epoch deltas are over the epochs inferred from device memory, and over ten equal time slices (intervals)"
)

// runNotes says what the run lacks (samples, marks, allocator samples) and
// what its source limits, each as a sentence for the report.
func runNotes(run storage.Run, marks *markIndex) []string {
	var notes []string
	if run.Counts.Samples+run.Counts.TorchSamples == 0 {
		notes = append(notes, "the run holds no samples")
	}
	if len(marks.epochs) == 0 {
		notes = append(notes, noEpochMarks)
	}
	if marks.stepCount == 0 {
		notes = append(notes, "no step marks: the leak slope is per hour only, fitted on the floors of time slices")
	}
	if run.Recorder.Source == storage.SourceNvidiaSMI {
		n := "imported from nvidia-smi logs: memory is known to 1 MiB (the logs' resolution), at the logs' interval"
		if run.Recorder.Invalid > 0 {
			n += fmt.Sprintf("; %d values nvidia-smi could not read ([N/A]) were dropped", run.Recorder.Invalid)
		}
		notes = append(notes, n)
	}
	switch {
	case run.Counts.TorchSamples == 0 && len(marks.probe) > 0:
		for _, p := range marks.probe {
			notes = append(notes, "no allocator samples: the probe says "+p+"; allocated, reserved and fragmentation are unknown; the leak is judged on device memory")
		}
	case run.Counts.TorchSamples == 0:
		notes = append(notes, "no allocator samples (no probe): allocated, reserved and fragmentation are unknown; the leak is judged on device memory")
	default:
		// Why there is no allocator trace (its other notes, such as an
		// allocator view missing before CUDA started, say nothing here).
		for _, p := range marks.probe {
			if strings.Contains(p, "allocator trace") {
				notes = append(notes, "the probe says "+p)
			}
		}
	}
	if marks.traceErr != nil {
		notes = append(notes, "an allocator trace is left out: "+marks.traceErr.Error())
	}
	if n := marks.leftOutNote(); n != "" {
		notes = append(notes, n)
	}
	return notes
}

// analyzeGPUs analyses the run's GPUs in parallel, in the order of their
// index: each reads its own series, and the marks are only read.
func analyzeGPUs(db *storage.DB, run storage.Run, series []storage.SeriesRef, marks *markIndex, opts Options) ([]GPUReport, error) {
	gpus := slices.Clone(run.GPUs)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	reports := make([]GPUReport, len(gpus))
	errs := make([]error, len(gpus))
	// A core a pass: a GPU with both device and allocator series keeps two
	// busy (passes) and takes two of the cores' tokens, so that only that
	// many GPUs' per-step columns are held at once; one with a single kind
	// of series takes one. The tokens are taken here, one GPU after the
	// other, so two GPUs never wait on each other's.
	cores := max(1, runtime.GOMAXPROCS(0))
	sem := make(chan struct{}, cores)
	var wg sync.WaitGroup
	for i, g := range gpus {
		w := min(cores, seriesOf(series, g.Index).passCount())
		for range w {
			sem <- struct{}{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				for range w {
					<-sem
				}
			}()
			gr, err := analyzeGPU(db, run, g, series, marks, opts)
			// The GPU's chunks are read: their pages need not count in
			// this process's memory while the next GPUs are analysed.
			db.ReleasePages()
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", g.Label(), err)
				return
			}
			reports[i] = *gr
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return reports, nil
}

// linesSizes is how many samples each device line and each allocator line
// of a run gets, from its counts: the device samples shared by its GPUs,
// the allocator samples by its allocator series (0 where unknown).
func linesSizes(run storage.Run, series []storage.SeriesRef) (device, allocator int64) {
	if n := len(run.GPUs); n > 0 {
		device = run.Counts.Samples / int64(n)
	}
	torch := 0
	for _, s := range series {
		if s.Kind == storage.SeriesTorch {
			torch++
		}
	}
	if torch > 0 {
		allocator = run.Counts.TorchSamples / int64(torch)
	}
	return device, allocator
}

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
	for it.Next() {
		m := it.At()
		switch m.Kind {
		case wire.MarkEpochStart:
			if m.Epoch != storage.None {
				if _, ok := starts[m.Epoch]; !ok && keep(epochCost) {
					starts[m.Epoch] = m.T
				}
			}
			continue
		case wire.MarkEpochEnd:
			if s, ok := starts[m.Epoch]; ok && m.Epoch != storage.None {
				mi.epochs = append(mi.epochs, epochSpan{n: m.Epoch, start: s, end: m.T})
				delete(starts, m.Epoch)
			}
			continue
		case wire.MarkStep:
			steps, ok := mi.steps[m.Rank]
			if !ok {
				steps = growth.NewSteps(int(perGPUShare(run, run.Counts.Marks)))
				mi.steps[m.Rank] = steps
			}
			steps.Add(m.T, m.Step)
			mi.stepCount++
			continue
		case storage.MarkAllocTrace:
			if traces != nil {
				traces.Add(m)
			}
			continue
		case wire.MarkProbe:
			if m.Text != "" && len(mi.probe) < maxProbeNotes && !slices.Contains(mi.probe, m.Text) && keep(int64(len(m.Text))+16) {
				mi.probe = append(mi.probe, m.Text)
			}
			continue
		}
		copies := int64(1) // other
		if m.Kind == wire.MarkOOM || m.Kind == wire.MarkEvent {
			copies++ // events
		}
		if m.Kind == wire.MarkOOM {
			copies++ // ooms
		}
		if !keep(copies*markCost + int64(len(m.Text))) {
			continue
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
	slices.Sort(d)
	return growth.Median(d)
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
