package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
)

// analyze's default output is a screen: on a simulated run of two GPUs
// with 30 epochs, one leaking, it stays within 60 lines, puts the
// judged epochs in at most summaryBuckets rows between the warm-up's and
// the open epoch's, names each GPU's verdict and its largest epoch Δ;
// --full and --section give the rest.
func TestAnalyzeSummaryFitsAScreen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.db")
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 61.5 s: a second of start-up, 30 epochs of 2 s, the last open.
	r := recordSim(t, db, recorder.ScenarioLeak, 61500*time.Millisecond)
	db.Close()
	out, errs, code := run(t, path, "", "analyze", r.Name)
	if code != 0 {
		t.Fatal(errs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) > 60 {
		t.Errorf("%d lines, want at most 60:\n%s", len(lines), out)
	}
	for _, want := range []string{"GPU 0 (", "no leak", "GPU 1 (", "grows 16.0 MiB per step", "0 (warm-up)", "(open)", "largest", "--full"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in:\n%s", want, out)
		}
	}
	// Rows between the warm-up's header and "largest" are the buckets and
	// the open epoch.
	start := strings.Index(out, "0 (warm-up)")
	end := strings.Index(out, "largest")
	if start < 0 || end < start {
		t.Fatalf("no epoch table in:\n%s", out)
	}
	if rows := strings.Count(out[start:end], "\n") - 1; rows > summaryBuckets+1 || rows < 2 {
		t.Errorf("%d epoch rows after the warm-up, want 2 to %d", rows, summaryBuckets+1)
	}
	// The leaking GPU's judged epochs grow by 16 MiB a step from the floor
	// after their first step to the floor after their last, the 20th.
	if want := units.FormatBytes(19*16<<20) + " at "; !strings.Contains(out, want) {
		t.Errorf("no largest Δ %q in:\n%s", want, out)
	}
	full, _, _ := run(t, path, "", "analyze", r.Name, "--full")
	if n := strings.Count(full, "\n"); n <= len(lines) || !strings.Contains(full, "assumes") || !strings.Contains(full, "29  ") {
		t.Errorf("--full: %d lines, want every epoch and the remedies' assumptions", n)
	}
	part, _, _ := run(t, path, "", "analyze", r.Name, "--section", "epochs")
	if strings.Contains(part, "What would help") || !strings.Contains(part, "15  ") {
		t.Errorf("--section epochs:\n%s", part)
	}
	_, errs, code = run(t, path, "", "analyze", r.Name, "--section", "epoch")
	if code == 0 || !strings.Contains(errs, `--section "epoch": no such section (want some of leak,peaks,epochs,`) {
		t.Errorf("unknown section: exit %d, %s", code, errs)
	}
}

// TestPrintCounters: a counter that counted prints its total, its rate a
// step and the table's help; one that did not is left out.
func TestPrintCounters(t *testing.T) {
	r := 0.8
	g := analysis.GPUReport{Counters: []analysis.Counter{{Name: "alloc_retries", Help: "Retried."},
		{Name: "device_allocs", Total: 1203, PerStep: &r, Steps: 1500, Help: "Device allocations (cudaMalloc)."}}}
	var b strings.Builder
	printCounters(&b, g)
	want := "Allocator device_allocs: 1203 (0.8 a step after the warm-up, over 1500 steps). Device allocations (cudaMalloc).\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}
}
