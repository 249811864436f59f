package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/testsupport/fixtures"
)

func TestParseBound(t *testing.T) {
	day := func(h, m, s int) time.Duration {
		return time.Duration(h)*time.Hour + time.Duration(m)*time.Minute + time.Duration(s)*time.Second
	}
	for _, tc := range []struct {
		in   string
		want analysis.Bound
	}{
		{"", analysis.Bound{}},
		{"90", analysis.Bound{Kind: analysis.BoundSeconds, Seconds: 90}},
		{"12.5", analysis.Bound{Kind: analysis.BoundSeconds, Seconds: 12.5}},
		{"1m30s", analysis.Bound{Kind: analysis.BoundSeconds, Seconds: 90}},
		{"2h", analysis.Bound{Kind: analysis.BoundSeconds, Seconds: 7200}},
		{"14:03", analysis.Bound{Kind: analysis.BoundClock, Clock: day(14, 3, 0)}},
		{"14:03:10", analysis.Bound{Kind: analysis.BoundClock, Clock: day(14, 3, 10)}},
		{"2026-11-29T14:03:10Z", analysis.Bound{Kind: analysis.BoundTime, TimeNS: time.Date(2026, 11, 29, 14, 3, 10, 0, time.UTC).UnixNano()}},
		{"2026-11-29 14:03:10", analysis.Bound{Kind: analysis.BoundTime, TimeNS: time.Date(2026, 11, 29, 14, 3, 10, 0, time.Local).UnixNano()}},
		{"epoch:2", analysis.Bound{Kind: analysis.BoundEpoch, N: 2}},
		{"step:0", analysis.Bound{Kind: analysis.BoundStep, N: 0}},
	} {
		got, err := parseBound("--from", tc.in)
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
	for _, in := range []string{"epoch:x", "epoch:-1", "step:", "-5", "-1m", "soon", "25:00", "NaN"} {
		if _, err := parseBound("--to", in); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("--to %q", in)) {
			t.Errorf("%q: error %v, want one naming --to and the value", in, err)
		}
	}
}

// TestWindowFromEpochEqualsARunStartingThere analyses the leak run from
// epoch 2 on, and the same run cut there by export and imported again: the
// figures must agree (times are stored to 1 µs in both), but for the leak's
// warm-up: the window takes its run's (epoch 0, long past: nothing is
// dropped), the cut run, a run of its own, its own first epoch (epoch 2).
func TestWindowFromEpochEqualsARunStartingThere(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", leakRun); code != 0 {
		t.Fatal(errs)
	}
	cut := filepath.Join(dir, "cut.jsonl")
	if _, errs, code := run(t, db, "", "export", "real-resnet18-bs64-leak", "--from", "epoch:2", "-o", cut); code != 0 {
		t.Fatal(errs)
	}
	if _, errs, code := run(t, db, "", "import", "--name", "cut", cut); code != 0 {
		t.Fatal(errs)
	}
	windowed, errs, code := run(t, db, "", "analyze", "real-resnet18-bs64-leak", "--from", "epoch:2", "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	whole, _, _ := run(t, db, "", "analyze", "cut", "--json")
	var a, b map[string]any
	if err := json.Unmarshal([]byte(windowed), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(whole), &b); err != nil {
		t.Fatal(err)
	}
	if w, ok := a["window"].(map[string]any); !ok || w["from_s"].(float64) < 5 {
		t.Fatalf("window: %v", a["window"])
	}
	for _, k := range []string{"run", "run_id", "notes", "window"} {
		delete(a, k)
		delete(b, k)
	}
	if marks := a["marks"].(map[string]any); marks["epochs"].(float64) != 2 || marks["steps"].(float64) != 300 {
		t.Fatalf("the window holds %v, want epochs 2 and 3 and their 300 steps", marks)
	}
	leakOf := func(rep map[string]any) map[string]any {
		g := rep["gpus"].([]any)[0].(map[string]any)
		l := g["leak"].(map[string]any)
		delete(g, "leak")
		for _, p := range g["processes"].([]any) { // the same warm-up
			delete(p.(map[string]any), "growth")
		}
		return l
	}
	if la, lb := leakOf(a), leakOf(b); la["kind"] != "leak" || lb["kind"] != "leak" || la["skipped_warmup_points"].(float64) != 0 ||
		la["points"].(float64) != 300 || lb["skipped_warmup_points"].(float64) != 150 || la["slope_bytes_per_step"] != lb["slope_bytes_per_step"] {
		t.Errorf("leak of the window %v\nof the cut run %v\nwant both 256 000 B a step, the window over its 300 steps, the cut run after its first epoch", la, lb)
	}
	// The window's first epoch reads its floors inside itself (after its
	// first and last steps), as the whole run and the cut run do; the first
	// step's pairing of device and allocator samples takes the last samples
	// before the window, as in the whole run, where the cut run has none.
	full, _, _ := run(t, db, "", "analyze", "real-resnet18-bs64-leak", "--json")
	var f map[string]any
	if err := json.Unmarshal([]byte(full), &f); err != nil {
		t.Fatal(err)
	}
	epochOf := func(rep map[string]any, n float64) map[string]any {
		for _, e := range rep["gpus"].([]any)[0].(map[string]any)["epochs"].([]any) {
			if e := e.(map[string]any); e["epoch"] == n {
				return e
			}
		}
		t.Fatalf("no epoch %v", n)
		return nil
	}
	wa, wb, wf := epochOf(a, 2), epochOf(b, 2), epochOf(f, 2)
	for _, k := range []string{"used_start_bytes", "allocated_start_bytes", "delta_used_bytes", "delta_allocated_bytes"} {
		if wa[k] == nil || wa[k] != wf[k] || wb[k] != wf[k] {
			t.Errorf("epoch 2's %s: window %v, whole run %v, cut run %v: want all three the same", k, wa[k], wf[k], wb[k])
		}
	}
	// The cut run's first epoch is its warm-up; the window keeps the whole
	// run's, as its leak does.
	if wa["warmup"] != nil || wb["warmup"] != true {
		t.Errorf("epoch 2's warm-up: window %v, cut run %v", wa["warmup"], wb["warmup"])
	}
	delete(wb, "warmup")
	delete(a["gpus"].([]any)[0].(map[string]any), "unseen_by_pytorch")
	delete(b["gpus"].([]any)[0].(map[string]any), "unseen_by_pytorch")
	// A counter's rate a step starts after the warm-up, like the leak's fit:
	// the window's is the whole run's (its 300 steps), the cut run's after
	// its own first epoch (150); their totals must agree.
	for _, rep := range []map[string]any{a, b} {
		cs, _ := rep["gpus"].([]any)[0].(map[string]any)["counters"].([]any)
		for _, c := range cs {
			delete(c.(map[string]any), "steps")
			delete(c.(map[string]any), "per_step")
		}
	}
	if diffs := jsonDiff("", a, b); len(diffs) > 0 {
		t.Fatalf("windowed analysis differs from the cut run's:\n%s", strings.Join(diffs, "\n"))
	}

	// A window by steps and by seconds; an epoch the run does not have.
	out, errs, code := run(t, db, "", "analyze", "real-resnet18-bs64-leak", "--from", "step:150", "--to", "step:299", "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var rep analysis.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Marks.Steps != 150 || rep.Marks.Epochs != 1 {
		t.Fatalf("step window: %v, %+v", err, rep.Marks)
	}
	if _, errs, code = run(t, db, "", "analyze", "real-resnet18-bs64-leak", "--from", "epoch:9"); code != 1 || !strings.Contains(errs, "epoch 9") || !strings.Contains(errs, "--from") {
		t.Fatalf("missing epoch: %d %q", code, errs)
	}
	if _, errs, code = run(t, db, "", "analyze", "real-resnet18-bs64-leak", "--from", "10", "--to", "5"); code != 1 || !strings.Contains(errs, "empty") {
		t.Fatalf("empty window: %d %q", code, errs)
	}
	repDir := filepath.Join(dir, "rep")
	if _, errs, code = run(t, db, "", "report", "real-resnet18-bs64-leak", "--from", "8", "--to", "12", "-o", repDir, "--width", "400", "--height", "200"); code != 0 {
		t.Fatal(errs)
	}
	if _, err := os.Stat(filepath.Join(repDir, "index.html")); err != nil {
		t.Fatal(err)
	}
	if out, errs, code = run(t, db, "", "compare", "real-resnet18-bs64-leak", "cut", "--from", "epoch:3", "--json"); code != 0 || !strings.Contains(out, `"peak_used_ratio": 1`) {
		t.Fatalf("compare with a window: %d %s %s", code, out, errs)
	}
}

