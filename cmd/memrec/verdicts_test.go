package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
)

// TestVerdictsOfTheSimulatedScenarios: the simulator's scenarios, judged
// through record and analyze --json. The fragmentation scenario grows the
// allocator's reserved memory by 2 % of the step's peak a step while
// allocated stays flat (internal/jobmodel): cache_growth, with that slope;
// the leak scenario keeps tensors on its last GPU: leak there, no_leak on
// the other; the plain job: no_leak everywhere.
func TestVerdictsOfTheSimulatedScenarios(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	type gpu struct {
		GPU      int    `json:"gpu"`
		PeakStep *int64 `json:"peak_step_allocated_bytes"`
		Leak     struct {
			Verdict string   `json:"verdict"`
			Kind    string   `json:"kind"`
			Basis   string   `json:"basis"`
			Slope   *float64 `json:"slope_bytes_per_step"`
			Full    *float64 `json:"time_to_full_s"`
		} `json:"leak"`
	}
	for _, c := range []struct {
		scenario      string
		kinds, legacy []string
	}{
		{"fragmentation", []string{"cache_growth", "cache_growth"}, []string{"no_leak", "no_leak"}},
		{"leak", []string{"no_leak", "leak"}, []string{"no_leak", "leak"}},
		{"none", []string{"no_leak", "no_leak"}, []string{"no_leak", "no_leak"}},
	} {
		if _, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-clock", "fake", "--sim-scenario", c.scenario,
			"--sim-gpus", "2", "--duration", "30s", "--name", c.scenario); code != 0 {
			t.Fatal(errs)
		}
		out, errs, code := run(t, db, "", "analyze", "--json", c.scenario)
		if code != 0 {
			t.Fatal(errs)
		}
		var rep struct{ GPUs []gpu }
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for i, g := range rep.GPUs {
			if g.Leak.Kind != c.kinds[i] || g.Leak.Verdict != c.legacy[i] {
				t.Errorf("%s GPU %d: kind %s verdict %s, want %s and %s", c.scenario, i, g.Leak.Kind, g.Leak.Verdict, c.kinds[i], c.legacy[i])
				continue
			}
			if c.scenario != "fragmentation" {
				continue
			}
			want := 0.02 * float64(*g.PeakStep)
			if g.Leak.Basis != "reserved" || g.Leak.Slope == nil || math.Abs(*g.Leak.Slope-want) > 0.01*want || g.Leak.Full == nil {
				t.Errorf("fragmentation GPU %d: basis %s, slope %v B/step, time to full %v; want reserved at %.0f B/step (2 %% of the step peak) and a time to full",
					i, g.Leak.Basis, g.Leak.Slope, g.Leak.Full, want)
			}
		}
		text, _, _ := run(t, db, "", "analyze", c.scenario)
		if c.scenario == "fragmentation" && !strings.Contains(text, "expandable_segments:True") {
			t.Errorf("fragmentation: the text gives no advice:\n%s", text)
		}
	}
}
