package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/fit"
	"github.com/memrec/memrec/storage"
)

// fakeJob is a training job for memrec fit's tests, run by the test binary
// itself (MEMREC_FAKE_JOB=1): at --value V its step peak is 1 GiB + V GiB
// (rank r's × (1 + r/4): rank 1 is the fullest), and it runs out of memory
// at its first step where that rank's V × (1 + r/4) is above --limit. It
// speaks the probe's socket protocol: a torch line and a step mark per
// step, an oom mark before it exits 3 as PyTorch's scripts do. --ranks N
// makes it a launcher that starts N ranks, ends the others when one
// fails and then exits 1, as torchrun does (its ranks meet in --pid-dir).
func fakeJob(args []string) int {
	fs := flag.NewFlagSet("fakejob", flag.ContinueOnError)
	value := fs.Float64("value", 0, "")
	limit := fs.Float64("limit", 1e9, "")
	failAbove := fs.Float64("fail-above", 1e9, "exit 1 without an OOM above this value")
	steps := fs.Int("steps", 1<<30, "")
	stepMS := fs.Int("step-ms", 5, "")
	ranks := fs.Int("ranks", 0, "")
	rank := fs.Int("rank", -1, "")
	pidDir := fs.String("pid-dir", "", "")
	riseAfter := fs.Int("rise-after", -1, "")
	rise := fs.Float64("rise", 0, "")
	leak := fs.Int64("leak", 0, "bytes kept a step")
	ignoreTerm := fs.Bool("ignore-term", false, "")
	barrier := fs.String("barrier", "", "the ranks' rendezvous: each waits here until all are up")
	world := fs.Int("world", 1, "")
	markPID := fs.Bool("mark-pid", true, "step marks name the process (an older probe's did not)")
	stranded := fs.Float64("stranded", -1, "at an OOM, the allocator sample the probe sends: reserved beyond allocated by this share of allocated plus the 2 GiB asked for")
	cached := fs.Float64("cached", -1, "the allocator reserves this share beyond the step peak and never retries; its largest segment is that share of the peak (the probe of a recent PyTorch sends both)")
	retried := fs.Bool("retried", false, "with --cached: the allocator freed its cache and retried once")
	flakyAbove := fs.Float64("flaky-above", 1e9, "above this value the job runs the first time it starts at a value and runs out of memory every time after, as processes sharing a GPU may (--pid-dir keeps the values started)")
	if fs.Parse(args) != nil {
		return 2
	}
	if *value > *flakyAbove && *rank < 0 && *pidDir != "" {
		// The launcher, or a lone process, decides once a start.
		if os.Mkdir(filepath.Join(*pidDir, "started-"+strconv.FormatFloat(*value, 'f', -1, 64)), 0o700) != nil {
			*limit = 0
		}
	}
	if *pidDir != "" {
		os.WriteFile(filepath.Join(*pidDir, strconv.Itoa(os.Getpid())), nil, 0o600)
	}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if *ranks > 0 {
		dir := filepath.Join(*pidDir, "barrier-"+strconv.Itoa(os.Getpid()))
		if *pidDir == "" || os.Mkdir(dir, 0o700) != nil {
			return 1
		}
		var cmds []*exec.Cmd
		for r := 0; r < *ranks; r++ {
			c := exec.Command(os.Args[0], append(args, "--ranks=0", "--rank="+strconv.Itoa(r), "--barrier="+dir, "--world="+strconv.Itoa(*ranks),
				"--limit="+strconv.FormatFloat(*limit, 'f', -1, 64))...)
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			if c.Start() != nil {
				return 1
			}
			cmds = append(cmds, c)
		}
		// As torchrun: when a rank fails, the others are ended.
		failed := make(chan bool, len(cmds))
		for _, c := range cmds {
			go func() { failed <- c.Wait() != nil }()
		}
		code := 0
		for range cmds {
			if <-failed && code == 0 {
				code = 1
				for _, c := range cmds {
					c.Process.Signal(syscall.SIGTERM)
				}
			}
		}
		return code
	}
	conn, err := net.Dial("unix", os.Getenv("MEMREC_SOCKET"))
	if err != nil {
		return 4
	}
	defer conn.Close()
	r := max(*rank, 0)
	scale := 1 + float64(r)/4
	peak := float64(1<<30) + *value*float64(1<<30)*scale
	// A process started on its own knows no rank, as the probe sends it:
	// its lines carry only the pid.
	rankField := ""
	if *rank >= 0 {
		rankField = `,"rank":` + strconv.Itoa(*rank)
	}
	send := func(format string, a ...any) { fmt.Fprintf(conn, format+"\n", a...) }
	// CUDA is up: the probe's first sample; then the rendezvous, which a
	// DDP job passes before its first step.
	send(`{"type":"torch","t_ns":%d,"gpu":0,"pid":%d%s,"allocated_bytes":0,"reserved_bytes":0}`, time.Now().UnixNano(), os.Getpid(), rankField)
	if *barrier != "" {
		os.WriteFile(filepath.Join(*barrier, strconv.Itoa(r)), nil, 0o600)
		for {
			ents, _ := os.ReadDir(*barrier)
			if len(ents) >= *world {
				break
			}
			time.Sleep(time.Millisecond)
		}
	}
	for i := 0; i < *steps; i++ {
		time.Sleep(time.Duration(*stepMS) * time.Millisecond)
		now := time.Now().UnixNano()
		if *value*scale > *limit {
			if *stranded >= 0 {
				asked := int64(peak)
				alloc := asked - 2<<30
				send(`{"type":"torch","t_ns":%d,"gpu":0,"pid":%d%s,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d}`,
					now, os.Getpid(), rankField, alloc, alloc+int64(*stranded*float64(asked)), alloc)
			}
			send(`{"type":"mark","t_ns":%d,"kind":"oom","gpu":0,"pid":%d%s,"text":"CUDA out of memory. Tried to allocate 2.00 GiB"}`, now, os.Getpid(), rankField)
			time.Sleep(50 * time.Millisecond)
			return 3
		}
		if *value > *failAbove {
			return 1
		}
		p := peak
		if *riseAfter >= 0 && i >= *riseAfter {
			p *= 1 + *rise
		}
		p += float64(int64(i) * *leak) // what leaks is held at the step's peak too
		alloc := int64(peak/4) + int64(i)**leak
		if *cached >= 0 {
			retries := 0
			if *retried {
				retries = 1
			}
			send(`{"type":"torch","t_ns":%d,"gpu":0,"pid":%d%s,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d,"alloc_retries":%d,"largest_segment_bytes":%d}`,
				now, os.Getpid(), rankField, alloc, int64(p*(1+*cached)), int64(p), retries, int64(p**cached))
		} else {
			send(`{"type":"torch","t_ns":%d,"gpu":0,"pid":%d%s,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d}`,
				now, os.Getpid(), rankField, alloc, int64(p*1.1), int64(p))
		}
		if *markPID {
			send(`{"type":"mark","t_ns":%d,"kind":"step","step":%d,"gpu":0,"pid":%d%s}`, now, i, os.Getpid(), rankField)
		} else {
			send(`{"type":"mark","t_ns":%d,"kind":"step","step":%d,"gpu":0%s}`, now, i, rankField)
		}
	}
	time.Sleep(50 * time.Millisecond)
	return 0
}

