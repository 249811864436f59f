package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/testsupport/fixtures"
)

var leakRun = fixtures.Path(fixtures.LeakRun)

func TestAnalyzeReportCompareCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun, leakRun); code != 0 {
		t.Fatal(errs)
	}
	out, errs, code := run(t, db, "", "analyze", "real-resnet18-bs64-leak", "--full")
	if code != 0 || !strings.Contains(out, "GPU 0 grows 250.0 KiB per step") || !strings.Contains(out, "cached and free") {
		t.Fatalf("%d %s %s", code, out, errs)
	}
	out, _, _ = run(t, db, "", "analyze", "real-resnet18-bs128", "--json")
	var rep struct {
		Run  string
		GPUs []struct {
			Leak struct {
				Verdict string `json:"verdict"`
			} `json:"leak"`
			PeakUsedBytes *int64 `json:"peak_used_bytes"`
		} `json:"gpus"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.GPUs[0].Leak.Verdict != "no_leak" || rep.GPUs[0].PeakUsedBytes == nil {
		t.Fatalf("%v %s", err, out)
	}

	repDir := filepath.Join(dir, "rep")
	if out, errs, code = run(t, db, "", "report", "real-resnet18-bs64-leak", "-o", repDir, "--width", "600", "--height", "300"); code != 0 {
		t.Fatal(errs)
	}
	if _, err := os.Stat(filepath.Join(repDir, "index.html")); err != nil || !strings.Contains(out, "index.html") {
		t.Fatal(err, out)
	}
	if _, errs, code = run(t, db, "", "report", "nope"); code != 1 || !strings.Contains(errs, "no such run") {
		t.Fatal(errs)
	}
	if _, errs, code = run(t, db, "", "report", "real-resnet18-bs128", "--width", "10"); code != 1 || !strings.Contains(errs, "--width") {
		t.Fatal(errs)
	}

	cmpDir := filepath.Join(dir, "cmp")
	out, errs, code = run(t, db, "", "compare", "real-resnet18-bs64-leak", "real-resnet18-bs128", "-o", cmpDir, "--align", "epoch")
	if code != 0 || !strings.Contains(out, "×1.66") || !strings.Contains(out, "comparison written") {
		t.Fatalf("%s %s", out, errs)
	}
	out, _, code = run(t, db, "", "compare", "--by", "batch_size", "--headroom", "10%", "--json")
	var cj struct {
		Baseline string
		Runs     []struct {
			Run           string   `json:"run"`
			LeakVerdict   string   `json:"leak_verdict"`
			PeakUsedRatio *float64 `json:"peak_used_ratio"`
		} `json:"runs"`
		By              string `json:"by"`
		Fit             *struct{ SlopeBytesPerUnit, InterceptBytes float64 }
		MaxFittingValue *float64 `json:"max_fitting_value"`
	}
	if err := json.Unmarshal([]byte(out), &cj); err != nil || code != 0 || cj.By != "batch_size" || cj.MaxFittingValue == nil || len(cj.Runs) != 2 {
		t.Fatalf("%v %s", err, out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "real-resnet18-bs128"}, "at least two runs"},
		{[]string{"compare", "--by", "model"}, `--by model: run "real-resnet18-bs64-leak" has model="resnet18": not a number`},
		{[]string{"compare", "--by", "batch_size", "--headroom", "lots"}, `--headroom "lots"`},
		{[]string{"compare", "real-resnet18-bs128", "real-resnet18-bs64-leak", "--baseline", "other"}, `--baseline "other"`},
		{[]string{"compare", "real-resnet18-bs128", "real-resnet18-bs64-leak", "--align", "x"}, `--align "x"`},
	} {
		if _, errs, code := run(t, db, "", tc.args...); code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: %d %q", tc.args, code, errs)
		}
	}
}

// TestDemo records long enough for two whole epochs of the simulated job
// (training starts at about 0.6 s; an epoch is 20 steps of 100 ms): with
// the second epoch open, the first is the warm-up and 8 steady points need
// most of the second. A shorter demo passed or failed with the scheduler.
func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out, errs, code := run(t, filepath.Join(dir, "d.db"), "", "demo", "--duration", "5s", "-o", filepath.Join(dir, "demo"), "--width", "500", "--height", "250")
	if code != 0 || !strings.Contains(out, "GPU 1 grows") || !strings.Contains(out, "GPU 0: no leak") || !strings.Contains(out, "index.html") {
		t.Fatalf("%d\n%s\n%s", code, out, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "demo", "overview.png")); err != nil {
		t.Fatal(err)
	}
}

// TestAnalyzeOOMFiguresAtTheMoment checks the text of the fatal OOM of the
// real run that ran out of memory: its figures are said to come from
// samples at most 20 ms from it, with the memory PyTorch does not see.
func TestAnalyzeOOMFiguresAtTheMoment(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	if _, errs, code := run(t, db, "", "import", fixtures.Path(fixtures.H200OOM)); code != 0 {
		t.Fatal(errs)
	}
	out, errs, code := run(t, db, "", "analyze", "r18-oom", "--full")
	want := "at the OOM (samples at most 20 ms from it): used 138.76 GiB, allocated 137.28 GiB, reserved 138.15 GiB, cached and free 0.6%, not seen by PyTorch 630.8 MiB\n"
	if code != 0 || !strings.Contains(out, want) || strings.Contains(out, "  left out: ") {
		t.Fatalf("%d: output lacks %q or leaves something out:\n%s%s", code, want, out, errs)
	}
	// No step completed: the batch is said to be an upper bound (7728 ×
	// (137.28 + 1.04) / (137.28 + 2.89) GiB in bytes: a bound takes no allowance).
	if want := "batch_size at most 7626: an upper bound, not a batch known to fit. No step completed"; !strings.Contains(out, want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
}

// TestAnalyzeProfiles: the hidden --cpuprofile and --memprofile write
// pprof files beside the analysis, whose output they leave as it is; a
// path that cannot be written is an error naming the flag.
//
// Not parallel: Go's CPU profiler is one per process.
func TestAnalyzeProfiles(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	plain, _, _ := run(t, db, "", "analyze", "real-resnet18-bs128", "--json")
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	out, errs, code := run(t, db, "", "analyze", "real-resnet18-bs128", "--json", "--cpuprofile", cpu, "--memprofile", mem)
	if code != 0 || out != plain {
		t.Fatalf("with profiles: exit %d, output differs: %v, %s", code, out != plain, errs)
	}
	for _, p := range []string{cpu, mem} {
		if st, err := os.Stat(p); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", p, err)
		}
	}
	for _, flag := range []string{"--cpuprofile", "--memprofile"} {
		_, errs, code := run(t, db, "", "analyze", "real-resnet18-bs128", flag, filepath.Join(dir, "no", "such", "dir"))
		if code == 0 || !strings.Contains(errs, flag) {
			t.Fatalf("%s into a missing directory: exit %d, %s", flag, code, errs)
		}
	}
}

// TestCommandProfiles: report, compare and export take analyze's hidden
// --cpuprofile: a pprof file, the command's output as without it, and an
// error naming the flag for a path that cannot be written.
//
// Not parallel: Go's CPU profiler is one per process.
func TestCommandProfiles(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	if _, errs, code := run(t, db, "", "import", "--name", "again", realRun); code != 0 {
		t.Fatal(errs)
	}
	for _, args := range [][]string{
		{"export", "real-resnet18-bs128"},
		{"compare", "real-resnet18-bs128", "again", "--json"},
		{"report", "real-resnet18-bs128", "--png-only", "-o", filepath.Join(dir, "rep")},
	} {
		plain, errs, code := run(t, db, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d, %s", args, code, errs)
		}
		cpu := filepath.Join(dir, args[0]+".pprof")
		out, errs, code := run(t, db, "", append(args, "--cpuprofile", cpu)...)
		if code != 0 || out != plain {
			t.Fatalf("%v with --cpuprofile: exit %d, output differs: %v, %s", args, code, out != plain, errs)
		}
		if st, err := os.Stat(cpu); err != nil || st.Size() == 0 {
			t.Fatalf("%v: %s: %v", args, cpu, err)
		}
		_, errs, code = run(t, db, "", append(args, "--cpuprofile", filepath.Join(dir, "no", "such", "dir"))...)
		if code == 0 || !strings.Contains(errs, "--cpuprofile") {
			t.Fatalf("%v --cpuprofile into a missing directory: exit %d, %s", args, code, errs)
		}
	}
}