// jsonDiff lists where two decoded JSON values differ; numbers may differ
// by 1e-9 relative (or 1e-6 absolute, for values near zero).
func jsonDiff(path string, a, b any) []string {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: %v vs %v", path, a, b)}
		}
		var out []string
		for k := range av {
			out = append(out, jsonDiff(path+"."+k, av[k], bv[k])...)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				out = append(out, fmt.Sprintf("%s.%s: missing vs %v", path, k, bv[k]))
			}
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			return []string{fmt.Sprintf("%s: %d items vs %v", path, len(av), b)}
		}
		var out []string
		for i := range av {
			out = append(out, jsonDiff(fmt.Sprintf("%s[%d]", path, i), av[i], bv[i])...)
		}
		return out
	case float64:
		bv, ok := b.(float64)
		if !ok || math.Abs(av-bv) > max(1e-6, 1e-9*math.Abs(av)) {
			return []string{fmt.Sprintf("%s: %v vs %v", path, a, b)}
		}
		return nil
	}
	if fmt.Sprint(a) != fmt.Sprint(b) {
		return []string{fmt.Sprintf("%s: %v vs %v", path, a, b)}
	}
	return nil
}

// TestEpochWindowNeedsEpochMarks: a run whose epochs are only inferred
// (no epoch marks) refuses epoch:N as a bound, naming the flag and saying
// why.
func TestEpochWindowNeedsEpochMarks(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	data, _ := fixtures.EvalRun("eval-pauses").Write()
	in := filepath.Join(dir, "eval.jsonl")
	if err := os.WriteFile(in, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := run(t, db, "", "import", in); code != 0 {
		t.Fatal(errs)
	}
	for _, args := range [][]string{{"--from", "epoch:1"}, {"--from", "5", "--to", "epoch:2"}} {
		_, errs, code := run(t, db, "", append([]string{"analyze", "eval-pauses"}, args...)...)
		flag := fmt.Sprintf("%s %q", args[len(args)-2], args[len(args)-1])
		if code == 0 || !strings.Contains(errs, flag) || !strings.Contains(errs, "no epoch marks") || !strings.Contains(errs, "inferred from device memory are not accepted") {
			t.Errorf("%v: exit %d, %q; want an error naming %s", args, code, errs, flag)
		}
	}
}
