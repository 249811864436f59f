package analysis

import (
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/sites"
)

// This file holds the report of one out-of-memory error (OOM): the
// figures at it, how it ended, the batch that would have fitted and what
// caused it.

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
	// From the message: the request and the free memory on the device;
	// where the process was held to less than the device's memory (a
	// per-process memory fraction), the free memory is what that limit
	// leaves beyond reserved, and ProcessLimitBytes and DeviceFreeBytes
	// (the device's free memory, which the process could not take) say so.
	RequestedBytes    *int64 `json:"requested_bytes,omitempty"`
	FreeBytes         *int64 `json:"free_bytes,omitempty"`
	ProcessLimitBytes *int64 `json:"process_limit_bytes,omitempty"`
	DeviceFreeBytes   *int64 `json:"device_free_bytes,omitempty"`
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

// FitKind says what the fatal OOM's fitting batch is. With the per-step
// peak of steps the run completed, the need of a step is known and the
// batch is an estimate; without, the need is known only from below (what
// was allocated at the OOM plus the request: the step would have gone on
// to allocate more), so the batch is an upper bound: the batch that fits is
// at most this, and may be well below it.
type FitKind uint8

const (
	FitNone       FitKind = iota // no fitting batch
	FitEstimate                  // from the run's own per-step peak
	FitUpperBound                // from a lower bound of the step's need
)

func (k FitKind) String() string {
	switch k {
	case FitEstimate:
		return "estimate"
	case FitUpperBound:
		return "upper_bound"
	}
	return ""
}

// MarshalText writes the kind's name into JSON.
func (k FitKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// OOM outcomes: a job survives most out-of-memory errors it meets. cuDNN
// and cuBLAS ask for a large workspace, catch the error and fall back to a
// smaller one; scripts catch it and skip a batch. A run at too large a
// batch may show a burst of such fallbacks before the one that ends it.
type OOMOutcome uint8

const (
	OOMUnknown  OOMOutcome = iota // the run ends without telling
	OOMSurvived                   // the job went on after it
	OOMFatal                      // the process exited with an error after it
)

func (o OOMOutcome) String() string {
	switch o {
	case OOMSurvived:
		return "survived"
	case OOMFatal:
		return "fatal"
	}
	return "unknown"
}

// MarshalText writes the outcome's name into JSON.
func (o OOMOutcome) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// CauseBasis says what an OOM's parts come from.
type CauseBasis string

// The bases of a cause.
const (
	CauseWatched CauseBasis = "watched_budget"   // the job's memrec.watch budget
	CauseTrace   CauseBasis = "allocator_trace"  // the allocator sample, the split from the trace's replay
	CauseSample  CauseBasis = "allocator_sample" // the allocator sample at the OOM alone
)

// ChangeKind is the kind of change that would have made a step fit.
type ChangeKind string

// The changes.
const (
	ChangeSetting       ChangeKind = "allocator_setting"
	ChangeMicroBatch    ChangeKind = "micro_batch"
	ChangeCheckpointing ChangeKind = "activation_checkpointing"
	ChangeNone          ChangeKind = "none"
)

// OOMCause is the fatal OOM's budget at that moment and the change.
type OOMCause struct {
	Basis CauseBasis `json:"basis"`
	// Parts add up to TotalBytes: device used at the OOM where a device
	// sample was near it, else reserved. Shares are of TotalBytes.
	Parts      []budget.Slice `json:"parts"`
	TotalBytes int64          `json:"total_bytes"`
	// RequestBytes is the failed request, MissingBytes what the device
	// lacked for it (the request less the free memory), and with it
	// FirstStepStateBytes: the state a watched optimizer that had not yet
	// stepped creates at its first step (budget.FirstStepState).
	RequestBytes        int64     `json:"request_bytes"`
	MissingBytes        int64     `json:"missing_bytes"`
	FirstStepStateBytes int64     `json:"first_step_state_bytes,omitempty"`
	Change              OOMChange `json:"change"`
	Notes               []string  `json:"notes,omitempty"`
}

// OOMChange is the one change, with its number.
type OOMChange struct {
	Kind ChangeKind `json:"kind"`
	// Setting is PYTORCH_CUDA_ALLOC_CONF's value, for ChangeSetting.
	Setting string `json:"setting,omitempty"`
	// MicroBatch is the largest micro-batch that leaves room, with the
	// run's batch_size tag; Accumulation the micro-batches a batch then
	// takes (without the tag, the fewest equal parts that leave room).
	MicroBatch   float64 `json:"micro_batch,omitempty"`
	Accumulation int     `json:"accumulation,omitempty"`
	// FreeBytes is what the change must free of the activations, for
	// ChangeCheckpointing and ChangeNone.
	FreeBytes int64  `json:"free_bytes,omitempty"`
	Words     string `json:"words"`
}
