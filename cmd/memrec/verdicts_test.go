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
// A run of 2 s is the job starting: the allocator's cache still grows
// over the first epoch, and nothing tells that ramp from a leak. With the
// simulated probe (steps, no completed epoch) and with a command (device
// memory only), the verdict is startup, without slope or time to full.
func TestShortRunIsStartUp(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	for name, args := range map[string][]string{
		"probe":   {"--sim-clock", "fake", "--duration", "2s"},
		"command": {"--", "sleep", "2"},
	} {
		if _, errs, code := run(t, db, "", append([]string{"record", "--source", "sim", "--sim-gpus", "1", "--name", name}, args...)...); code != 0 {
			t.Fatal(errs)
		}
		out, errs, code := run(t, db, "", "analyze", "--json", name)
		var rep struct {
			GPUs []struct {
				Leak struct {
					Kind   string   `json:"kind"`
					Reason string   `json:"reason"`
					Slope  *float64 `json:"slope_bytes_per_hour"`
					Full   *float64 `json:"time_to_full_s"`
				} `json:"leak"`
			} `json:"gpus"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.GPUs) != 1 {
			t.Fatalf("%s: %d %s", name, code, errs)
		}
		l := rep.GPUs[0].Leak
		if l.Kind != "startup" || l.Slope != nil || l.Full != nil || !strings.Contains(l.Reason, "too short to tell a start-up ramp from a leak") {
			t.Errorf("%s: %+v, want startup without slope or time to full", name, l)
		}
		text, _, _ := run(t, db, "", "analyze", name)
		if strings.Contains(text, "B per hour") || strings.Contains(text, "full in") {
			t.Errorf("%s: the text still gives a slope:\n%s", name, text)
		}
	}
}

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

// TestReservedGrowthOnTheH200 reads two real H200 recordings of one job
// (bench/h200/judge_runs.sh: a transformer layer on sequences whose longest
// grows over the run, with prefetched batches of random sizes), once with
// the caching allocator's defaults and once with expandable_segments:True.
// Both keep more at step ends as the run goes (the prefetched batches grow
// with the sequences): a leak of about 36 KiB a step in each. Without
// expandable segments the cache beyond the step's peak grows much faster
// (about 4.8 MiB a step), which the verdict says, and device memory fills
// sooner; with them it grows slower than allocated, and is not mentioned.
func TestReservedGrowthOnTheH200(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	type growth struct {
		Quantity string   `json:"quantity"`
		Trend    string   `json:"trend"`
		Slope    *float64 `json:"slope_bytes_per_step"`
	}
	read := func(name string) (kind string, full float64, g map[string]growth, text string) {
		t.Helper()
		if _, errs, code := run(t, db, "", "import", "--name", name, filepath.Join("testdata", "h200-reserved", name+".jsonl.gz")); code != 0 {
			t.Fatal(errs)
		}
		out, errs, code := run(t, db, "", "analyze", "--json", name)
		var rep struct {
			GPUs []struct {
				Leak struct {
					Kind   string   `json:"kind"`
					Full   *float64 `json:"time_to_full_s"`
					Growth []growth `json:"growth"`
				} `json:"leak"`
			} `json:"gpus"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.GPUs) != 1 || rep.GPUs[0].Leak.Full == nil {
			t.Fatalf("%s: %d %s", name, code, errs)
		}
		g = map[string]growth{}
		for _, e := range rep.GPUs[0].Leak.Growth {
			g[e.Quantity] = e
		}
		text, _, _ = run(t, db, "", "analyze", name)
		return rep.GPUs[0].Leak.Kind, *rep.GPUs[0].Leak.Full, g, text
	}
	offKind, offFull, off, offText := read("reserved-off")
	onKind, onFull, on, onText := read("reserved-on")
	for _, c := range []struct {
		name string
		kind string
		g    map[string]growth
	}{{"off", offKind, off}, {"on", onKind, on}} {
		a, r := c.g["allocated"], c.g["reserved_beyond_peak"]
		if c.kind != "leak" || a.Trend != "grows" || r.Trend != "grows" || a.Slope == nil || r.Slope == nil {
			t.Fatalf("%s: %s, allocated %+v, cache %+v", c.name, c.kind, a, r)
		}
	}
	if !(*off["reserved_beyond_peak"].Slope > *off["allocated"].Slope && *on["reserved_beyond_peak"].Slope < *on["allocated"].Slope) {
		t.Errorf("cache beyond the peak: off %.0f B/step against allocated %.0f, on %.0f against %.0f; want faster off, slower on",
			*off["reserved_beyond_peak"].Slope, *off["allocated"].Slope, *on["reserved_beyond_peak"].Slope, *on["allocated"].Slope)
	}
	if !strings.Contains(offText, "the allocator's cache grows faster") || strings.Contains(onText, "cache grows faster") {
		t.Errorf("off:\n%s\non:\n%s", offText, onText)
	}
	if offFull >= onFull {
		t.Errorf("time to full off %.0f s, on %.0f s: want the default allocator to fill the GPU sooner", offFull, onFull)
	}
}