// fakeCommand is memrec fit's command line for the fake job.
func fakeCommand(t *testing.T, args ...string) []string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"--", "env", "MEMREC_FAKE_JOB=1", exe}, args...)
}

// fitJSON runs memrec fit with --json and returns its result, stderr and
// exit code.
func fitJSON(t *testing.T, db string, args ...string) (fit.Result, string, int) {
	t.Helper()
	out, errs, code := run(t, db, "", append([]string{"fit", "--json", "--source", "sim", "--grace", "2s"}, args...)...)
	var r fit.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("fit --json: %v\n%s\n%s", err, out, errs)
	}
	return r, errs, code
}

func f64v(p *float64) float64 {
	if p == nil {
		return math.NaN()
	}
	return *p
}

// checkTrials checks what every search must hold: no value tried twice,
// each trial's run in the database with its value and the fit's id, the
// largest that ran and the smallest that failed as the trials say.
func checkTrials(t *testing.T, db string, r fit.Result) {
	t.Helper()
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	tries := map[float64]int{}
	hi := math.Inf(1)
	for _, tr := range r.Trials {
		if tries[tr.Value]++; tries[tr.Value] > 1 && tr.Repeat != tries[tr.Value] {
			t.Errorf("value %v tried again, not as its run %d (repeat %d)", tr.Value, tries[tr.Value], tr.Repeat)
		}
		run, err := d.Run(tr.Run)
		if err != nil || run.Tags["batch_size"] != num(tr.Value) || run.Tags["fit"] != r.ID {
			t.Errorf("trial %d: run %q %v tags %v", tr.N, tr.Run, err, run.Tags)
		}
		if tr.Outcome == fit.OOM {
			hi = min(hi, tr.Value)
		}
	}
	lo := math.Inf(-1) // the largest that ran below every failure
	for _, tr := range r.Trials {
		if tr.Outcome.Ran() && tr.Value < hi {
			lo = max(lo, tr.Value)
		}
	}
	if r.TrialsUsed != len(r.Trials) || (r.LargestRan != nil && *r.LargestRan != lo) || (r.SmallestFailed != nil && *r.SmallestFailed != hi) {
		t.Errorf("result %v..%v in %d trials; the trials say %v..%v in %d", f64v(r.LargestRan), f64v(r.SmallestFailed), r.TrialsUsed, lo, hi, len(r.Trials))
	}
}

