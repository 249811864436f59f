package fit

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
)

// Outcome is how a trial ended.
type Outcome string

// The outcomes of a trial.
const (
	Stopped     Outcome = "stopped"     // ran its steps; memrec ended it
	Completed   Outcome = "completed"   // exited 0 by itself
	OOM         Outcome = "oom"         // reported an out-of-memory error before its steps
	Failed      Outcome = "failed"      // exited otherwise before its steps
	Interrupted Outcome = "interrupted" // Ctrl-C
)

// Ran reports whether the value fits.
func (o Outcome) Ran() bool { return o == Stopped || o == Completed }

// Trial is one trial, as printed and in --json.
type Trial struct {
	N             int     `json:"trial"`
	Run           string  `json:"run"`
	Value         float64 `json:"value"`
	Outcome       Outcome `json:"outcome"`
	Steps         int     `json:"steps"` // of the rank with the fewest
	Ranks         int     `json:"ranks"`
	OOMMarks      int     `json:"oom_marks"`
	ExitCode      int     `json:"exit_code"`
	StepPeakBytes *int64  `json:"step_peak_bytes"` // of the fullest GPU
	// ReservedBytes is the most the allocator reserved on the fullest
	// GPU, and AllocRetries how often it freed its cache and tried again
	// there (nil where no allocator sample came).
	ReservedBytes *int64  `json:"reserved_bytes,omitempty"`
	AllocRetries  *int64  `json:"alloc_retries,omitempty"`
	Seconds       float64 `json:"seconds"`
	// GPUFull says why a trial without OOM marks counts as out of memory:
	// the fullest GPU's use at its peak, of its total ("" otherwise).
	GPUFull string `json:"gpu_full,omitempty"`
	// Repeat is the how-manieth trial of the value this is, from 2 (a
	// value run again where processes share a GPU); 0 for the first.
	Repeat int `json:"repeat,omitempty"`
}

// Result is memrec fit's answer.
type Result struct {
	ID             string   `json:"id"`
	By             string   `json:"by"`
	Steps          int      `json:"steps"`
	Trials         []Trial  `json:"trials"`
	TrialsUsed     int      `json:"trials_used"`
	Seconds        float64  `json:"seconds"`
	LargestRan     *float64 `json:"largest_ran"`
	SmallestFailed *float64 `json:"smallest_failed"`
	// Recommended is the largest value whose need, with the whole-run
	// margin, fits under the largest that ran's step peak less the
	// headroom.
	Recommended *float64           `json:"recommended"`
	Headroom    float64            `json:"headroom"`
	Prediction  *Prediction        `json:"prediction,omitempty"`
	WholeRun    *analysis.WholeRun `json:"whole_run,omitempty"`
	Precision   float64            `json:"precision"`
	Note        string             `json:"note,omitempty"`
	Predictions []Prediction       `json:"-"`
	Settings
}

// Prediction is what the runs known before a trial predicted.
type Prediction struct {
	From       string   `json:"from"` // "runs" or "trials"
	Value      *float64 `json:"value"`
	Optimistic *float64 `json:"optimistic"`
	Words      string   `json:"words"`
}

// A Launcher prepares the recording of one trial: the recorder's options
// that run the job at value (as the command line gets it) as the run
// named run, tagged with tags, and done, which releases what it opened and
// returns the exit status the source itself saw (a simulated job's out of
// memory; 0 otherwise). The search wires the options' store, signals and
// environment to its watch.
type Launcher func(run, value string, tags map[string]string) (opts recorder.Options, done func() int, err error)

