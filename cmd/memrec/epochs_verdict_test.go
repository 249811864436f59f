package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"testing"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// recordSim records a simulated two-GPU job of the scenario into db for
// length of the job's time, on a fake clock as memrec demo does (every
// tick taken however loaded the machine), and returns its run.
func recordSim(t testing.TB, db *storage.DB, scenario string, length time.Duration) storage.Run {
	t.Helper()
	start := time.Unix(1_750_000_000, 0)
	sim, err := recorder.NewSim(recorder.SimConfig{GPUs: 2, Scenario: scenario}, start)
	if err != nil {
		t.Fatal(err)
	}
	res, err := recorder.Record(context.Background(), recorder.Options{
		Open:   func(run storage.Run) (recorder.Store, error) { return recorder.DBStore(db, run, io.Discard) },
		Run:    storage.Run{Name: "sim-" + scenario, Tags: map[string]string{"source": "sim", "scenario": scenario}},
		Source: sim, Interval: 10 * time.Millisecond, Procs: true, Duration: length, Log: io.Discard,
		Clock: recorder.NewFakeClock(start),
	})
	if err != nil {
		t.Fatal(err)
	}
	return res.Run
}

// Epoch rows agree with the leak verdict, on every simulated scenario and
// on the real runs: a GPU judged no leak has no judged epoch (closed,
// after the warm-up) whose Δ is above noise, and a leaking GPU's judged
// epochs grow. Open and warm-up epochs are shown but never judged.
func TestEpochDeltasAgreeWithVerdict(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "e.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var runs []storage.Run
	for _, s := range []string{recorder.ScenarioNone, recorder.ScenarioLeak, recorder.ScenarioFragmentation, recorder.ScenarioOOM} {
		// 9.5 s: four epochs of 2 s after the first second, the last
		// open, ending inside a step.
		runs = append(runs, recordSim(t, db, s, 9500*time.Millisecond))
	}
	names := append([]string{fixtures.LeakRun, fixtures.CleanRun, fixtures.H200OOM}, fixtures.H200Plain...)
	names = append(append(names, fixtures.H200R18...), fixtures.H200GPT...)
	var srcs []jsonl.Source
	for _, n := range names {
		srcs = append(srcs, jsonl.Source{Name: n, R: bytes.NewReader(fixtures.Read(t, n))})
	}
	imported, err := jsonl.Import(db, srcs, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	runs = append(runs, imported...)
	leaks := 0
	for _, r := range runs {
		rep, err := analysis.Analyze(db, r, analysis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range rep.GPUs {
			rows := append(append(append([]analysis.EpochDelta(nil), g.Epochs...), g.InferredEpochs...), g.Intervals...)
			switch g.Leak.Judgement() {
			case growth.VerdictNoLeak:
				for _, e := range rows {
					if e.Grows() {
						t.Errorf("%s %s: no leak, yet epoch %d grows: Δ allocated %s, Δ used %s (%s)", r.Name, g.Label(), e.Epoch,
							units.FormatBytesPtr(e.DeltaAllocatedBytes), units.FormatBytesPtr(e.DeltaUsedBytes), e.DeltaBasis)
					}
				}
			case growth.VerdictLeak:
				leaks++
				judged, grow := 0, 0
				for _, e := range rows {
					// After an OOM the GPU's process is gone: nothing of
					// its allocator is left to compare.
					if !e.Judged() || g.Leak.Basis == "allocated" && e.DeltaAllocatedBytes == nil {
						continue
					}
					judged++
					if e.Grows() {
						grow++
					}
				}
				// A job's last slice can hold its end, after its last step.
				if judged == 0 || 2*grow <= judged {
					t.Errorf("%s %s: leaks, yet %d of its %d judged epochs grow", r.Name, g.Label(), grow, judged)
				}
			}
			for _, e := range rows {
				if e.DeltaBasis == "" {
					t.Errorf("%s %s epoch %d: no delta_basis", r.Name, g.Label(), e.Epoch)
				}
			}
		}
	}
	// The simulated leak and OOM, the planted leaks of the real runs.
	if leaks < 5 {
		t.Errorf("%d leaking GPUs, want at least 5", leaks)
	}
}