// The limit found by bisection is the fake job's exactly: 123 runs and
// 124 runs out of memory. Each trial that ran was stopped by memrec after
// its 5 steps (the job would step for ever); the failed ones ran out of
// memory at their first step.
func TestFitBisectsToTheLimit(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	r, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--multiple", "1", "--id", "f1"}, fakeCommand(t, "--value", "{}", "--limit", "123")...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkTrials(t, db, r)
	if f64v(r.LargestRan) != 123 || f64v(r.SmallestFailed) != 124 {
		t.Fatalf("limit %v..%v, want 123..124:\n%s", f64v(r.LargestRan), f64v(r.SmallestFailed), errs)
	}
	for _, tr := range r.Trials {
		switch {
		// The job steps every 5 ms for ever: the marks it sent while
		// SIGTERM was on its way count too (a few on a loaded machine);
		// 50 would be a quarter of a second late.
		case tr.Value <= 123 && (tr.Outcome != fit.Stopped || tr.Steps < 5 || tr.Steps >= 50 || tr.ExitCode != 128+int(syscall.SIGTERM)):
			t.Errorf("trial %+v: want stopped after 5 steps by SIGTERM", tr)
		case tr.Value > 123 && (tr.Outcome != fit.OOM || tr.OOMMarks != 1 || tr.Steps != 0 || tr.ExitCode != 3):
			t.Errorf("trial %+v: want out of memory", tr)
		}
	}
	// The step peak is the job's: 1 GiB + value GiB.
	for _, tr := range r.Trials {
		if tr.Outcome.Ran() && (tr.StepPeakBytes == nil || *tr.StepPeakBytes != int64(1<<30)+int64(tr.Value)*(1<<30)) {
			t.Errorf("trial %d at %v: step peak %v", tr.N, tr.Value, tr.StepPeakBytes)
		}
	}
	// Trials: 4 and 16 to predict; the prediction from them on the
	// simulated H200 (140.40 GiB / 1.40, the default allowance without a
	// largest segment, less 1 GiB, over 1 GiB a unit: 99), which runs; the
	// optimistic end (138), which fails; bisection of that 39-wide bracket
	// to 1, at most 6: 10 at most.
	if r.TrialsUsed > 10 {
		t.Errorf("%d trials:\n%s", r.TrialsUsed, errs)
	}
	if r.Prediction == nil || r.Prediction.From != "trials" || !strings.Contains(r.Prediction.Words, "projected from 16 to") {
		t.Errorf("prediction %+v", r.Prediction)
	}
	if r.Recommended == nil || *r.Recommended > 123 || *r.Recommended < 100 {
		t.Errorf("recommended %v", f64v(r.Recommended))
	}
}

