package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/replay"
)

// fitSettings is what memrec fit says of the allocator's settings: the
// first prediction's limit under each (where the allocator replay was its
// basis) and the setting the trials ran with, which is the one the largest
// that ran speaks for.
type fitSettings struct {
	// PredictionBySetting is the first prediction per allocator setting,
	// without headroom (compare --by's limit_by_setting).
	PredictionBySetting []analysis.SettingLimit `json:"prediction_by_setting,omitempty"`
	// TrialsAllocConf is PYTORCH_CUDA_ALLOC_CONF (or PYTORCH_ALLOC_CONF)
	// as the trials got it from memrec's environment; "default" unset.
	TrialsAllocConf string `json:"trials_alloc_conf"`
	// PredictionBasis is the first prediction's basis (fitBasis).
	PredictionBasis fitBasis `json:"prediction_basis,omitempty"`
}

// fitBasis says what a prediction rests on.
type fitBasis string

// The bases of a prediction.
const (
	basisReplay    fitBasis = "trace_replay" // the allocator replayed over the runs' traces
	basisSegments  fitBasis = "segments"     // no trace: the largest segments the probe measured
	basisTraceless fitBasis = "traceless"    // no trace, no segments: an allowance
)

// String is the basis in words.
func (b fitBasis) String() string {
	switch b {
	case basisReplay:
		return "trace replay"
	case basisSegments:
		return "segments"
	case basisTraceless:
		return "trace-less"
	}
	return "-"
}

// basisOf is the basis of compare --by's fit by.
func basisOf(by *analysis.ByTag) fitBasis {
	switch {
	case by.Basis == "allocator_replay":
		return basisReplay
	case by.AllowanceBasis == "largest_segment":
		return basisSegments
	}
	return basisTraceless
}

// allocConfOf is the allocator setting a job started with getenv's
// environment runs under, as ParseAllocSettings spells it ("default"
// unset), and why it cannot be read where the replay does not model it.
func allocConfOf(getenv func(string) string) (string, error) {
	for _, k := range []string{"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"} {
		if v := strings.TrimSpace(getenv(k)); v != "" {
			s, err := replay.ParseAllocSettings(v)
			if err != nil {
				return v, fmt.Errorf("%s: %w", k, err)
			}
			return s.String(), nil
		}
	}
	return "default", nil
}

// predicted keeps what the first prediction said per allocator setting.
func (f *fitter) predicted(by *analysis.ByTag) {
	f.res.PredictionBySetting, f.res.PredictionBasis = by.LimitBySetting, basisOf(by)
}

// finishSettings notes the setting the trials ran with and stores the
// fit's record for fit --history.
func (f *fitter) finishSettings() {
	conf, err := allocConfOf(os.Getenv)
	if err != nil {
		fmt.Fprintf(f.log, "memrec: warning: %v\n", err)
	}
	f.res.TrialsAllocConf = conf
	if err := f.storeRecord(); err != nil {
		fmt.Fprintf(f.log, "memrec: warning: the fit's record for fit --history is not kept: %v\n", err)
	}
}

// settingsWords is fit's summary line of the prediction per setting:
// "64 with the default allocator, 72 with expandable_segments:True; the
// trials ran with the default allocator". "" without a prediction per
// setting.
func settingsWords(r fitResult) string {
	if len(r.PredictionBySetting) == 0 {
		return ""
	}
	parts := make([]string, 0, len(r.PredictionBySetting))
	ran := false
	for _, l := range r.PredictionBySetting {
		v := "none"
		if l.Value != nil {
			v = num(*l.Value)
		}
		with := "with " + l.Setting
		if l.Setting == "default" {
			with = "with the default allocator"
		}
		if l.Setting == r.TrialsAllocConf {
			with += " (the trials')"
			ran = true
		}
		parts = append(parts, v+" "+with)
	}
	s := fmt.Sprintf("%s=%s", r.By, strings.Join(parts, ", "))
	if !ran {
		s += fmt.Sprintf("; the trials ran with PYTORCH_CUDA_ALLOC_CONF=%s, which the replay did not try", r.TrialsAllocConf)
	}
	return s
}

// printSettings prints settingsWords under fit's result.
func (f *fitter) printSettings() {
	if s := settingsWords(f.res); s != "" {
		fmt.Fprintf(f.log, "predicted per allocator setting %s\n", s)
	} else if f.res.TrialsAllocConf != "" && f.res.TrialsAllocConf != "default" {
		fmt.Fprintf(f.log, "the trials ran with PYTORCH_CUDA_ALLOC_CONF=%s\n", f.res.TrialsAllocConf)
	}
}
