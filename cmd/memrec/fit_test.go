package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memrec/memrec/storage"
)

// fakeJob is a training job for memrec fit's tests, run by the test binary
// itself (MEMREC_FAKE_JOB=1): at --value V its step peak is 1 GiB + V GiB
// (rank r's × (1 + r/4): rank 1 is the fullest), and it runs out of memory
// at its first step where that rank's V × (1 + r/4) is above --limit. It
// speaks the probe's socket protocol: a torch line and a step mark per
// step, an oom mark before it exits 3 as PyTorch's scripts do. --ranks N
// makes it a launcher that starts N ranks and exits 1 if one failed, as
// torchrun does.
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
	if fs.Parse(args) != nil {
		return 2
	}
	if *pidDir != "" {
		os.WriteFile(filepath.Join(*pidDir, strconv.Itoa(os.Getpid())), nil, 0o600)
	}
	if *ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if *ranks > 0 {
		var cmds []*exec.Cmd
		for r := 0; r < *ranks; r++ {
			c := exec.Command(os.Args[0], append(args, "--ranks=0", "--rank="+strconv.Itoa(r))...)
			c.Stdout, c.Stderr = os.Stdout, os.Stderr
			if c.Start() != nil {
				return 1
			}
			cmds = append(cmds, c)
		}
		code := 0
		for _, c := range cmds {
			if c.Wait() != nil {
				code = 1
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
	send := func(format string, a ...any) { fmt.Fprintf(conn, format+"\n", a...) }
	for i := 0; i < *steps; i++ {
		time.Sleep(time.Duration(*stepMS) * time.Millisecond)
		now := time.Now().UnixNano()
		if *value*scale > *limit {
			send(`{"type":"mark","t_ns":%d,"kind":"oom","gpu":0,"pid":%d,"rank":%d,"text":"CUDA out of memory. Tried to allocate 2.00 GiB"}`, now, os.Getpid(), r)
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
		alloc := int64(peak/4) + int64(i)**leak
		send(`{"type":"torch","t_ns":%d,"gpu":0,"pid":%d,"rank":%d,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d}`,
			now, os.Getpid(), r, alloc, int64(p*1.1), int64(p))
		send(`{"type":"mark","t_ns":%d,"kind":"step","step":%d,"gpu":0,"pid":%d,"rank":%d}`, now, i, os.Getpid(), r)
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
func fitJSON(t *testing.T, db string, args ...string) (fitResult, string, int) {
	t.Helper()
	out, errs, code := run(t, db, "", append([]string{"fit", "--json", "--source", "sim", "--grace", "2s"}, args...)...)
	var r fitResult
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
func checkTrials(t *testing.T, db string, r fitResult) {
	t.Helper()
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	seen := map[float64]bool{}
	lo, hi := math.Inf(-1), math.Inf(1)
	for _, tr := range r.Trials {
		if seen[tr.Value] {
			t.Errorf("value %v tried twice", tr.Value)
		}
		seen[tr.Value] = true
		run, err := d.Run(tr.Run)
		if err != nil || run.Tags["batch_size"] != num(tr.Value) || run.Tags["fit"] != r.ID {
			t.Errorf("trial %d: run %q %v tags %v", tr.N, tr.Run, err, run.Tags)
		}
		switch {
		case tr.Outcome.ran():
			lo = max(lo, tr.Value)
		case tr.Outcome == fitOOM:
			hi = min(hi, tr.Value)
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
		case tr.Value <= 123 && (tr.Outcome != fitStopped || tr.Steps < 5 || tr.Steps >= 50 || tr.ExitCode != 128+int(syscall.SIGTERM)):
			t.Errorf("trial %+v: want stopped after 5 steps by SIGTERM", tr)
		case tr.Value > 123 && (tr.Outcome != fitOOM || tr.OOMMarks != 1 || tr.Steps != 0 || tr.ExitCode != 3):
			t.Errorf("trial %+v: want out of memory", tr)
		}
	}
	// The step peak is the job's: 1 GiB + value GiB.
	for _, tr := range r.Trials {
		if tr.Outcome.ran() && (tr.StepPeakBytes == nil || *tr.StepPeakBytes != int64(1<<30)+int64(tr.Value)*(1<<30)) {
			t.Errorf("trial %d at %v: step peak %v", tr.N, tr.Value, tr.StepPeakBytes)
		}
	}
	// Trials: 4 and 16 to predict; the prediction from them on the
	// simulated H200 (140.40 GiB / 1.075 less 1 GiB, over 1 GiB a unit:
	// 129), which fails; one step down by the interval's width (129 to the
	// optimistic 138: 9), which runs; bisection of that 9-wide bracket to
	// 1, at most 4: 8 at most.
	if r.TrialsUsed > 8 {
		t.Errorf("%d trials", r.TrialsUsed)
	}
	if r.Prediction == nil || r.Prediction.From != "trials" || !strings.Contains(r.Prediction.Words, "projected from 16 to") {
		t.Errorf("prediction %+v", r.Prediction)
	}
	if r.Recommended == nil || *r.Recommended > 123 || *r.Recommended < 100 {
		t.Errorf("recommended %v", f64v(r.Recommended))
	}
}
