package fit

import "github.com/memrec/memrec/analysis/compare"

// Settings is what a fit says of the allocator's settings: the first
// prediction's limit under each (where the allocator replay was its basis)
// and the setting the trials ran with, which the largest that ran speaks
// for. The caller sets TrialsAllocConf: it knows the trials' environment.
type Settings struct {
	// PredictionBySetting is the first prediction per allocator setting,
	// without headroom (compare --by's limit_by_setting).
	PredictionBySetting []compare.SettingLimit `json:"prediction_by_setting,omitempty"`
	// TrialsAllocConf is PYTORCH_CUDA_ALLOC_CONF as the trials got it, as
	// replay.ParseAllocSettings spells it ("default" unset).
	TrialsAllocConf string `json:"trials_alloc_conf,omitempty"`
	// PredictionBasis is what the first prediction rests on.
	PredictionBasis Basis `json:"prediction_basis,omitempty"`
}

// Basis says what a prediction rests on.
type Basis string

// The bases of a prediction.
const (
	BasisReplay    Basis = "trace_replay" // the allocator replayed over the runs' traces
	BasisSegments  Basis = "segments"     // no trace: the largest segments the probe measured
	BasisTraceless Basis = "traceless"    // no trace, no segments: an allowance
)

// String is the basis in words.
func (b Basis) String() string {
	switch b {
	case BasisReplay:
		return "trace replay"
	case BasisSegments:
		return "segments"
	case BasisTraceless:
		return "trace-less"
	}
	return "-"
}

// BasisOf is the basis of compare --by's fit by.
func BasisOf(by *compare.ByTag) Basis {
	switch {
	case by.Basis == "allocator_replay":
		return BasisReplay
	case by.AllowanceBasis == "largest_segment":
		return BasisSegments
	}
	return BasisTraceless
}

// predicted keeps what the first prediction said per allocator setting.
func (s *Search) predicted(by *compare.ByTag) {
	s.res.PredictionBySetting, s.res.PredictionBasis = by.LimitBySetting, BasisOf(by)
}