// trial runs the command at value v, records it, and reads its outcome.
// It returns an error for a trial that failed for another reason than
// memory, and for Ctrl-C.
func (s *Search) trial(ctx context.Context, v float64) (Trial, error) {
	t := Trial{N: len(s.res.Trials) + 1, Value: v, Run: fmt.Sprintf("%s-%s", s.res.ID, Arg(v))}
	if _, tried := s.trialsAt(v); tried > 0 {
		t.Repeat = tried + 1
		t.Run = fmt.Sprintf("%s-%s-r%d", s.res.ID, Arg(v), t.Repeat)
	}
	if _, err := s.db.Run(t.Run); err == nil {
		return t, fmt.Errorf("run %q: %w (choose another --id)", t.Run, storage.ErrExists)
	}
	rep, err := s.record(ctx, &t)
	if err != nil {
		return t, err
	}
	s.res.Trials = append(s.res.Trials, t)
	s.trials = append(s.trials, rep)
	if s.OnTrial != nil {
		s.OnTrial(t)
	}
	switch t.Outcome {
	case Interrupted:
		return t, context.Canceled
	case Failed:
		return t, fmt.Errorf("trial %d (%s=%s) failed without running out of memory: exit status %d after %d steps, no OOM mark; see its run %q (memrec analyze %s)",
			t.N, s.opt.By, Arg(v), t.ExitCode, t.Steps, t.Run, t.Run)
	case OOM:
		s.failedAt(v)
	case Completed:
		if s.opt.Steps > 0 && t.Steps == 0 {
			return t, fmt.Errorf("trial %d (%s=%s) exited 0 without a step mark: it shows nothing about the value (does the command call memrec.step, or a framework callback, and run under --torch?); give --steps 0 to let the exit code decide",
				t.N, s.opt.By, Arg(v))
		}
		fallthrough
	default:
		if t.Steps < s.opt.Steps && t.Steps > 0 {
			s.say(fmt.Sprintf("  note: it exited 0 after %d of %d steps; counted as running", t.Steps, s.opt.Steps))
		}
		s.ranAt(v, t.StepPeakBytes)
	}
	return t, nil
}

// record launches and records trial t, waits for its processes, and fills
// in what it did; the report is its run's analysis (nil where there is
// none, or where it must not be read as a run that ran).
func (s *Search) record(ctx context.Context, t *Trial) (*analysis.Report, error) {
	v := Arg(t.Value)
	opts, done, err := s.launch(t.Run, v, map[string]string{s.opt.By: v, "fit": s.res.ID})
	if err != nil {
		return nil, err
	}
	w := s.watch(&opts)
	stopWatch := context.AfterFunc(ctx, func() { w.end(syscall.SIGINT) })
	start := time.Now()
	res, err := recorder.Record(ctx, opts)
	stopWatch()
	if err != nil {
		done()
		return nil, err
	}
	w.waitGroup()
	t.Seconds = time.Since(start).Seconds()
	t.ExitCode = max(res.ExitCode, done())
	t.Steps, t.Ranks, t.OOMMarks = w.counts()
	var rep *analysis.Report
	if run, err := s.db.Run(t.Run); err == nil {
		if rep, err = analysis.Analyze(s.db, run, analysis.Options{Budget: s.opt.Budget}); err == nil {
			t.StepPeakBytes = stepPeak(rep)
			t.ReservedBytes, t.AllocRetries = heldBy(rep)
		}
	}
	full := ""
	if rep != nil {
		// A trial that failed before its --steps with its GPU full ran out
		// of memory (analysis.FullFree), after its first step as well.
		full = analysis.FullGPU(rep)
	}
	stopped, interrupted := w.ended()
	switch {
	case interrupted:
		t.Outcome = Interrupted
	case stopped:
		t.Outcome = Stopped
	case t.ExitCode == 0:
		t.Outcome = Completed
	case t.OOMMarks > 0 || (rep != nil && analysis.FatalOOM(rep)):
		t.Outcome = OOM
	case full != "":
		t.Outcome, t.GPUFull = OOM, full
		// Its report has no OOM mark and may have steps: the projections
		// would take it for one that ran. Its failure is in the bracket.
		rep = nil
	default:
		t.Outcome = Failed
	}
	return rep, nil
}

// watch puts a trialWatch between the trial's recording and its store,
// and marks the trial's processes with its token.
func (s *Search) watch(opts *recorder.Options) *trialWatch {
	w := &trialWatch{steps: s.opt.Steps, perRank: map[int]int{}, sigs: make(chan os.Signal, 8), grace: s.opt.Grace, stall: 4 * s.opt.Grace,
		token: fmt.Sprintf("%d-%d", os.Getpid(), trialSeq.Add(1))}
	opts.Env = append(opts.Env, trialEnv+"="+w.token)
	opts.Signals = w.sigs
	opts.Started = func(pid int) { w.mu.Lock(); w.pgid = pid; w.mu.Unlock() }
	logw := opts.Log
	opts.Open = func(run storage.Run) (recorder.Store, error) {
		st, err := recorder.DBStore(s.db, run, logw)
		if err != nil {
			return nil, err
		}
		w.Store = st
		return w, nil
	}
	opts.Log = quietLog{logw}
	return w
}

// quietLog drops the recorder's line about passing on the signal memrec
// itself sent to end a trial.
type quietLog struct{ w io.Writer }

func (q quietLog) Write(p []byte) (int, error) {
	if strings.HasPrefix(string(p), "memrec: passing ") {
		return len(p), nil
	}
	return q.w.Write(p)
}

// Arg writes a value as the command line gets it.
func Arg(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
