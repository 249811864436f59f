package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memrec/memrec/testsupport/fixtures"
	"github.com/memrec/memrec/testsupport/pickletest"
)

// The real H200 snapshots of a job that leaks 256 000 B a step from its
// helper remember() (snapjob.py:10): imported, analysed, listed.
func TestImportSnapshotAndSites(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	trace := filepath.Join("..", "..", "formats", "torchsnap", "testdata", "trace-leak-tail.pickle.gz")
	state := filepath.Join("..", "..", "formats", "torchsnap", "testdata", "state-leak.pickle.gz")
	out, errs, code := run(t, db, "", "import", "--name", "tr", trace)
	if code != 0 || !strings.Contains(out, "imported tr") || !strings.Contains(out, "61 site snapshots") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	// A snapshot mixed with JSON Lines, and --run on a missing run, are refused.
	if _, errs, code = run(t, db, "", "import", trace, realRun); code != 1 || !strings.Contains(errs, "some files are PyTorch snapshots") {
		t.Errorf("mixed import: %d %q", code, errs)
	}
	if _, errs, code = run(t, db, "", "import", "--run", "nope", state); code != 1 || !strings.Contains(errs, "no such run") {
		t.Errorf("--run nope: %d %q", code, errs)
	}
	// The state snapshot added to the imported JSON Lines run, on its GPU 0 (pid 0).
	if _, errs, code = run(t, db, "", "import", realRun); code != 0 {
		t.Fatalf("import: %q", errs)
	}
	// The state snapshot was taken 5 h after that run ended: not of the run.
	if _, errs, code = run(t, db, "", "import", "--run", "real-resnet18-bs128", state); code != 1 ||
		!strings.Contains(errs, "state-leak.pickle.gz was taken 4 h 57 min after the run's end, more than 5 min away: not a snapshot of this run (nothing was imported)") {
		t.Errorf("import --run of a later snapshot: %d %q", code, errs)
	}
	// One taken a minute into the run is added: 30 blocks of 256 000 B.
	var blocks []any
	for i := range 30 {
		blocks = append(blocks, pickletest.Block(int64(i)<<20, 256000, "active_allocated", pickletest.Frame("/w/snapjob.py", 10, "remember")))
	}
	const runStartUS = 1795974055008846737 / 1000
	inside := filepath.Join(t.TempDir(), "inside.pickle")
	os.WriteFile(inside, pickletest.Dumps(pickletest.Snapshot(blocks, []any{pickletest.Entry("alloc", 29<<20, 256000, runStartUS+60e6)})), 0o644)
	if out, errs, code = run(t, db, "", "import", "--run", "real-resnet18-bs128", inside); code != 0 || !strings.Contains(out, "1 site snapshots") {
		t.Fatalf("import --run: %d %q %q", code, out, errs)
	}
	if _, errs, code = run(t, db, "", "import", "--run", "real-resnet18-bs128", inside); code != 1 || !strings.Contains(errs, "already has site snapshots") {
		t.Errorf("second import --run: %d %q", code, errs)
	}

	out, errs, code = run(t, db, "", "sites", "tr")
	if code != 0 {
		t.Fatalf("sites: %d %q", code, errs)
	}
	grow := strings.Index(out, "Growing: live bytes that rise")
	leak := strings.Index(out, "snapjob.py:10  `remember`")
	steady := strings.Index(out, "Biggest steady holders")
	if grow < 0 || leak < grow || steady < leak {
		t.Errorf("sites: the growing site should come first, under its heading:\n%s", out)
	}
	out, _, code = run(t, db, "", "sites", "real-resnet18-bs128", "--at", "61s")
	if code != 0 || !strings.Contains(out, "snapjob.py:10  `remember`  7.3 MiB  30 blocks") {
		t.Errorf("sites --at: %d\n%s", code, out)
	}
	out, _, code = run(t, db, "", "sites", "tr", "--diff", "0s", "1h", "--json")
	var diff []struct {
		Sites []struct {
			Site  string `json:"site"`
			Delta int64  `json:"delta_bytes"`
		} `json:"sites"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &diff) != nil || len(diff) != 1 {
		t.Fatalf("sites --diff --json: %d %q", code, out)
	}
	var remember int64
	for _, s := range diff[0].Sites {
		if s.Site == "snapjob.py:10" {
			remember = s.Delta
		}
	}
	// From the first trace point (8 leaking steps before the tail) to the end (12).
	if remember != 4*256000 {
		t.Errorf("remember grew %d B, want 4 steps of 256 000 B", remember)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"sites", "tr", "--diff", "e1"}, "--diff takes two moments"},
		{[]string{"sites", "tr", "--at", "soon"}, `moment "soon"`},
		{[]string{"sites", "tr", "--epoch", "7"}, "no allocation-site snapshot at the moments asked"},
	} {
		if _, errs, code := run(t, db, "", c.args...); code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: %d %q, want %q", c.args, code, errs, c.want)
		}
	}
}

// TestImportSnapshotFromStdin reads the real H200 snapshots from standard
// input, gzipped and not: recognised by their content as from a file, with
// the same result; data that starts like a snapshot and then breaks is an
// error that names standard input, and the database keeps what it had.
func TestImportSnapshotFromStdin(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	traceGz, err := os.ReadFile(filepath.Join("..", "..", "formats", "torchsnap", "testdata", "trace-leak-tail.pickle.gz"))
	if err != nil {
		t.Fatal(err)
	}
	state := fixtures.Gunzip(t, filepath.Join("..", "..", "formats", "torchsnap", "testdata", "state-leak.pickle.gz"))

	// The same 61 site snapshots as TestImportSnapshotAndSites reads from the file.
	out, errs, code := run(t, db, string(traceGz), "import", "--name", "tr", "-")
	if code != 0 || !strings.Contains(out, "imported tr (id 1) from PyTorch snapshot: 61 site snapshots") {
		t.Fatalf("gzipped on stdin: %d %q %q", code, out, errs)
	}
	out, errs, code = run(t, db, string(state), "import", "-")
	if code != 0 || !strings.Contains(out, "imported snapshot-") || !strings.Contains(out, "1 site snapshots") {
		t.Fatalf("plain on stdin, no --name: %d %q %q", code, out, errs)
	}
	out, _, _ = run(t, db, "", "sites", "tr")
	if !strings.Contains(out, "snapjob.py:10  `remember`") {
		t.Errorf("sites of the run read from stdin:\n%s", out)
	}

	before, _, _ := run(t, db, "", "runs")
	var cutGz bytes.Buffer
	zw := gzip.NewWriter(&cutGz)
	zw.Write(state[:len(state)/2])
	zw.Close()
	for name, in := range map[string][]byte{"cut": state[:len(state)/2], "cut, gzipped": cutGz.Bytes()} {
		_, errs, code := run(t, db, string(in), "import", "--name", "bad", "-")
		if code != 1 || !strings.Contains(errs, "<stdin>") || !strings.Contains(errs, "nothing was imported") {
			t.Errorf("%s: %d %q, want an error naming <stdin>", name, code, errs)
		}
	}
	if after, _, _ := run(t, db, "", "runs"); after != before {
		t.Errorf("a failed import changed the runs:\n%s\nwas\n%s", after, before)
	}
}

// TestSitesRankedByTrendOnARealSnapshot imports a real H200 snapshot
// (history "all", Python stacks; bench/validation/judge_runs.sh) of an MLP with
// Adam whose loop keeps a clone of each step's logits three calls down
// (log_step → keep_for_plot → store, 512 000 B a step for 60 steps; its
// facts in snap-judge-leak.json, written by the job). The first step's
// gradients and Adam state, and workspaces without a Python stack, arrive
// at once and stay: steady holders. The growing sites are ranked by their
// slope; the leak's line comes first, alone, at 512 000 B a step within
// 2 %: its slope per second times the job's median step time (the
// Theil–Sen slope is a median of pairwise rates, which the median step
// matches; the first step, 0.45 s of CUDA start-up, is no step of the
// leak's rate).
func TestSitesRankedByTrendOnARealSnapshot(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	dir := filepath.Join("..", "..", "formats", "torchsnap", "testdata")
	var facts struct {
		StoreLine   int     `json:"store_line"`
		LeakPerStep float64 `json:"leak_bytes_per_step"`
		StepEndUS   []int64 `json:"step_end_us"`
	}
	b, err := os.ReadFile(filepath.Join(dir, "snap-judge-leak.json"))
	if err != nil || json.Unmarshal(b, &facts) != nil || len(facts.StepEndUS) != 60 {
		t.Fatalf("facts: %v", err)
	}
	if _, errs, code := run(t, db, "", "import", "--name", "snap", filepath.Join(dir, "snap-judge-leak.pickle.gz")); code != 0 {
		t.Fatal(errs)
	}
	out, errs, code := run(t, db, "", "analyze", "--json", "snap")
	var rep struct {
		GPUs []struct {
			Where struct {
				Growing []struct {
					Site         string  `json:"site"`
					Func         string  `json:"func"`
					BytesPerHour float64 `json:"bytes_per_hour"`
				} `json:"growing"`
				AtEnd struct {
					UntrackedBytes int64 `json:"untracked_bytes"`
					Top            []struct {
						Site      string `json:"site"`
						LiveBytes int64  `json:"live_bytes"`
					} `json:"top"`
				} `json:"at_end"`
			} `json:"where"`
		} `json:"gpus"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.GPUs) != 1 {
		t.Fatalf("analyze: %d %q", code, errs)
	}
	w := rep.GPUs[0].Where
	leakSite := fmt.Sprintf("judge_jobs.py:%d", facts.StoreLine)
	if len(w.Growing) != 1 || w.Growing[0].Site != leakSite || w.Growing[0].Func != "store" {
		t.Fatalf("growing sites %+v, want %s alone", w.Growing, leakSite)
	}
	var steps []float64
	for i := 1; i < len(facts.StepEndUS); i++ {
		steps = append(steps, float64(facts.StepEndUS[i]-facts.StepEndUS[i-1])/1e6)
	}
	slices.Sort(steps)
	stepS := steps[len(steps)/2] // 59 steps: the middle one
	perStep := w.Growing[0].BytesPerHour / 3600 * stepS
	if e := perStep/facts.LeakPerStep - 1; e > 0.02 || e < -0.02 {
		t.Errorf("%s grows %.0f B a step, truth %.0f (%+.1f %%)", leakSite, perStep, facts.LeakPerStep, 100*e)
	}
	// The one-off holders are there, and larger than the leak: steady.
	var steady int
	for _, s := range w.AtEnd.Top {
		if s.Site != leakSite && s.LiveBytes > 30<<20 {
			steady++
		}
	}
	if steady < 2 || w.AtEnd.UntrackedBytes < 30<<20 {
		t.Errorf("at the end: %+v, untracked %d; want the first step's holders (weights' gradients, Adam state) and the workspaces", w.AtEnd.Top, w.AtEnd.UntrackedBytes)
	}
	text, _, _ := run(t, db, "", "sites", "snap")
	if grow, leak, hold := strings.Index(text, "Growing"), strings.Index(text, leakSite), strings.Index(text, "steady holders"); grow < 0 || leak < grow || hold < leak {
		t.Errorf("sites: the leak's line first, under Growing:\n%s", text)
	}
}