// TestFitGuessesFromTheOOM: where a trial's OOM comes with the
// allocator's state (the probe sends a sample with the OOM mark), fit puts
// the limit where the need curve meets the GPU with what the allocator
// held unallocated at that OOM, tries it and one step above it, and finds
// the same limit as by bisection in fewer trials.
func TestFitGuessesFromTheOOM(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	args := []string{"--min", "4", "--multiple", "1", "--id", "g1"}
	plain, errs, code := fitJSON(t, db, append(args, fakeCommand(t, "--value", "{}", "--limit", "123")...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	args[len(args)-1] = "g2"
	// The fake's own reading at its limit: where 1 GiB + v GiB, with the
	// share the test gives it beyond, meets the simulated GPU. The share
	// is the one that puts the limit the fake fails above where the need
	// curve meets the GPU, as on a real GPU: found from the plain search's
	// prediction (its optimistic end is the curve without allowance, a
	// whole value: the GPU's memory is its need half a unit above it, to
	// within half a unit, so the curve meets it between 123 and 124).
	if plain.Prediction == nil || plain.Prediction.Optimistic == nil {
		t.Fatalf("no prediction: %+v", plain.Prediction)
	}
	share := (1+*plain.Prediction.Optimistic+0.5)/(1+123.5) - 1
	r, errs, code := fitJSON(t, db, append(args, fakeCommand(t, "--value", "{}", "--limit", "123", "--stranded", strconv.FormatFloat(share, 'f', 6, 64))...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkTrials(t, db, r)
	if f64v(r.LargestRan) != 123 || f64v(r.SmallestFailed) != 124 {
		t.Fatalf("limit %v..%v, want 123..124:\n%s", f64v(r.LargestRan), f64v(r.SmallestFailed), errs)
	}
	if !strings.Contains(errs, "beyond what was allocated and asked for") {
		t.Errorf("no guess from the OOM:\n%s", errs)
	}
	if r.TrialsUsed >= plain.TrialsUsed {
		t.Errorf("%d trials with the OOM's figures, %d without", r.TrialsUsed, plain.TrialsUsed)
	}
	t.Logf("%d trials with the OOM's figures, %d without", r.TrialsUsed, plain.TrialsUsed)
}

// availableTo is compare --by's memory for the job on the GPU of fit
// id's trials (ByTag.Available without headroom).
func availableTo(t *testing.T, db, id string) float64 {
	t.Helper()
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	runs, err := d.Runs()
	if err != nil {
		t.Fatal(err)
	}
	runs = slices.DeleteFunc(runs, func(r storage.Run) bool { return r.Tags["fit"] != id })
	reps, err := analyzeAll(d, runs, storage.NewDecodeBudget(storage.DefaultDecodeBudget))
	if err != nil {
		t.Fatal(err)
	}
	c, err := compare.Compare(reps, "", "")
	if err != nil || compare.FitByTag(c, "batch_size", 0) != nil || c.By == nil {
		t.Fatalf("compare of %d trials: %v", len(reps), err)
	}
	return c.By.Available(0)
}

// TestFitFromWhatTheAllocatorReserved: a job whose allocator never freed
// its cache reserved at least what its step needed at once; from a trial
// that ran near the limit, fit puts the next one where that reserved
// memory, grown by the cost of a unit, fills the GPU, then one step above
// to close the bracket. The fake's need is its reserved memory, (1 GiB +
// v GiB) × (1 + share), its limit where that fills the GPU. Where its
// allocator retried, its reserved memory says nothing of the need, and
// fit does not use it.
func TestFitFromWhatTheAllocatorReserved(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	const limit = 123
	// The GPU's memory, from two trials that ran.
	if _, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--max", "16", "--multiple", "1", "--id", "r1"}, fakeCommand(t, "--value", "{}")...)...); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	avail := availableTo(t, db, "r1")
	// At the limit the fake's reserved memory leaves margin free: under
	// half a unit (1.12 GiB), so one above should not fit, and more than
	// the 512 MiB by which a later fit may read the GPU's available memory
	// differently (the simulated CUDA context, counted in the memory
	// PyTorch does not see or not, as short trials on a loaded machine
	// pair their samples), so the trial from 109 still reaches the limit.
	const margin = 0.55 * (1 << 30)
	share := (avail-margin)/((1+limit)*(1<<30)) - 1
	cmd := fakeCommand(t, "--value", "{}", "--limit", strconv.Itoa(limit), "--cached", strconv.FormatFloat(share, 'f', 6, 64))
	r, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--multiple", "1", "--id", "r2"}, cmd...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkTrials(t, db, r)
	if f64v(r.LargestRan) != limit || f64v(r.SmallestFailed) != limit+1 {
		t.Fatalf("limit %v..%v, want %d..%d:\n%s", f64v(r.LargestRan), f64v(r.SmallestFailed), limit, limit+1, errs)
	}
	if !strings.Contains(errs, "never freed its cache") || !strings.Contains(errs, "should not fit") {
		t.Errorf("no step from the reserved memory:\n%s", errs)
	}
	// 4 and 16 to predict, the prediction (a few below the limit: its
	// pessimistic end adds two largest segments, where the fake's
	// reserved memory holds one), the limit (where that reserved memory
	// puts it), one above.
	if r.TrialsUsed > 5 {
		t.Errorf("%d trials:\n%s", r.TrialsUsed, errs)
	}
	for _, tr := range r.Trials {
		if tr.Outcome.Ran() && (tr.ReservedBytes == nil || tr.AllocRetries == nil || *tr.AllocRetries != 0) {
			t.Errorf("trial %d: reserved %v, retries %v", tr.N, tr.ReservedBytes, tr.AllocRetries)
		}
	}
	// A job whose allocator reserves far more than its step needs (30 %
	// beyond the peak, more than the GPU near the limit): the reserved
	// memory says each next value should not fit, and it does; after two
	// such trials the bracket's own steps take over and find the limit.
	loose := fakeCommand(t, "--value", "{}", "--limit", strconv.Itoa(limit), "--cached", "0.3")
	r, errs, code = fitJSON(t, db, append([]string{"--min", "4", "--multiple", "1", "--id", "r4"}, loose...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkTrials(t, db, r)
	// After the prediction the reserved memory puts the limit above it
	// while more than a unit is left, then steps one unit at a time,
	// fit.MaxClosing times "should not fit", each of which ran; then the
	// bracket's own step jumps.
	p := *r.Prediction.Value
	seq := []float64{p}
	for i, tr := range r.Trials {
		if i > 0 && (r.Trials[i-1].Value == p || len(seq) > 1) {
			seq = append(seq, tr.Value)
		}
	}
	first, ones := -1, 0 // the first run of one-unit steps
	for i := 1; i < len(seq); i++ {
		if seq[i] == seq[i-1]+1 {
			if first < 0 {
				first = i
			}
			ones++
		} else if first >= 0 {
			break
		}
	}
	if f64v(r.LargestRan) != limit || f64v(r.SmallestFailed) != limit+1 || ones != fit.MaxClosing || first+ones >= len(seq) ||
		strings.Count(errs, "should not fit") < fit.MaxClosing {
		t.Errorf("reserved beyond the need: limit %v..%v, after the prediction %v tried %v:\n%s", f64v(r.LargestRan), f64v(r.SmallestFailed), p, seq[1:], errs)
	}
	r, errs, code = fitJSON(t, db, append([]string{"--min", "4", "--multiple", "1", "--id", "r3"}, append(cmd, "--retried")...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkTrials(t, db, r)
	if f64v(r.LargestRan) != limit || f64v(r.SmallestFailed) != limit+1 || strings.Contains(errs, "never freed its cache") {
		t.Errorf("retried: limit %v..%v:\n%s", f64v(r.LargestRan), f64v(r.SmallestFailed), errs)
	}
}

// TestFitStopsWhereTheGPUIsFull: a job that packs tightly runs until its
// step peak fills the GPU (the fake's 1 GiB + v GiB, on the simulated H200
// with a little over 139 GiB to give: 138 runs, 139 does not). Once a
// value near the limit has run, its measured step peak and the cost of a
// unit put the next trial where the GPU is full, instead of a step of the
// prediction's width beyond it and a bisection back: 4 and 16 to predict,
// the two ends of the prediction (123 and 138), then 139.
func TestFitStopsWhereTheGPUIsFull(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	r, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--multiple", "1"}, fakeCommand(t, "--value", "{}", "--limit", "138")...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkTrials(t, db, r)
	if f64v(r.LargestRan) != 138 || f64v(r.SmallestFailed) != 139 {
		t.Fatalf("limit %v..%v, want 138..139:\n%s", f64v(r.LargestRan), f64v(r.SmallestFailed), errs)
	}
	if r.TrialsUsed > 5 {
		t.Errorf("%d trials, want 5:\n%s", r.TrialsUsed, errs)
	}
}

// A process started on its own sends no rank (its lines carry only its
// pid), and an older probe's step marks did not carry the pid either:
// either way its steps are the process's, and each trial that ran is
// stopped after its 5 steps.
func TestFitStepsOfAProcessWithoutRank(t *testing.T) {
	t.Parallel()
	for _, markPID := range []string{"true", "false"} {
		db := filepath.Join(t.TempDir(), "m.db")
		r, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--multiple", "1"},
			fakeCommand(t, "--value", "{}", "--limit", "20", "--mark-pid="+markPID)...)...)
		if code != 0 || f64v(r.LargestRan) != 20 {
			t.Fatalf("--mark-pid=%s: exit %d, largest that ran %v: %s", markPID, code, f64v(r.LargestRan), errs)
		}
		for _, tr := range r.Trials {
			if tr.Value <= 20 && (tr.Outcome != fit.Stopped || tr.Ranks != 1 || tr.Steps < 5) {
				t.Errorf("--mark-pid=%s: trial %+v: want one rank, stopped after 5 steps", markPID, tr)
			}
		}
	}
}

// alive reports whether process pid is running (not gone, not a zombie).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}

// pids lists the processes that wrote their pid into dir.
func pids(t *testing.T, dir string) []int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, e := range ents {
		if n, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Under a launcher that starts two ranks, the limit is the fullest
// rank's: rank 1 needs 1.25 times rank 0's, so it runs out of memory above
// 123 / 1.25 = 98.4, while rank 0 alone would run up to 123. A trial has
// done its steps when both ranks have; it is then ended as a group, and
// no process of any trial is left when fit returns. The ranks step every
// 25 ms: a rank is known from its first line on the socket, and a loaded
// machine can leave one connection unread for a few steps of 5 ms (a real
// rank's first allocator sample comes with CUDA's start, seconds before
// its fifth step).
func TestFitLauncherFullestRank(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	r, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--multiple", "1"},
		fakeCommand(t, "--value", "{}", "--limit", "123", "--ranks", "2", "--pid-dir", dir, "--step-ms", "25")...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkTrials(t, db, r)
	if f64v(r.LargestRan) != 98 || f64v(r.SmallestFailed) != 99 {
		t.Fatalf("limit %v..%v, want 98..99 (rank 1's):\n%s", f64v(r.LargestRan), f64v(r.SmallestFailed), errs)
	}
	for _, tr := range r.Trials {
		if tr.Outcome == fit.Stopped && (tr.Ranks != 2 || tr.Steps < 5) {
			t.Errorf("trial %+v: want both ranks' 5 steps", tr)
		}
		// The launcher exits 1 when a rank ran out of memory, as torchrun
		// does: the rank's OOM mark tells it from another failure.
		if tr.Outcome == fit.OOM && (tr.ExitCode != 1 || tr.OOMMarks < 1) {
			t.Errorf("trial %+v: want the launcher's exit 1 with an OOM mark", tr)
		}
	}
	// Both ranks report GPU 0: fit says their allocators share it.
	if !strings.Contains(r.Note, "2 processes share GPU 0") {
		t.Errorf("note %q: want the GPU the two ranks share named", r.Note)
	}
	ps := pids(t, dir)
	if len(ps) < 3*len(r.Trials) {
		t.Fatalf("%d processes for %d trials: want a launcher and two ranks each", len(ps), len(r.Trials))
	}
	for _, p := range ps {
		if alive(p) {
			t.Errorf("process %d of a trial is still running", p)
		}
	}
}

// Where two ranks share a GPU, the largest value that ran is run again,
// each time in fresh processes, until it has run fit.SharedRuns times: a value
// that runs once and fails the next time is a failure, and the search goes
// on below it. The fake job runs each value above 90 once only.
func TestFitRepeatsTheLimitOnASharedGPU(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	r, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--multiple", "1"},
		fakeCommand(t, "--value", "{}", "--limit", "123", "--ranks", "2", "--pid-dir", dir, "--step-ms", "25", "--flaky-above", "90")...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	checkTrials(t, db, r)
	if f64v(r.LargestRan) != 90 || f64v(r.SmallestFailed) != 91 {
		t.Fatalf("limit %v..%v, want 90..91 (the largest that runs every time):\n%s", f64v(r.LargestRan), f64v(r.SmallestFailed), errs)
	}
	if n := countRan(r, 90); n != fit.SharedRuns {
		t.Errorf("90 ran %d times, want %d:\n%s", n, fit.SharedRuns, errs)
	}
	flaky := 0
	for _, tr := range r.Trials {
		if tr.Value > 90 && tr.Outcome.Ran() {
			flaky++
			if countRan(r, tr.Value) != 1 {
				t.Errorf("%v ran %d times: the fake job runs it once", tr.Value, countRan(r, tr.Value))
			}
		}
	}
	if flaky == 0 || !strings.Contains(r.Note, "90 ran 3 of 3 times") || !strings.Contains(r.Note, "ran, then failed: ") {
		t.Errorf("%d values above 90 ran once; note %q: want them named, and 90's 3 runs", flaky, r.Note)
	}
	if !strings.Contains(errs, "run 2 of the value") {
		t.Errorf("the repeats are not shown as such:\n%s", errs)
	}
}

// Where no value runs every time, down to --min, fit says so and fails;
// the trials are kept.
func TestFitNothingRunsEveryTime(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	r, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--max", "8", "--multiple", "1"},
		fakeCommand(t, "--value", "{}", "--limit", "123", "--ranks", "2", "--pid-dir", dir, "--step-ms", "25", "--flaky-above", "0")...)...)
	if code == 0 || !strings.Contains(errs, "no batch_size ran every time it was tried, down to 4 (--min)") || !strings.Contains(errs, "trials so far are kept") {
		t.Fatalf("exit %d: want an error that names --min:\n%s", code, errs)
	}
	if r.LargestRan != nil || countRan(r, 4) != 1 || len(r.Trials) < 2 {
		t.Errorf("largest that ran %v, 4 ran %d times in %d trials: want none, once", f64v(r.LargestRan), countRan(r, 4), len(r.Trials))
	}
	checkTrials(t, db, r)
}

// countRan counts the trials at v that ran.
func countRan(r fit.Result, v float64) int {
	n := 0
	for _, tr := range r.Trials {
		if tr.Value == v && tr.Outcome.Ran() {
			n++
		}
	}
	return n
}

// A job that ignores SIGTERM is killed with its group after --grace; the
// trial still counts as run (its steps were done).
func TestFitKillsAStubbornTrial(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	r, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--max", "4", "--grace", "200ms"},
		fakeCommand(t, "--value", "{}", "--ignore-term", "--pid-dir", dir)...)...)
	if code != 0 || len(r.Trials) != 1 {
		t.Fatalf("exit %d, %d trials: %s", code, len(r.Trials), errs)
	}
	if tr := r.Trials[0]; tr.Outcome != fit.Stopped || tr.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("trial %+v: want stopped by SIGKILL", tr)
	}
	if f64v(r.LargestRan) != 4 || r.SmallestFailed != nil || !strings.Contains(r.Note, "(--max) ran") {
		t.Errorf("result %+v", r)
	}
	for _, p := range pids(t, dir) {
		if alive(p) {
			t.Errorf("process %d still running", p)
		}
	}
}

// Bad input: a command without {}, a --min that does not fit, a command
// that fails for another reason. Each is an error that says so, exits 1
// and keeps the trials run so far.
func TestFitBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	_, errs, code := run(t, db, "", append([]string{"fit", "--source", "sim"}, fakeCommand(t, "--value", "16")...)...)
	if code != 1 || !strings.Contains(errs, "has no {}: put {} where the value goes") {
		t.Fatalf("no {}: %d %s", code, errs)
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a database was made for a command that cannot run")
	}
	// Runs given to --runs with spaces: the second looks like a stray argument.
	if _, errs, code := run(t, db, "", "fit", "--runs", "bs16", "bs32", "--", "python3", "train.py", "{}"); code != 1 ||
		!strings.Contains(errs, `unexpected argument "bs32": give --runs its runs with commas (--runs bs16,bs32)`) {
		t.Fatalf("--runs with spaces: %d %s", code, errs)
	}

	r, errs, code := fitJSON(t, db, append([]string{"--min", "200", "--id", "big"}, fakeCommand(t, "--value", "{}", "--limit", "123")...)...)
	if code != 1 || !strings.Contains(errs, "batch_size=200 does not fit (--min)") || len(r.Trials) != 1 || r.Trials[0].Outcome != fit.OOM {
		t.Fatalf("--min too large: %d %+v %s", code, r.Trials, errs)
	}
	checkTrials(t, db, r)

	// Above 50 the job exits 1 without an OOM mark (a bug, a missing
	// file): the search stops there, the trials kept.
	r, errs, code = fitJSON(t, db, append([]string{"--min", "4", "--id", "bug"}, fakeCommand(t, "--value", "{}", "--fail-above", "50")...)...)
	last := r.Trials[len(r.Trials)-1]
	if code != 1 || last.Outcome != fit.Failed || last.Value <= 50 || last.ExitCode != 1 || last.OOMMarks != 0 ||
		!strings.Contains(errs, fmt.Sprintf("trial %d (batch_size=%s) failed without running out of memory: exit status 1", last.N, num(last.Value))) ||
		!strings.Contains(errs, "trials so far are kept as runs") {
		t.Fatalf("other failure: %d %+v\n%s", code, r.Trials, errs)
	}
	checkTrials(t, db, r)
	// That failed trial is no run to predict from: it never stepped.
	_, errs, code = fitJSON(t, db, append([]string{"--id", "bug2", "--runs", r.Trials[0].Run + "," + last.Run}, fakeCommand(t, "--value", "{}")...)...)
	if want := fmt.Sprintf("--runs: run %q exited 1 before its first step without running out of memory", last.Run); code != 1 || !strings.Contains(errs, want) {
		t.Fatalf("a crashed run in --runs: %d, want %q:\n%s", code, want, errs)
	}
}

// Ctrl-C ends the running trial (its process group), keeps its run and
// the earlier ones, and exits 130.
func TestFitInterrupted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for len(pids(t, dir)) == 0 {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	var out, errb bytes.Buffer
	args := append([]string{"--db", db, "fit", "--json", "--source", "sim", "--id", "int", "--steps", "1000000"}, fakeCommand(t, "--value", "{}", "--pid-dir", dir)...)
	code := execute(ctx, args, streams{In: strings.NewReader(""), Out: &out, Err: &errb})
	var r fit.Result
	if err := json.Unmarshal(out.Bytes(), &r); err != nil || code != 130 || len(r.Trials) != 1 || r.Trials[0].Outcome != fit.Interrupted ||
		!strings.Contains(errb.String(), "fit interrupted; the 1 trials so far are kept") {
		t.Fatalf("%v exit %d %+v\n%s", err, code, r.Trials, errb.String())
	}
	checkTrials(t, db, r)
	for _, p := range pids(t, dir) {
		if alive(p) {
			t.Errorf("process %d still running", p)
		}
	}
}

// With a full recording among --runs, the recommended value leaves room
// for what that run needed after its first steps: the rise of its step
// peak beyond its growth (20 % after step 150, an evaluation pass), as a
// share that scales with the value, and its leak over the run's 300 steps
// in bytes whatever the value; a leak that would take more than
// analysis.GrowthAllowanceMax of the room gets that much, and says so,
// instead of a recommendation shrunk by the leak's share of a small run.
func TestFitWholeRunMargin(t *testing.T) {
	t.Parallel()
	const steps, first = 300, 5
	for _, tc := range []struct {
		name    string
		rise    float64
		leak    int64
		bounded bool
	}{
		{"rise and a small leak", 0.2, 1 << 20, false},
		{"a leak larger than the room", 0, 300 << 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := filepath.Join(t.TempDir(), "m.db")
			_, errs, code := run(t, db, "", append([]string{"record", "--source", "sim", "--sim-gpus", "1", "--name", "full", "--tag", "batch_size=16"},
				fakeCommand(t, "--value", "16", "--steps", fmt.Sprint(steps), "--step-ms", "2", "--rise-after", "150", "--rise", fmt.Sprint(tc.rise), "--leak", fmt.Sprint(tc.leak))...)...)
			if code != 0 {
				t.Fatalf("record: %d %s", code, errs)
			}
			r, errs, code := fitJSON(t, db, append([]string{"--min", "4", "--multiple", "1", "--runs", "full"}, fakeCommand(t, "--value", "{}", "--limit", "123")...)...)
			if code != 0 || f64v(r.LargestRan) != 123 || f64v(r.SmallestFailed) != 124 {
				t.Fatalf("exit %d, limit %v..%v: %s", code, f64v(r.LargestRan), f64v(r.SmallestFailed), errs)
			}
			// The fake's step peak is (1 + value) GiB, × (1 + rise) from
			// step 150, + the leak so far.
			w := r.WholeRun
			peak := float64(17 << 30)
			if w == nil || w.Run != "full" || w.Steps != steps || w.FirstPeakBytes != int64(peak)+(first-1)*tc.leak {
				t.Fatalf("whole run %+v", w)
			}
			if w.Growth != "leak" || w.GrowthPerStep == nil || math.Abs(*w.GrowthPerStep-float64(tc.leak)) > 0.05*float64(tc.leak) {
				t.Fatalf("growth %s %v, want a leak of %d a step", w.Growth, w.GrowthPerStep, tc.leak)
			}
			// The rise beyond the leak: the fake's rise and its leak from
			// the first steps' peak to the last step's, less the leak's
			// allowance (its slope × the steps).
			rise := max(0, tc.rise*peak+float64((steps-first)*tc.leak)-w.GrowthBytes)
			if math.Abs(w.Fraction*float64(w.FirstPeakBytes)-rise) > 1 {
				t.Errorf("fraction %v, want %v of %v", w.Fraction, rise, w.FirstPeakBytes)
			}
			// The largest v whose step peak, (1 + v) GiB, × (1 + the rise)
			// fits under 123's (124 GiB) less 5 % of the simulated GPU's
			// total, less the leak over the run (at most half of that room).
			total := 150754820096.0
			room := 124*(1<<30) - 0.05*total
			allow := math.Min(w.GrowthBytes, 0.5*room)
			if w.Bounded != tc.bounded || w.AllowanceBytes != allow {
				t.Errorf("allowance %v (bounded %v), want %v (bounded %v)", w.AllowanceBytes, w.Bounded, allow, tc.bounded)
			}
			want := 0.0
			for (2+want)*(1<<30)*(1+w.Fraction) <= room-allow {
				want++
			}
			if f64v(r.Recommended) != want {
				t.Errorf("recommended %v, want %v", f64v(r.Recommended), want)
			}
			var text bytes.Buffer
			printResult(&text, r)
			if tc.bounded != strings.Contains(text.String(), "allowance is bounded at 50 % of the room") {
				t.Errorf("bounded %v, but the result says:\n%s", tc.bounded, text.String())
			}
		})
	}
}
