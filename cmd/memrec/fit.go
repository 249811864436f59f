package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// fitOptions are memrec fit's flags. Each trial is recorded as record
// would record it (rec: --interval, --gpus, --torch, --source).
type fitOptions struct {
	rec      recordOptions
	by       string
	steps    int
	min      float64
	max      float64
	multiple float64
	runs     []string
	headroom string
	json     bool
	id       string
	// grace is how long a trial has to exit after SIGTERM before its
	// process group is killed.
	grace   time.Duration
	command []string
}

func newFitCmd(g *globals) *cobra.Command {
	o := &fitOptions{rec: recordOptions{globals: g, openNVML: func() (*recorder.NVML, error) { return recorder.OpenNVML(recorder.DefaultNVMLPath) }}}
	cmd := &cobra.Command{
		Use:   "fit [flags] -- COMMAND ... {} ...",
		Short: "Find the largest value (batch size, sequence length) that runs, by trial",
		Long: `Run the command with {} replaced by a candidate value, each trial recorded as a
run of its own (tagged with the value and fit=ID), and find the largest value
that runs --steps training steps. Steps are counted from the probe's step marks
(of every rank: under torchrun or any launcher the limit is the fullest rank's);
once each rank has done them, memrec ends the trial's whole process group and
waits for it to exit before the next. A trial that reports an out-of-memory
error (its OOM marks) failed; one that exits otherwise before its steps is an
error that ends the search. A trial that exits 0 without any step mark (no probe,
or a script that does not call memrec.step) is an error too: it proves nothing
about the value. With --steps 0 step marks are not counted: each trial runs
until the command exits, and its exit code decides (0: the value runs; an OOM
mark or a full GPU: it does not; anything else ends the search). Give it a
short command.

Values are bounded: --min and --max must be finite, above 0 and at most 2^31,
--min at most --max. Without --max, no value is tried past 2^31, nor past --min
plus four times what the GPU's memory holds at the per-unit growth that the
trials measured (once two have run).

Every process a trial starts ends with it: its process group is killed, and on
Linux memrec adopts the trial's orphaned descendants (a child subreaper), so one
started in a session of its own (setsid) is killed and waited for too.

The search starts from the prediction of earlier runs given with --runs (as
compare --by makes it), or of two small trials it runs itself (--min and four
times it), tries the pessimistic end of the prediction, then where the
allocator's reserved memory in that trial, grown by the cost of a unit, fills
the GPU (where it never freed its cache: that memory held what the step needed),
or the optimistic end; a trial's OOM, with the allocator's state, puts the next
value where it says the limit is. It steps by the interval's width (doubling)
until a value has run and one has failed, and bisects to --multiple (or 2 %).
Runs given with --runs must have trained: one that exited with an error before
its first step is refused. Where several processes share a GPU (ranks of
one job on one GPU), whether a value near the limit runs varies from run to
run: the largest value that ran is run again, in fresh processes, until it has
run 3 times, and a value that fails once counts as failed.

The recommended value keeps --headroom free under what the largest value that
ran used; with a full recording of the job among --runs it also leaves room for
what that run needed after its first steps (the rise of its step peak over the
run, or its memory's growth per step times its steps, whichever is larger).

Without a GPU, --source sim and no command runs each trial as memrec's
simulated job (the one memrec record --source sim records) with the value as
its --by tag (batch_size or seq_len, which scale its activations), on a
simulated GPU of fixed size: a value whose step does not fit runs out of
memory as a real job does.`,
		Example: `  memrec fit -- python train.py --batch-size {}
  memrec fit --multiple 8 --runs bs16,bs32 -- torchrun --nproc-per-node 8 train.py --bs {}
  memrec fit --by seq_len --min 512 --multiple 128 -- python train.py --seq-len {}
  memrec fit --source sim --runs sim-bs16,sim-bs64 --multiple 8`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				o.command = args[dash:]
				args = args[:dash]
			}
			if len(args) > 0 {
				if cmd.Flags().Changed("runs") {
					return fmt.Errorf("unexpected argument %q: give --runs its runs with commas (--runs %s), and put the command after --",
						args[0], strings.Join(append(append([]string{}, o.runs...), args...), ","))
				}
				return fmt.Errorf("unexpected argument %q: put the command after --", args[0])
			}
			return runFit(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.by, "by", "batch_size", "the tag the value is stored under (batch_size, seq_len, ...)")
	f.IntVar(&o.steps, "steps", 5, "training steps a trial must run (counted from the probe's step marks); 0: the trial's exit code decides")
	f.Float64Var(&o.min, "min", 1, "smallest value to try")
	f.Float64Var(&o.max, "max", 0, "largest value to try (0: no limit)")
	f.Float64Var(&o.multiple, "multiple", 0, "try only multiples of this, and stop when the largest that ran and the smallest that failed are this far apart (default: integers, to 2 %)")
	f.StringSliceVar(&o.runs, "runs", nil, "earlier runs of the job, tagged with --by, to predict from (a full recording among them adds what the whole run needs)")
	f.StringVar(&o.headroom, "headroom", "5%", "memory to keep free in the recommended value, as a percentage of the GPU")
	f.BoolVar(&o.json, "json", false, "print the result as JSON (the trials go to standard error)")
	f.StringVar(&o.id, "id", "", "the fit's id, in each trial's name and its fit tag (default: fit-DATE-TIME)")
	f.DurationVar(&o.grace, "grace", 3*time.Second, "how long a trial has to exit after memrec asks it to, before its process group is killed")
	f.DurationVar(&o.rec.interval, "interval", 10*time.Millisecond, "sampling interval")
	f.StringVar(&o.rec.gpus, "gpus", "", "GPU indices to record, e.g. 0,2 (default: all)")
	f.BoolVar(&o.rec.procs, "procs", false, "also record per-process memory")
	f.BoolVar(&o.rec.torch, "torch", false, "load memrec's PyTorch probe into a Python command without changing it (its OOM marks; step marks still need memrec.step or a framework callback)")
	f.StringVar(&o.rec.source, "source", "nvml", "where memory is read: nvml, or sim for a simulated GPU (without a command, each trial is the simulated job at the value)")
	f.IntVar(&o.rec.simGPUs, "sim-gpus", 1, "with --source sim: number of simulated GPUs")
	return cmd
}

// fitOutcome is how a trial ended.
type fitOutcome string

