package analysis

import (
	"bytes"
	"math"
	"path/filepath"
	"testing"

	"github.com/memrec/memrec/internal/fixtures"
	"github.com/memrec/memrec/storage"
)

// importFixtures imports JSON Lines inputs into one fresh database and
// analyses every run, by run name.
func importFixtures(t *testing.T, inputs map[string][]byte) map[string]*Report {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var srcs []storage.Source
	for name, data := range inputs {
		srcs = append(srcs, storage.Source{Name: name, R: bytes.NewReader(data)})
	}
	runs, err := db.Import(srcs, storage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*Report{}
	for _, r := range runs {
		if out[r.Name], err = Analyze(db, r, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestDeviceOnlyLeakOnRealRuns judges real H200 runs recorded without the
// probe: ResNet-18 leaking (each step's logits kept) and clean, at two
// batch sizes, with and without process series; and the probe runs with
// their allocator samples and marks dropped (the device view is the same).
// The truth is the planted leak per step over the script's own step times
// (fixtures.Truth), or, for the probe runs, what their steps and marks say.
// Slopes must lie within 15 % of it, verdicts be right, and a no_leak
// verdict carry no slope outside an interval around 0.
func TestDeviceOnlyLeakOnRealRuns(t *testing.T) {
	truth := fixtures.ReadTruth(t)
	inputs := map[string][]byte{}
	want := map[string]float64{} // run name -> bytes per hour
	for _, f := range fixtures.H200Plain {
		tr, ok := truth.Plain[f]
		if !ok {
			t.Fatalf("no truth for %s", f)
		}
		run := f[len("h200-"):]
		inputs[f] = fixtures.Read(t, f)
		inputs[f+"-noprocs"] = fixtures.DeviceOnlyNoProcs(t, f)
		want[run], want[run+"-noprocs"] = tr.LeakBytesPerHour(), tr.LeakBytesPerHour()
	}
	// The probe runs: 256 000 B per step in the leaking one, at the step
	// rate after its first epoch.
	for _, f := range []string{fixtures.LeakRun, fixtures.CleanRun} {
		inputs[f+"-device"] = fixtures.DeviceOnly(t, f)
		inputs[f+"-noprocs"] = fixtures.DeviceOnlyNoProcs(t, f)
	}
	withMarks := importFixtures(t, map[string][]byte{"leak": fixtures.Read(t, fixtures.LeakRun)})[fixtures.LeakRun]
	steps := withMarks.GPUs[0].Steps
	var after []StepMark
	for _, s := range steps {
		if s.TNS > withMarks.GPUs[0].Epochs[0].EndNS {
			after = append(after, s)
		}
	}
	leakRate := 256000 * float64(len(after)-1) / (float64(after[len(after)-1].TNS-after[0].TNS) / 1e9) * 3600
	want[fixtures.LeakRun+"-device"], want[fixtures.LeakRun+"-noprocs"] = leakRate, leakRate
	want[fixtures.CleanRun+"-device"], want[fixtures.CleanRun+"-noprocs"] = 0, 0
	for _, f := range append(append([]string{}, fixtures.H200R18...), fixtures.H200GPT...) {
		inputs[f] = fixtures.DeviceOnly(t, f)
	}

	reps := importFixtures(t, inputs)
	for _, f := range append(append([]string{}, fixtures.H200R18...), fixtures.H200GPT...) {
		want[f[len("h200-"):]+"-device"] = 0
	}
	if len(reps) != len(want) {
		t.Fatalf("%d runs analysed, %d with a truth", len(reps), len(want))
	}
	for name, rate := range want {
		rep := reps[name]
		if rep == nil {
			t.Errorf("%s: not imported", name)
			continue
		}
		g := rep.GPUs[0]
		l := g.Leak
		if l.Basis != "device_used" || g.JobSpan == nil {
			t.Errorf("%s: basis %s, job span %v", name, l.Basis, g.JobSpan)
		}
		switch {
		case rate > 0:
			if l.Verdict != VerdictLeak || l.SlopeBytesPerHour == nil {
				t.Errorf("%s: %s (%s), want a leak of %.1f GB/h", name, l.Verdict, l.Reason, rate/1e9)
				continue
			}
			if e := math.Abs(*l.SlopeBytesPerHour-rate) / rate; e > 0.15 {
				t.Errorf("%s: %.2f GB/h, truth %.2f GB/h (%.0f %% off)", name, *l.SlopeBytesPerHour/1e9, rate/1e9, 100*e)
			}
			t.Logf("%s: %.2f GB/h, truth %.2f GB/h (%+.1f %%)", name, *l.SlopeBytesPerHour/1e9, rate/1e9, 100*(*l.SlopeBytesPerHour-rate)/rate)
		default:
			if l.Verdict != VerdictNoLeak {
				t.Errorf("%s: %s (%s), want no_leak", name, l.Verdict, l.Reason)
			}
			if s := l.SlopeBytesPerHour; s != nil && (*l.CILowBytesPerHour > 0 || *l.CIHighBytesPerHour < 0) {
				t.Errorf("%s: no_leak with a slope of %.2f GB/h outside an interval around 0", name, *s/1e9)
			}
		}
		// Start-up and teardown are outside the job: the run's first and
		// last seconds hold no process memory.
		if g.JobSpan.FromNS <= rep.StartNS || g.JobSpan.ToNS >= rep.EndNS {
			t.Errorf("%s: job span %d..%d is not inside the run %d..%d", name, g.JobSpan.FromNS, g.JobSpan.ToNS, rep.StartNS, rep.EndNS)
		}
	}
}

// TestLargestBatchOnRealRuns predicts the largest batch from real runs at
// three small batch sizes and checks it against the limit found by
// bisection on the same H200: without headroom within 10 % below the
// largest batch that ran and at most 3 % above it, with 5 % headroom no
// more than the largest batch that ran.
func TestLargestBatchOnRealRuns(t *testing.T) {
	truth := fixtures.ReadTruth(t)
	for model, files := range map[string][]string{"r18": fixtures.H200R18, "gpt": fixtures.H200GPT} {
		inputs := map[string][]byte{}
		for _, f := range files {
			inputs[f] = fixtures.Read(t, f)
		}
		reps := importFixtures(t, inputs)
		var list []*Report
		for _, r := range reps {
			list = append(list, r)
		}
		c, err := Compare(list, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := FitByTag(c, "batch_size", 0.05); err != nil {
			t.Fatal(err)
		}
		b, lim := c.By, truth.Limits[model]
		if lim.Largest == 0 || b.Basis != "step_peak_allocated" || b.MaxFittingValue == nil || b.MaxFittingValueNoHeadroom == nil {
			t.Fatalf("%s: limit %+v, by %+v", model, lim, b)
		}
		p, h := *b.MaxFittingValueNoHeadroom, *b.MaxFittingValue
		t.Logf("%s: predicted %v (with headroom %v), largest that ran %d", model, p, h, lim.Largest)
		if p < 0.9*float64(lim.Largest) || p > 1.03*float64(lim.Largest) {
			t.Errorf("%s: predicted %v without headroom, the largest batch that ran is %d", model, p, lim.Largest)
		}
		if h > float64(lim.Largest) {
			t.Errorf("%s: predicted %v with headroom, but %d is the largest batch that ran", model, h, lim.Largest)
		}
	}
}
