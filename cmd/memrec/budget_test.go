package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/internal/jobmodel"
)

// TestDemoBudgetIsTheSimulatorsTruth: the demo's job is jobmodel's H200
// job with memrec.watch; analyze --json of its run splits GPU 0's peak into
// exactly the model's parameters, gradients, AdamW state and activations,
// the text shows the budget and the advice, and the report has its bar.
func TestDemoBudgetIsTheSimulatorsTruth(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "d.db")
	if out, errs, code := run(t, db, "", "demo", "--duration", "4s", "-o", filepath.Join(dir, "demo"), "--width", "500", "--height", "250"); code != 0 {
		t.Fatalf("%d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "demo", "gpu0-budget.png")); err != nil {
		t.Fatal(err)
	}
	runs, _, code := run(t, db, "", "runs", "--json")
	if code != 0 {
		t.Fatal(runs)
	}
	var list []struct{ Name string }
	// The demo's run, and its run at a small batch for the prediction.
	if err := json.Unmarshal([]byte(runs), &list); err != nil || len(list) != 2 {
		t.Fatalf("runs: %v %s", err, runs)
	}
	if strings.HasSuffix(list[0].Name, "-bs16") {
		list = list[1:]
	}
	js, errs, code := run(t, db, "", "analyze", "--json", list[0].Name)
	if code != 0 {
		t.Fatal(errs)
	}
	var rep analysis.Report
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	j := jobmodel.H200(2, 20)
	s := j.Split(10, 1)
	b := rep.GPUs[0].Budget
	if b == nil || !b.Watched {
		t.Fatalf("GPU 0: budget %+v", b)
	}
	for part, want := range map[budget.Part]int64{budget.PartParams: s.Params, budget.PartGrads: s.Grads,
		budget.PartOptimizer: j.Optimizer, budget.PartActivations: j.Activations, budget.PartUnseen: j.Idle + j.Context + j.NCCL} {
		if got, _ := b.Part(part); got != want {
			t.Errorf("%s: %d, want the simulator's %d", part, got, want)
		}
	}
	text, _, _ := run(t, db, "", "analyze", list[0].Name, "--full")
	for _, w := range []string{"Budget at the peak", "optimizer state              2.00 GiB", "What would help", "gradient accumulation over 2 micro-batches: frees 2.00 GiB"} {
		if !strings.Contains(text, w) {
			t.Errorf("analyze lacks %q", w)
		}
	}
}

// TestBudgetSaysWhyUnseenIsNotKnown: a budget whose part not seen by
// PyTorch is not known has a row saying why, in one run's budget and in
// the runs side by side, never a bare dash.
func TestBudgetSaysWhyUnseenIsNotKnown(t *testing.T) {
	const why = "the run has no device samples on this GPU (NVML)"
	b := &budget.Budget{TotalBytes: 3 << 30, UnseenWhy: why, Basis: "test",
		Parts: []budget.Slice{{Part: budget.PartAllocated, Bytes: 2 << 30}, {Part: budget.PartCachedFree, Bytes: 1 << 30}}}
	var one, side strings.Builder
	printBudget(&one, &analysis.Report{}, b)
	printBudgets(&side, []compare.RunSummary{{Run: "a", Budget: b}})
	for name, out := range map[string]string{"one": one.String(), "side by side": side.String()} {
		var row string
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, budget.PartUnseen.Words()) && !strings.Contains(l, ":") {
				row = l
			}
		}
		if !strings.Contains(row, "not known") || strings.Contains(row, " - ") {
			t.Errorf("%s: row %q, want not known\n%s", name, row, out)
		}
		if !strings.Contains(out, why) {
			t.Errorf("%s: does not say why (%q)\n%s", name, why, out)
		}
		if !strings.Contains(out, "reserved") {
			t.Errorf("%s: does not say the total is reserved\n%s", name, out)
		}
	}
}