// The outcomes of a trial.
const (
	fitStopped     fitOutcome = "stopped"     // ran its steps; memrec ended it
	fitCompleted   fitOutcome = "completed"   // exited 0 by itself
	fitOOM         fitOutcome = "oom"         // reported an out-of-memory error before its steps
	fitFailed      fitOutcome = "failed"      // exited otherwise before its steps
	fitInterrupted fitOutcome = "interrupted" // Ctrl-C
)

// ran reports whether the value fits.
func (o fitOutcome) ran() bool { return o == fitStopped || o == fitCompleted }

// fitTrial is one trial, as printed and in --json.
type fitTrial struct {
	N             int        `json:"trial"`
	Run           string     `json:"run"`
	Value         float64    `json:"value"`
	Outcome       fitOutcome `json:"outcome"`
	Steps         int        `json:"steps"` // of the rank with the fewest
	Ranks         int        `json:"ranks"`
	OOMMarks      int        `json:"oom_marks"`
	ExitCode      int        `json:"exit_code"`
	StepPeakBytes *int64     `json:"step_peak_bytes"` // of the fullest GPU
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

// fitResult is memrec fit's answer.
type fitResult struct {
	ID             string     `json:"id"`
	By             string     `json:"by"`
	Steps          int        `json:"steps"`
	Trials         []fitTrial `json:"trials"`
	TrialsUsed     int        `json:"trials_used"`
	Seconds        float64    `json:"seconds"`
	LargestRan     *float64   `json:"largest_ran"`
	SmallestFailed *float64   `json:"smallest_failed"`
	// Recommended is the largest value whose need, with the whole-run
	// margin, fits under the largest that ran's step peak less the
	// headroom.
	Recommended *float64           `json:"recommended"`
	Headroom    float64            `json:"headroom"`
	Prediction  *fitPrediction     `json:"prediction,omitempty"`
	WholeRun    *analysis.WholeRun `json:"whole_run,omitempty"`
	Precision   float64            `json:"precision"`
	Note        string             `json:"note,omitempty"`
	Predictions []fitPrediction    `json:"-"`
}

// fitPrediction is what the runs known before a trial predicted.
type fitPrediction struct {
	From       string   `json:"from"` // "runs" or "trials"
	Value      *float64 `json:"value"`
	Optimistic *float64 `json:"optimistic"`
	Words      string   `json:"words"`
}

func runFit(ctx context.Context, o *fitOptions) error {
	if err := checkFitFlags(o); err != nil {
		return err
	}
	if err := becomeSubreaper(); err != nil {
		fmt.Fprintf(o.rec.io.Err, "memrec: warning: cannot adopt the trials' orphans (%v): a process a trial starts in a session of its own may outlive it\n", err)
	}
	headroom, err := parseHeadroom(o.headroom)
	if err != nil {
		return err
	}
	gpus, err := parseGPUs(o.rec.gpus)
	if err != nil {
		return err
	}
	db, err := o.rec.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()
	f := &fitter{o: o, db: db, gpus: gpus, start: time.Now(), res: fitResult{ID: o.id, By: o.by, Steps: o.steps, Headroom: headroom}}
	if f.res.ID == "" {
		f.res.ID = "fit-" + f.start.Format("20060102-150405")
	}
	f.log = o.rec.io.Out
	if o.json {
		f.log = o.rec.io.Err
	}
	searchErr := f.search(ctx)
	f.finish()
	if o.json {
		enc := json.NewEncoder(o.rec.io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(f.res); err != nil {
			return err
		}
	} else {
		f.printResult()
	}
	if searchErr != nil {
		if errors.Is(searchErr, context.Canceled) {
			fmt.Fprintf(o.rec.io.Err, "memrec: fit interrupted; the %d trials so far are kept as runs (memrec runs)\n", len(f.res.Trials))
			return exitError{code: 130}
		}
		if len(f.res.Trials) == 0 {
			return searchErr
		}
		return fmt.Errorf("%w; the %d trials so far are kept as runs (memrec runs)", searchErr, len(f.res.Trials))
	}
	return nil
}

// checkFitFlags refuses what cannot be searched.
func checkFitFlags(o *fitOptions) error {
	if len(o.command) == 0 && o.rec.source != "sim" {
		return errors.New("fit needs a command, after --, with {} where the value goes: memrec fit -- python train.py --batch-size {}")
	}
	has := len(o.command) == 0 // the simulated job takes the value as its tag
	for _, a := range o.command {
		has = has || strings.Contains(a, "{}")
	}
	if !has {
		return fmt.Errorf("the command %q has no {}: put {} where the value goes, e.g. memrec fit -- python train.py --batch-size {}", strings.Join(o.command, " "))
	}
	switch {
	case o.steps < 0:
		return fmt.Errorf("--steps %d: want 0 (the exit code decides) or more", o.steps)
	case o.min <= 0 || !finiteF(o.min) || o.min > fitCeiling:
		return fmt.Errorf("--min %g: want a finite value above 0, at most %d", o.min, int64(fitCeiling))
	case o.max < 0 || !finiteF(o.max) || o.max > fitCeiling:
		return fmt.Errorf("--max %g: want a finite value above 0, at most %d (or 0: none given)", o.max, int64(fitCeiling))
	case o.max != 0 && o.max < o.min:
		return fmt.Errorf("--max %g is below --min %g (equal: try that one value)", o.max, o.min)
	case o.multiple < 0 || !finiteF(o.multiple):
		return fmt.Errorf("--multiple %g: want a value above 0", o.multiple)
	case o.by == "":
		return errors.New("--by: want a tag name, like batch_size")
	}
	return nil
}

func finiteF(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// fitCeiling is the largest value fit tries, whatever the flags: no batch
// size or length a GPU holds comes near it, and values stay whole numbers
// a float64 holds exactly.
const fitCeiling = 1 << 31

// maxValue is the largest value to try: --max; without it the smaller of
// fitCeiling and --min plus four times the units the GPU's memory holds
// at the growth per unit the trials measured (once there is one).
func (f *fitter) maxValue() (v float64, words string) {
	if f.o.max > 0 {
		return f.o.max, "--max"
	}
	if f.maxDerived == 0 || f.maxAt != len(f.trials) {
		f.maxAt, f.maxDerived = len(f.trials), fitCeiling
		if by := f.byTag(); by != nil && by.Need != nil && by.Need.MarginalBytesPerUnit > 0 {
			if avail := by.Available(0); avail > 0 {
				f.maxDerived = min(fitCeiling, f.o.min+4*avail/by.Need.MarginalBytesPerUnit)
			}
		}
	}
	if f.maxDerived < fitCeiling {
		return f.maxDerived, "four times what the GPU holds at the measured growth per unit; give --max to go further"
	}
	return f.maxDerived, "the ceiling of 2^31"
}

// fitter runs the search: its trials, their runs and what they showed.
type fitter struct {
	o     *fitOptions
	db    *storage.DB
	gpus  []int
	start time.Time
	log   io.Writer
	res   fitResult
	// given are the reports of the runs named by --runs; trials those of
	// the trials so far (nil for a trial whose run could not be analysed).
	given  []*analysis.Report
	trials []*analysis.Report
	// lo and hi bracket the limit: the largest value known to run and the
	// smallest known to fail (NaN when none is known yet).
	lo, hi float64
	// loPeak is the step peak of the largest value that ran.
	loPeak int64
	// plan are the values to try next: the prediction's ends; pessimistic
	// is its first, once tried.
	plan        []float64
	pessimistic float64
	// closeAt is the last value held put one precision above the largest
	// that ran, and closings how many such trials ran in a row.
	closeAt  float64
	closings int
	// guessed is the last value tried from a trial's OOM (guess), and
	// confirm is set while the value one precision above it, once it ran,
	// is still to try.
	guessed float64
	confirm bool
	// maxDerived is maxValue's bound without --max, as of maxAt trials.
	maxDerived float64
	maxAt      int
}

// search runs trials until the limit is bracketed to the precision.
func (f *fitter) search(ctx context.Context) error {
	f.lo, f.hi = math.NaN(), math.NaN()
	if err := f.readRuns(); err != nil {
		return err
	}
	// Two values that ran are needed for a prediction: --min and four
	// times it, where the given runs do not have them.
	for _, v := range []float64{f.o.min, 4 * f.o.min} {
		if f.ranValues() >= 2 || !math.IsNaN(f.hi) {
			break
		}
		v = f.clamp(v)
		if f.tried(v) {
			continue
		}
		t, err := f.trial(ctx, v)
		if err != nil {
			return err
		}
		if !t.Outcome.ran() && v == f.clamp(f.o.min) {
			return fmt.Errorf("%s=%s does not fit (--min): it ran out of memory at %d steps; try a smaller --min", f.o.by, num(v), t.Steps)
		}
	}
	var step float64 // the bracket's growth, from the prediction's interval
	for {
		v, ok := f.next(&step)
		if !ok {
			if v, ok = f.repeat(); !ok {
				break
			}
		}
		if _, err := f.trial(ctx, v); err != nil {
			return err
		}
	}
	if math.IsNaN(f.lo) { // every value that ran failed when tried again
		return fmt.Errorf("no %s ran every time it was tried, down to %s (--min): the GPU's processes do not fit there reliably; try a smaller --min", f.o.by, num(f.clamp(f.o.min)))
	}
	return nil
}

// sharedRuns is how many times the largest value that ran must run, each
// in a fresh process, when several processes share a GPU: their
// allocators each keep a cache the others cannot use, so near the limit a
// value runs or fails by when each one's peak comes (on an H200, two DDP
// ranks on one GPU: 3264 ran in 2 of 5 fresh runs, 3072 in 7 of 11). A
// value that fails once is not below the limit; three runs in a row make
// one that fails one time in two unlikely (1 in 8) to be taken.
const sharedRuns = 3

// repeat is the largest value that ran, to run once more, where processes
// share a GPU and it has run fewer than sharedRuns times; false otherwise.
func (f *fitter) repeat() (float64, bool) {
	if _, _, shared := f.shared(); math.IsNaN(f.lo) || !shared {
		return 0, false
	}
	ran, _ := f.trialsAt(f.lo)
	return f.lo, ran < sharedRuns
}

// trialsAt counts the trials at v, and those of them that ran.
func (f *fitter) trialsAt(v float64) (ran, tried int) {
	for _, t := range f.res.Trials {
		if t.Value == v {
			tried++
			if t.Outcome.ran() {
				ran++
			}
		}
	}
	return ran, tried
}

// ranValues counts the distinct values known to run.
func (f *fitter) ranValues() int {
	seen := map[float64]bool{}
	for _, r := range f.reports() {
		if v, ok := f.valueOf(r); ok && !analysis.RanOutOfMemory(r) {
			seen[v] = true
		}
	}
	return len(seen)
}

// precision is how close the bracket must close: --multiple, else 2 % of
// the largest value that ran (at least 1).
func (f *fitter) precision() float64 {
	if f.o.multiple > 0 {
		return f.o.multiple
	}
	return max(1, math.Floor(0.02*f.lo))
}

// clamp snaps v down to the values tried (multiples of --multiple, else
// integers) within --min and --max.
func (f *fitter) clamp(v float64) float64 {
	m := f.o.multiple
	if m == 0 {
		m = 1
	}
	v = math.Floor(v/m+1e-9) * m
	v = max(v, math.Ceil(f.o.min/m-1e-9)*m)
	top, _ := f.maxValue()
	return min(v, math.Floor(top/m+1e-9)*m)
}

// unit is the smallest step between two values tried.
func (f *fitter) unit() float64 {
	if f.o.multiple > 0 {
		return f.o.multiple
	}
	return 1
}

func (f *fitter) tried(v float64) bool {
	for _, t := range f.res.Trials {
		if t.Value == v {
			return true
		}
	}
	return false
}

// next picks the next value to try: the prediction's pessimistic end,
// then its optimistic end; then, once a value has failed with the
// allocator's state at its OOM known, the value that state puts the limit
// at (guess), and if that runs, the value one precision above it; then,
// while the limit is not bracketed by a value that ran and one that failed
// close enough, a step of the interval's width beyond the last value (up
// from the largest that ran, but not past where its measured step peak
// fills the GPU, filled; or down from the smallest that failed while the
// largest that ran is more than two steps below it), doubling each time;
// then bisection, or filled where it is below the bracket's middle, until
// the bracket is the precision wide.
func (f *fitter) next(step *float64) (float64, bool) {
	u := f.unit()
	haveLo, haveHi := !math.IsNaN(f.lo), !math.IsNaN(f.hi)
	if haveLo && haveHi && f.hi-f.lo <= f.precision() {
		return 0, false
	}
	if top, words := f.maxValue(); haveLo && !haveHi && f.lo >= f.clamp(top) {
		f.res.Note = fmt.Sprintf("%s=%s (%s) ran: the limit is at or above it", f.o.by, num(f.lo), words)
		return 0, false
	}
	inside := func(v float64) bool { return !f.tried(v) && (!haveLo || v > f.lo) && (!haveHi || v < f.hi) }
	if *step == 0 {
		// The prediction, once: its ends are the first values tried, its
		// width the bracket's first step.
		if p := f.predict(); p != nil {
			for _, c := range []*float64{p.Value, p.Optimistic} {
				if c != nil {
					f.plan = append(f.plan, f.clamp(*c))
				}
			}
			if p.Value != nil {
				f.pessimistic = f.clamp(*p.Value)
			}
			if p.Value != nil && p.Optimistic != nil {
				*step = math.Abs(*p.Optimistic - *p.Value)
			}
		}
		if *step < u || math.IsNaN(*step) {
			*step = u
			if haveLo {
				*step = max(u, 0.05*f.lo)
			}
		}
	}
	if v, words, ok := f.held(); ok && inside(v) {
		fmt.Fprintln(f.log, words)
		return v, true
	}
	for len(f.plan) > 0 {
		v := f.plan[0]
		f.plan = f.plan[1:]
		if inside(v) {
			return v, true
		}
	}
	// A guess that ran: the value one precision above it closes the
	// bracket if it fails.
	if f.confirm {
		f.confirm = false
		if v := f.clamp(f.lo + f.precision()); haveLo && f.lo == f.guessed && inside(v) {
			return v, true
		}
	}
	if v, words, ok := f.guess(); ok && inside(v) && v != f.guessed {
		f.guessed, f.confirm = v, true
		fmt.Fprintln(f.log, words)
		return v, true
	}
	filled, full := f.filled()
	var v float64
	switch {
	case haveHi && (!haveLo || f.hi-f.lo > 2**step):
		v = f.clamp(f.hi - *step)
		*step *= 2
	case haveLo && !haveHi:
		v = f.clamp(f.lo + *step)
		if full {
			v = min(v, filled)
		}
		*step *= 2
	case full && filled < (f.lo+f.hi)/2:
		v = filled // closer than halving the bracket
	default:
		v = f.clamp((f.lo + f.hi) / 2)
	}
	if haveLo && v <= f.lo {
		v = f.lo + u
	}
	if !inside(v) {
		return 0, false
	}
	return v, true
}

// filled is the value where the step peak measured at the largest value
// that ran, grown by the need curve's marginal cost of a unit, reaches the
// GPU's memory (less what the driver reserves and PyTorch does not see):
// the limit is not above it, since the allocator holds at least what it
// allocates. For a job whose allocator packs tightly at its limit it is
// within a few units of the limit, where the bracket's step may be
// hundreds. False without a measured peak, a curve, or memory left.
func (f *fitter) filled() (float64, bool) {
	if math.IsNaN(f.lo) || f.loPeak <= 0 {
		return 0, false
	}
	by := f.byTag()
	if by == nil || by.Need == nil || by.Need.MarginalBytesPerUnit <= 0 {
		return 0, false
	}
	left := by.Available(0) - float64(f.loPeak)
	if left <= 0 {
		return 0, false
	}
	return f.clamp(f.lo + left/by.Need.MarginalBytesPerUnit), true
}

// maxClosing is how many trials in a row held may put one precision
// above the largest value that ran, each of which ran: its reserved
// memory, read as the step's need, was then more than that need, and the
// bracket's own steps take over.
const maxClosing = 2

// held is where the allocator's reserved memory, at the last trial, which
// ran at the largest value that ran (at or above the prediction's
// pessimistic end) without the allocator ever freeing its cache and
// trying again, grown by the cost of a unit, reaches the GPU's memory.
// Without a retry the allocator never gave back a segment, so what it
// reserved holds at least what the step needed at once: the segments with
// live tensors and the room stranded in them (docs/analysis.md, "The
// allowance"). The cost of a unit is the need curve's
// marginal cost plus the largest segment's growth, the most the stranded
// room grows, so the limit is not below the value held gives, as far as
// the cost stays that: it is tried. Where that is less than one precision
// above the largest that ran, the value one precision above it is tried
// to close the bracket (maxClosing times in a row). False where the
// allocator retried (its reserved memory was the GPU's, not the need),
// where processes share a GPU, or without a curve or the figures.
func (f *fitter) held() (v float64, words string, ok bool) {
	n := len(f.res.Trials)
	if n == 0 || math.IsNaN(f.lo) || f.pessimistic == 0 || f.lo < f.pessimistic {
		return 0, "", false
	}
	last := f.res.Trials[n-1]
	if !last.Outcome.ran() || last.Value != f.lo || last.ReservedBytes == nil || last.AllocRetries == nil || *last.AllocRetries > 0 {
		return 0, "", false
	}
	if _, _, shared := f.shared(); shared {
		return 0, "", false
	}
	by := f.byTag()
	if by == nil || by.Need == nil || by.Need.MarginalBytesPerUnit <= 0 {
		return 0, "", false
	}
	unit := by.Need.MarginalBytesPerUnit
	if l := by.SegmentLine; l != nil && l.SlopeBytesPerUnit > 0 {
		unit += l.SlopeBytesPerUnit
	}
	reserved := float64(*last.ReservedBytes)
	left := by.Available(0) - reserved
	v = f.clamp(f.lo + max(left, 0)/unit)
	said := fmt.Sprintf("at %s=%s the allocator reserved %s and never freed its cache: %s left, at %s a unit,",
		f.o.by, num(f.lo), units.FormatBytes(int64(reserved)), units.FormatBytes(int64(max(left, 0))), units.FormatBytes(int64(unit)))
	if v >= f.lo+f.precision() {
		f.closings = 0
		return v, said + " puts the limit at or above " + num(v), true
	}
	if last.Value == f.closeAt {
		f.closings++ // the closing trial before ran
	} else {
		f.closings = 0
	}
	if f.closings >= maxClosing {
		return 0, "", false
	}
	v = f.clamp(f.lo + f.precision())
	f.closeAt = v
	return v, said + " " + num(v) + " should not fit", true
}

// guess is the value where the need curve of the runs and trials so far,
// in its middle, meets the GPU with the allocator's cost measured at the
// OOM of the smallest value that failed (strandedAtOOM) in place of the
// default allowance: the limit as that trial measured it, not bracketed
// but found, and words that say so. False without such a measurement (an
// OOM without an allocator sample beside it, a trial that failed before
// the probe reported) or a curve.
func (f *fitter) guess() (v float64, words string, ok bool) {
	if math.IsNaN(f.hi) {
		return 0, "", false
	}
	stranded, measured := -1.0, false
	for _, r := range f.reports() {
		if v, ok := f.valueOf(r); ok && v == f.hi {
			if s, ok := strandedAtOOM(r); ok && s > stranded {
				stranded, measured = s, true
			}
		}
	}
	by := f.byTag()
	if !measured || by == nil || by.Need == nil {
		return 0, "", false
	}
	if v, ok = by.Need.Solve(by.Available(0)/(1+stranded), replay.Middle); !ok || !finiteF(v) {
		return 0, "", false
	}
	v = f.clamp(v)
	return v, fmt.Sprintf("at the OOM of %s=%s the allocator held %.1f %% beyond what was allocated and asked for: the curve meets the GPU at %s",
		f.o.by, num(f.hi), 100*stranded, num(v)), true
}

// reports are the analyses of the given runs, then of the trials, those
// that could be analysed.
func (f *fitter) reports() []*analysis.Report {
	var reps []*analysis.Report
	for _, r := range append(append([]*analysis.Report{}, f.given...), f.trials...) {
		if r != nil {
			reps = append(reps, r)
		}
	}
	return reps
}

// byTag is compare --by's fit over the reports (nil with fewer than two,
// or where it cannot be made).
func (f *fitter) byTag() *analysis.ByTag {
	reps := f.reports()
	if len(reps) < 2 {
		return nil
	}
	c, err := analysis.Compare(reps, "", "")
	if err != nil || analysis.FitByTag(c, f.o.by, 0) != nil {
		return nil
	}
	return c.By
}

// strandedAtOOM is what the allocator held and could not use at a run's
// fatal OOM: reserved less allocated, as a share of allocated plus the
// request that failed. Before the error the allocator has freed its cache
// and retried, so what it still holds unallocated lies in segments that
// hold tensors: the splitting and rounding the job costs at its limit,
// measured where AllocatorAllowance is a bound over models. The fullest
// GPU's, where several ran out.
func strandedAtOOM(r *analysis.Report) (float64, bool) {
	best, ok := 0.0, false
	for _, g := range r.GPUs {
		for _, o := range g.OOMs {
			if o.Outcome != analysis.OOMFatal || o.AllocatedBytes == nil || o.ReservedBytes == nil || *o.AllocatedBytes <= 0 {
				continue
			}
			asked := float64(*o.AllocatedBytes)
			if o.RequestedBytes != nil {
				asked += float64(*o.RequestedBytes)
			}
			if s := float64(max(*o.ReservedBytes-*o.AllocatedBytes, 0)) / asked; !ok || s > best {
				best, ok = s, true
			}
		}
	}
	return best, ok
}

// predict is compare --by's prediction over the given runs and the trials
// so far, without headroom (nil when none can be made).
func (f *fitter) predict() *fitPrediction {
	by := f.byTag()
	if by == nil || by.MaxFittingValueNoHeadroom == nil {
		return nil
	}
	from := "runs"
	if len(f.trials) > 0 {
		from = "trials"
		if len(f.given) > 0 {
			from = "runs and trials"
		}
	}
	p := fitPrediction{From: from, Value: by.MaxFittingValueNoHeadroom, Optimistic: by.MaxFittingValueOptimistic, Words: by.IntervalWords}
	if f.res.Prediction == nil {
		f.res.Prediction = &p
		fmt.Fprintf(f.log, "prediction from the %s: %s\n", from, p.Words)
	}
	return &p
}

// readRuns analyses the runs --runs names; those that carry the tag
// bracket the limit as trials would.
func (f *fitter) readRuns() error {
	if len(f.o.runs) == 0 {
		return nil
	}
	var runs []storage.Run
	for _, ref := range f.o.runs {
		r, err := f.db.Run(ref)
		if err != nil {
			return fmt.Errorf("--runs: %w", err)
		}
		if _, ok := r.Tags[f.o.by]; !ok {
			return fmt.Errorf("--runs: run %q has no tag %s (tag it with memrec tag %s %s=VALUE)", r.Name, f.o.by, r.Name, f.o.by)
		}
		runs = append(runs, r)
	}
	reps, err := analyzeAll(f.db, runs)
	if err != nil {
		return fmt.Errorf("--runs: %w", err)
	}
	for _, r := range reps {
		v, ok := f.valueOf(r)
		if !ok {
			return fmt.Errorf("--runs: run %q has %s=%q: not a number", r.Run, f.o.by, r.Tags[f.o.by])
		}
		if code, failed := analysis.FailedBeforeAStep(r); failed {
			return fmt.Errorf("--runs: run %q exited %d before its first step without running out of memory: it says nothing of what %s=%s needs (see memrec analyze %s)",
				r.Run, code, f.o.by, num(v), r.Run)
		}
		f.given = append(f.given, r)
		if analysis.RanOutOfMemory(r) {
			f.failedAt(v)
		} else {
			f.ranAt(v, stepPeak(r))
		}
	}
	for _, r := range reps {
		if w, ok := analysis.WholeRunMargin(r, f.o.steps); ok && (f.res.WholeRun == nil || w.Share() > f.res.WholeRun.Share()) {
			f.res.WholeRun = &w
		}
	}
	return nil
}

func (f *fitter) valueOf(r *analysis.Report) (float64, bool) {
	v, err := strconv.ParseFloat(r.Tags[f.o.by], 64)
	return v, err == nil && finiteF(v)
}

// ranAt takes a value that ran into the bracket: the largest that ran
// below the smallest that failed. A value at or above a failure that runs
// (where processes share a GPU, the same value can do both) does not
// move it.
func (f *fitter) ranAt(v float64, peak *int64) {
	if !math.IsNaN(f.hi) && v >= f.hi {
		return
	}
	if math.IsNaN(f.lo) || v > f.lo {
		f.lo = v
		f.loPeak = 0
	}
	if peak != nil && v == f.lo {
		f.loPeak = max(f.loPeak, *peak)
	}
}

// failedAt takes a value that failed into the bracket. Where it is at or
// below the largest that ran (it ran before and failed now), the bracket's
// low end falls to the largest value below it that ran.
func (f *fitter) failedAt(v float64) {
	if math.IsNaN(f.hi) || v < f.hi {
		f.hi = v
	}
	if math.IsNaN(f.lo) || f.lo < f.hi {
		return
	}
	f.lo, f.loPeak = math.NaN(), 0
	for _, r := range f.given {
		if x, ok := f.valueOf(r); ok && !analysis.RanOutOfMemory(r) {
			f.ranAt(x, stepPeak(r))
		}
	}
	for _, t := range f.res.Trials {
		if t.Outcome.ran() {
			f.ranAt(t.Value, t.StepPeakBytes)
		}
	}
}

// stepPeak is the highest per-step peak allocated over the run's GPUs
// (the fullest rank's), or nil without allocator samples.
func stepPeak(r *analysis.Report) *int64 {
	var p *int64
	for _, g := range r.GPUs {
		if g.PeakStepBytes != nil && (p == nil || *g.PeakStepBytes > *p) {
			v := *g.PeakStepBytes
			p = &v
		}
	}
	return p
}

// heldBy is the most the allocator reserved on the run's fullest GPU (by
// reserved memory) and how often it retried there; nil without allocator
// samples from a probe that reads the allocator's segments (one that
// sends the retries with them: PyTorch's, without expandable segments).
func heldBy(r *analysis.Report) (reserved, retries *int64) {
	for _, g := range r.GPUs {
		if g.PeakReservedBytes != nil && g.LargestSegmentBytes != nil && (reserved == nil || *g.PeakReservedBytes > *reserved) {
			reserved, retries = g.PeakReservedBytes, g.AllocRetries
		}
	}
	return reserved, retries
}

// trial runs the command at value v, records it, and reads its outcome.
// It returns an error for a trial that failed for another reason than
// memory, and for Ctrl-C.
func (f *fitter) trial(ctx context.Context, v float64) (fitTrial, error) {
	t := fitTrial{N: len(f.res.Trials) + 1, Value: v, Run: fmt.Sprintf("%s-%s", f.res.ID, num(v))}
	if _, tried := f.trialsAt(v); tried > 0 {
		t.Repeat = tried + 1
		t.Run = fmt.Sprintf("%s-%s-r%d", f.res.ID, num(v), t.Repeat)
	}
	if _, err := f.db.Run(t.Run); err == nil {
		return t, fmt.Errorf("run %q: %w (choose another --id)", t.Run, storage.ErrExists)
	}
	o := f.o.rec
	o.name = t.Run
	o.allocTrace = true // its requests, for the replay (ignored by a job without PyTorch)
	o.command = make([]string, len(f.o.command))
	for i, a := range f.o.command {
		o.command[i] = strings.ReplaceAll(a, "{}", num(v))
	}
	tags := map[string]string{f.o.by: num(v), "fit": f.res.ID}
	o.tags = []string{f.o.by + "=" + num(v)} // the simulated job's shape, with --source sim
	now := time.Now()
	src, err := openSource(&o, now)
	if err != nil {
		return t, err
	}
	defer src.Close()
	opts := recorderOptions(&o, src, now, f.gpus, tags)
	cleanup, err := probeEnv(&o, &opts)
	defer cleanup()
	if err != nil {
		return t, err
	}
	w := &trialWatch{steps: f.o.steps, perRank: map[int]int{}, sigs: make(chan os.Signal, 8), grace: f.o.grace, stall: 4 * f.o.grace,
		token: fmt.Sprintf("%d-%d", os.Getpid(), trialSeq.Add(1))}
	opts.Env = append(opts.Env, trialEnv+"="+w.token)
	opts.Signals = w.sigs
	opts.Started = func(pid int) { w.mu.Lock(); w.pgid = pid; w.mu.Unlock() }
	opts.Open = func(run storage.Run) (recorder.Store, error) {
		s, err := recorder.DBStore(f.db, run, o.io.Err)
		if err != nil {
			return nil, err
		}
		w.Store = s
		return w, nil
	}
	opts.Log = quietLog{o.io.Err}
	stopWatch := context.AfterFunc(ctx, func() { w.end(syscall.SIGINT) })
	start := time.Now()
	res, err := recorder.Record(ctx, opts)
	stopWatch()
	if err != nil {
		return t, err
	}
	w.waitGroup()
	t.Seconds = time.Since(start).Seconds()
	t.ExitCode = max(res.ExitCode, simExit(src))
	t.Steps, t.Ranks, t.OOMMarks = w.counts()
	var rep *analysis.Report
	if run, err := f.db.Run(t.Run); err == nil {
		if rep, err = analysis.Analyze(f.db, run, analysis.Options{}); err == nil {
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
		t.Outcome = fitInterrupted
	case stopped:
		t.Outcome = fitStopped
	case t.ExitCode == 0:
		t.Outcome = fitCompleted
	case t.OOMMarks > 0 || (rep != nil && analysis.FatalOOM(rep)):
		t.Outcome = fitOOM
	case full != "":
		t.Outcome, t.GPUFull = fitOOM, full
		// Its report has no OOM mark and may have steps: the projections
		// would take it for one that ran. Its failure is in the bracket.
		rep = nil
	default:
		t.Outcome = fitFailed
	}
	f.res.Trials = append(f.res.Trials, t)
	f.trials = append(f.trials, rep)
	f.printTrial(t)
	switch t.Outcome {
	case fitInterrupted:
		return t, context.Canceled
	case fitFailed:
		return t, fmt.Errorf("trial %d (%s=%s) failed without running out of memory: exit status %d after %d steps, no OOM mark; see its run %q (memrec analyze %s)",
			t.N, f.o.by, num(v), t.ExitCode, t.Steps, t.Run, t.Run)
	case fitOOM:
		f.failedAt(v)
	case fitCompleted:
		if f.o.steps > 0 && t.Steps == 0 {
			return t, fmt.Errorf("trial %d (%s=%s) exited 0 without a step mark: it shows nothing about the value (does the command call memrec.step, or a framework callback, and run under --torch?); give --steps 0 to let the exit code decide",
				t.N, f.o.by, num(v))
		}
		fallthrough
	default:
		if t.Steps < f.o.steps && t.Steps > 0 {
			fmt.Fprintf(f.log, "  note: it exited 0 after %d of %d steps; counted as running\n", t.Steps, f.o.steps)
		}
		f.ranAt(v, t.StepPeakBytes)
	}
	return t, nil
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

// trialWatch stands between a trial's recording and its store: it counts
// the step marks of each rank and the OOM marks as they come, and ends
// the trial once every rank seen has done its steps.
type trialWatch struct {
	recorder.Store
	steps int
	grace time.Duration
	stall time.Duration // after an OOM mark without a step since: the trial has failed
	sigs  chan os.Signal
	// token marks the trial's processes (trialEnv in their environment):
	// the orphans memrec may kill after it are those that carry it.
	token string

	mu          sync.Mutex
	perRank     map[int]int
	ooms        int
	pgid        int
	stopped     bool
	interrupted bool
	kill        *time.Timer
}

func (w *trialWatch) AppendMark(m storage.Mark) error {
	w.mu.Lock()
	switch m.Kind {
	case wire.MarkStep:
		w.perRank[w.markKey(m)]++
		if w.steps > 0 && w.done() {
			w.stopped = true
			w.mu.Unlock()
			w.end(syscall.SIGTERM)
			return w.Store.AppendMark(m)
		}
	case wire.MarkOOM:
		w.ooms++
		k := rankKey(m.Rank, m.PID)
		w.seen(k)
		w.watchOOM(k)
	}
	w.mu.Unlock()
	return w.Store.AppendMark(m)
}

// watchOOM ends the trial if rank k makes no step within stall after its
// OOM: a rank that died of it leaves the others waiting for it (in a
// collective, until a timeout of minutes) under a launcher that does not
// end them. An OOM the rank survived (a library's fallback, a batch
// skipped) is followed by its next step. The caller holds mu.
func (w *trialWatch) watchOOM(k int) {
	at := w.perRank[k]
	time.AfterFunc(w.stall, func() {
		w.mu.Lock()
		stalled := w.perRank[k] == at && !w.stopped && !w.interrupted
		w.mu.Unlock()
		if stalled {
			w.end(syscall.SIGTERM)
		}
	})
}

// AppendTorch makes the sample's rank known before its first step: a
// rank that is slow to start, or that fails before it, holds the trial.
func (w *trialWatch) AppendTorch(s storage.TorchSample) error {
	w.mu.Lock()
	w.seen(rankKey(s.Rank, s.PID))
	w.mu.Unlock()
	return w.Store.AppendTorch(s)
}

// rankKey names a rank: its number, else (no rank given) its process.
func rankKey(rank, pid int) int {
	if rank == storage.None || rank < 0 {
		return -1 - max(pid, 0)
	}
	return rank
}

// markKey is the rank a step mark counts for. A mark that names neither
// rank nor process (a probe older than this memrec, a line of the job's
// own) is the one process's when only one is known. The caller holds mu.
func (w *trialWatch) markKey(m storage.Mark) int {
	k := rankKey(m.Rank, m.PID)
	if k == rankKey(storage.None, storage.None) && len(w.perRank) == 1 {
		for only := range w.perRank {
			return only
		}
	}
	return k
}

// seen adds a rank without steps yet. The caller holds mu.
func (w *trialWatch) seen(k int) {
	if _, ok := w.perRank[k]; !ok {
		w.perRank[k] = 0
	}
}

// done reports whether every rank seen has done its steps, the first
// time it does. The caller holds mu.
func (w *trialWatch) done() bool {
	if w.stopped || w.interrupted {
		return false
	}
	for _, n := range w.perRank {
		if n < w.steps {
			return false
		}
	}
	return true
}

// end asks the trial's process group to exit (SIGTERM when it has done its
// steps, SIGINT on Ctrl-C) and kills it after the grace period.
func (w *trialWatch) end(sig syscall.Signal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sig == syscall.SIGINT {
		w.interrupted = true
	}
	if w.kill != nil {
		return
	}
	select {
	case w.sigs <- sig:
	default:
	}
	w.kill = time.AfterFunc(w.grace, func() {
		select {
		case w.sigs <- syscall.SIGKILL:
		default:
		}
	})
}

func (w *trialWatch) counts() (steps, ranks, ooms int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	steps = -1
	for _, n := range w.perRank {
		if steps < 0 || n < steps {
			steps = n
		}
	}
	return max(steps, 0), len(w.perRank), w.ooms
}

func (w *trialWatch) ended() (stopped, interrupted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kill != nil {
		w.kill.Stop()
	}
	return w.stopped, w.interrupted
}

// trialEnv names the environment variable that marks a trial's processes.
const trialEnv = "MEMREC_FIT_TRIAL"

// trialSeq numbers the trials of this process, for their tokens.
var trialSeq atomic.Int64

// waitGroup waits until no process of the trial's group is left (the
// launcher's workers may outlive it), killing the group after the grace
// period, and then kills and waits for the trial's orphans that left the
// group (endOrphans): the next trial must find the GPU as this one found
// it.
func (w *trialWatch) waitGroup() {
	w.mu.Lock()
	pgid := w.pgid
	w.mu.Unlock()
	defer endOrphans(w.token, w.grace)
	if pgid <= 0 {
		return
	}
	deadline := time.Now().Add(w.grace)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			syscall.Kill(-pgid, syscall.SIGKILL)
			deadline = time.Now().Add(w.grace)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// num writes a value as the command line gets it.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func (f *fitter) printTrial(t fitTrial) {
	peak := "-"
	if t.StepPeakBytes != nil {
		peak = units.FormatBytes(*t.StepPeakBytes)
	}
	what := map[fitOutcome]string{
		fitStopped:     fmt.Sprintf("ran %d steps, stopped", t.Steps),
		fitCompleted:   fmt.Sprintf("ran, exited 0 after %d steps", t.Steps),
		fitOOM:         fmt.Sprintf("out of memory after %d steps", t.Steps),
		fitFailed:      fmt.Sprintf("FAILED: exit %d after %d steps, no OOM", t.ExitCode, t.Steps),
		fitInterrupted: "interrupted",
	}[t.Outcome]
	if t.GPUFull != "" {
		what += fmt.Sprintf(" (exit %d, no OOM mark, the GPU full: %s used)", t.ExitCode, t.GPUFull)
	}
	ranks := ""
	if t.Ranks > 1 {
		ranks = fmt.Sprintf(" (%d ranks)", t.Ranks)
	}
	if t.Repeat > 1 {
		ranks += fmt.Sprintf(", run %d of the value", t.Repeat)
	}
	fmt.Fprintf(f.log, "trial %d  %s=%-8s step peak %-10s %s%s  %.1f s\n", t.N, f.o.by, num(t.Value), peak, what, ranks, t.Seconds)
}

// finish fills in the result: the bracket and the recommended value.
func (f *fitter) finish() {
	r := &f.res
	r.TrialsUsed = len(r.Trials)
	r.Seconds = time.Since(f.start).Seconds()
	if !math.IsNaN(f.lo) {
		r.LargestRan = ptr(f.lo)
		r.Precision = f.precision()
	}
	if !math.IsNaN(f.hi) {
		r.SmallestFailed = ptr(f.hi)
	}
	r.Recommended = f.recommend()
	if n, gpu, ok := f.shared(); ok {
		shared := fmt.Sprintf("%d processes share GPU %d: each one's allocator keeps a cache the others cannot use, so a value near the limit may run once and fail the next time", n, gpu)
		if !math.IsNaN(f.lo) {
			ran, tried := f.trialsAt(f.lo)
			shared += fmt.Sprintf("; %s ran %d of %d times", num(f.lo), ran, tried)
		}
		if flaky := f.ranAndFailed(); len(flaky) > 0 {
			shared += "; ran, then failed: " + strings.Join(flaky, ", ")
		}
		r.Note = strings.TrimPrefix(r.Note+"; "+shared+"; leave the headroom", "; ")
	}
}

// ranAndFailed are the values tried that both ran and failed, ascending.
func (f *fitter) ranAndFailed() []string {
	var vs []float64
	for _, t := range f.res.Trials {
		if ran, tried := f.trialsAt(t.Value); t.Repeat < 2 && ran > 0 && ran < tried {
			vs = append(vs, t.Value)
		}
	}
	slices.Sort(vs)
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = num(v)
	}
	return out
}

// shared finds a GPU that several processes' allocators shared in a
// trial (the most of them): the ranks of a job that put two on one GPU.
func (f *fitter) shared() (n, gpu int, ok bool) {
	for _, r := range f.trials {
		if r == nil {
			continue
		}
		for _, g := range r.GPUs {
			if g.SharedBy > n {
				n, gpu, ok = g.SharedBy, g.GPU, true
			}
		}
	}
	return n, gpu, ok
}

func ptr(v float64) *float64 { return &v }

// ranTrials counts the trials that ran.
func (f *fitter) ranTrials() int {
	n := 0
	for _, t := range f.res.Trials {
		if t.Outcome.ran() {
			n++
		}
	}
	return n
}

// recommend is the largest value whose need, with the whole-run margin,
// fits in what the largest value that ran used at its step peak, less the
// headroom: the need projected through the values that ran (their step
// peaks, the pessimistic reading), never above the largest that ran.
func (f *fitter) recommend() *float64 {
	if math.IsNaN(f.lo) {
		return nil
	}
	// The trials' step peaks are of the same few steps; the given runs'
	// (their whole length) only where fewer than two trials ran.
	var total int64
	var xs, ys []float64
	reps := f.trials
	if f.ranTrials() < 2 {
		reps = f.reports()
	}
	for _, r := range reps {
		if r == nil || analysis.RanOutOfMemory(r) {
			continue
		}
		for _, g := range r.GPUs {
			if total == 0 || (g.TotalBytes > 0 && g.TotalBytes < total) {
				total = g.TotalBytes
			}
		}
		v, ok := f.valueOf(r)
		if p := stepPeak(r); ok && p != nil {
			xs, ys = append(xs, v), append(ys, float64(*p))
		}
	}
	if f.loPeak == 0 || total == 0 {
		return ptr(f.lo)
	}
	// The rise beyond the growth scales with the value; the growth is
	// bytes a step whatever the value (WholeRun.Allowance).
	room, margin := float64(f.loPeak)-f.res.Headroom*float64(total), 0.0
	if w := f.res.WholeRun; w != nil {
		margin = w.Fraction
		room -= w.Allowance(room)
	}
	avail := room / (1 + margin)
	var v float64
	newCurve := replay.NewNeedCurve
	if replay.IsBatchTag(f.o.by) {
		newCurve = replay.NewBatchNeedCurve
	}
	if c, err := newCurve(xs, ys); err == nil {
		v, _ = c.Solve(avail, replay.Pessimistic)
	} else {
		v = f.lo * avail / float64(f.loPeak) // one value: the need taken as proportional to it
	}
	v = math.Min(f.clamp(v), f.lo)
	if v < f.o.min || avail <= 0 {
		return nil
	}
	return ptr(v)
}

func (f *fitter) printResult() {
	r := f.res
	w := f.log
	fmt.Fprintln(w)
	s := func(v *float64) string {
		if v == nil {
			return "none"
		}
		return num(*v)
	}
	fmt.Fprintf(w, "largest that ran   %s=%s\n", r.By, s(r.LargestRan))
	fmt.Fprintf(w, "smallest that failed %s=%s\n", r.By, s(r.SmallestFailed))
	if r.Note != "" {
		fmt.Fprintf(w, "  %s\n", r.Note)
	}
	if wr := r.WholeRun; wr != nil {
		fmt.Fprintf(w, "whole run          %s\n", wr.Words)
	}
	fmt.Fprintf(w, "recommended        %s=%s (with %g %% headroom", r.By, s(r.Recommended), 100*r.Headroom)
	if wr := r.WholeRun; wr != nil {
		fmt.Fprintf(w, ", the whole run's rise %.1f %%", 100*wr.Fraction)
		if a := wr.AllowanceWords(); a != "" {
			fmt.Fprintf(w, " and %s", a)
		}
	}
	fmt.Fprintln(w, ")")
	if r.WholeRun != nil && r.WholeRun.BoundWords() != "" {
		fmt.Fprintf(w, "  %s\n", r.WholeRun.BoundWords())
	}
	fmt.Fprintf(w, "trials used        %d, %.1f s\n", r.TrialsUsed, r.Seconds)
}
