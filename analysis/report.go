package analysis

import (
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/storage"
)

// The Report and the types it is made of: the shape of analyze --json.
// How each figure is computed lies in the pass that fills it; an OOM's
// post-mortem and its types are in oomreport.go.

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
	// compare's traceless.go reads it.
	MostInactiveSplitBytes *int64 `json:"most_inactive_split_bytes,omitempty"`
	// MostLiveSegmentBytes is, with MostInactiveSplitBytes, the most
	// allocated + inactive split at once: the room of the segments that
	// held live blocks. LastInactiveSplitBytes is the inactive split at the
	// last allocator sample (after the job's last step: a split it holds
	// across steps). compare's traceless.go reads both.
	MostLiveSegmentBytes   *int64 `json:"most_live_segment_bytes,omitempty"`
	LastInactiveSplitBytes *int64 `json:"last_inactive_split_bytes,omitempty"`
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
	// AllocTraceMissedBytes is how much more the run reserved than the
	// trace's replay under the default allocator, where the trace missed
	// later, larger steps (oomcause.go); 0 where it did not.
	AllocTraceMissedBytes int64 `json:"alloc_trace_missed_bytes,omitempty"`
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

// DeltaBasis is what an epoch's start, end and Δ were read from.
type DeltaBasis string

// The bases of an epoch's Δ.
const (
	// DeltaStepFloors: the floors between steps (the lowest sample from a
	// step's mark to the next) after the epoch's first step and after its
	// last. They lie inside the epoch: a window that starts at the epoch,
	// or a run cut there, reads the same.
	DeltaStepFloors DeltaBasis = "step_floors"
	// DeltaTimeFloors: without step marks, the lowest sample of a window
	// of time slices at each end of the epoch (floorWindow).
	DeltaTimeFloors DeltaBasis = "time_floors"
	// DeltaFloorBounds: the samples at the epoch's bounds, which were
	// placed at floors (epochs inferred from device memory).
	DeltaFloorBounds DeltaBasis = "floor_bounds"
	// DeltaBounds: the samples at the epoch's start and end, where it
	// holds too few floors (an epoch of one step, or within one slice).
	DeltaBounds DeltaBasis = "bounds"
)

// String is the basis as the JSON report spells it.
func (b DeltaBasis) String() string { return string(b) }

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

// HostSummary is one node of a merged run.
type HostSummary struct {
	Host     string `json:"host"`
	GPUs     int    `json:"gpus"`
	OffsetNS int64  `json:"clock_offset_ns"` // subtracted from the node's times at merge
	// Aligned is false where the node shared no step marks with the first
	// node: its clock was taken as it was.
	Aligned            bool   `json:"aligned"`
	PeakUsedBytes      *int64 `json:"peak_used_bytes"`
	PeakUsedGPU        string `json:"peak_used_gpu,omitempty"`
	PeakAllocatedBytes *int64 `json:"peak_allocated_bytes"`
	Leaks              int    `json:"leaking_gpus"`
	OOMs               int    `json:"ooms"`
	// Growth is the growth rule on the node's total: the sum of its GPUs'
	// floors (the leak's series of each) at each step or time slice that
	// every one of them has.
	Growth *growth.Growth `json:"growth,omitempty"`
}

// Imbalance is the spread of peak memory across the run's GPUs (ranks):
// Ratio = max/min. Basis says which peak: step_peak (the probe's per-step
// peak), allocated, or device_used.
type Imbalance struct {
	Basis    string  `json:"basis"`
	MaxBytes int64   `json:"max_bytes"`
	MaxGPU   string  `json:"max_gpu"`
	MinBytes int64   `json:"min_bytes"`
	MinGPU   string  `json:"min_gpu"`
	Ratio    float64 `json:"ratio"`
}

// Worst is the GPU to look at first, and why: one that ran out of memory,
// else the fastest leak, else the fullest.
type Worst struct {
	GPU    int    `json:"gpu"`
	Label  string `json:"label"`
	Reason string `json:"reason"`
}

// Frag summarises fragmentation of the caching allocator.
//
// Mean, P95, Max and Final are of (reserved − allocated) / reserved: the
// share of the allocator's memory that is cached and free, what
// empty_cache() would return. Most of it is the cache doing its job (a
// step's activations are freed at its end and kept for the next), so it is
// not waste. What the job never uses, even at its busiest, is PeakWaste:
// 1 − the step's peak allocated / reserved, at each allocator sample that
// reports a peak. Stuck is the share in inactive split blocks.
type Frag struct {
	Mean      float64 `json:"mean"`
	P95       float64 `json:"p95"`
	Max       float64 `json:"max"`
	Final     float64 `json:"final"`
	StuckMean float64 `json:"stuck_mean"`
	StuckMax  float64 `json:"stuck_max"`
	Samples   int     `json:"samples"`

	CachedFreeMean    float64  `json:"cached_free_mean"` // = Mean, under its name
	PeakWasteMean     *float64 `json:"waste_at_peak_mean"`
	PeakWasteMin      *float64 `json:"waste_at_peak_min"`
	PeakWasteMax      *float64 `json:"waste_at_peak_max"`
	InactiveSplitMean float64  `json:"inactive_split_mean"` // = StuckMean, under its name
}

// Counter is one of the allocator's event counters (a row of
// wire.TorchFields with a Stat) over one GPU: how many events its
// processes counted while the run was analysed, and how many a step once
// the job had warmed up (counters.go counts them). A new row of the table
// is a new Counter: nothing in the analysis names one.
type Counter struct {
	Name  string `json:"name"`  // the field's name (device_allocs)
	Total int64  `json:"total"` // over the analysed span, summed over the GPU's processes
	// PerStep is the count from the end of the warm-up to the last step
	// mark, divided by the Steps marked in between: a cache that keeps
	// calling cudaMalloc in the steady state thrashes. Nil without step
	// marks after the warm-up.
	PerStep *float64 `json:"per_step,omitempty"`
	Steps   int      `json:"steps,omitempty"`
	Help    string   `json:"-"` // what the count means (the table's Help)
}

// Timeline is a GPU's memory downsampled for drawing: per bucket of time
// the first, lowest, highest and last point (M4), so no peak disappears.
type Timeline struct {
	StartNS, EndNS int64
	Used           Series
	DriverReserved Series // NVML's reserved memory; empty where the driver does not report it
	Allocated      Series
	Reserved       Series
	Procs          []Series // one per process (NVML), named "pid N"
}

// Series is a list of points in time order.
type Series struct {
	Name string
	T    []int64
	V    []int64
	// I is each point's position among all the samples of the series
	// before downsampling (0 for the first sample).
	I []int64
}

// JobSpan is where the job holds memory on a GPU, and how that was found.
type JobSpan struct {
	FromNS int64  `json:"from_ns"`
	ToNS   int64  `json:"to_ns"`
	Basis  string `json:"basis"` // processes, device_rise_fall
}
