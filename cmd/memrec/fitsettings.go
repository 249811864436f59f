package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/fit"
	"github.com/memrec/memrec/storage"
)

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

// withSettings notes on r the setting the trials ran with (they get
// memrec's environment) and keeps the fit's record for fit --history in
// its trials' runs; what cannot be done is a warning on log.
func withSettings(db *storage.DB, r fit.Result, log io.Writer) fit.Result {
	conf, err := allocConfOf(os.Getenv)
	if err != nil {
		fmt.Fprintf(log, "memrec: warning: %v\n", err)
	}
	r.TrialsAllocConf = conf
	if err := storeFitRecord(db, r); err != nil {
		fmt.Fprintf(log, "memrec: warning: the fit's record for fit --history is not kept: %v\n", err)
	}
	return r
}

// settingsWords is fit's summary line of the prediction per setting:
// "batch_size=64 with the default allocator (the trials'), 72 with
// expandable_segments:True". "" without a prediction per setting.
func settingsWords(r fit.Result) string {
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
func printSettings(w io.Writer, r fit.Result) {
	if s := settingsWords(r); s != "" {
		fmt.Fprintf(w, "predicted per allocator setting %s\n", s)
	} else if r.TrialsAllocConf != "" && r.TrialsAllocConf != "default" {
		fmt.Fprintf(w, "the trials ran with PYTORCH_CUDA_ALLOC_CONF=%s\n", r.TrialsAllocConf)
	}
}
