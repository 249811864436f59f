package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/fit"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
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
	history bool // fit --history (fithistory.go)
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
	f.BoolVar(&o.history, "history", false, "show each earlier fit's prediction against what its trials found, and how often predictions fell short (runs nothing)")
	f.DurationVar(&o.grace, "grace", 3*time.Second, "how long a trial has to exit after memrec asks it to, before its process group is killed")
	f.DurationVar(&o.rec.interval, "interval", 10*time.Millisecond, "sampling interval")
	f.StringVar(&o.rec.gpus, "gpus", "", "GPU indices to record, e.g. 0,2 (default: all)")
	f.BoolVar(&o.rec.procs, "procs", false, "also record per-process memory")
	f.BoolVar(&o.rec.torch, "torch", false, "load memrec's PyTorch probe into a Python command without changing it (its OOM marks; step marks still need memrec.step or a framework callback)")
	f.StringVar(&o.rec.source, "source", "nvml", "where memory is read: nvml, or sim for a simulated GPU (without a command, each trial is the simulated job at the value)")
	f.IntVar(&o.rec.simGPUs, "sim-gpus", 1, "with --source sim: number of simulated GPUs")
	return cmd
}

func runFit(ctx context.Context, o *fitOptions) error {
	if o.history {
		return runFitHistory(o)
	}
	if err := checkFitFlags(o); err != nil {
		return err
	}
	if err := fit.AdoptOrphans(); err != nil {
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
	opt := fit.Options{By: o.by, Steps: o.steps, Min: o.min, Max: o.max, Multiple: o.multiple, Headroom: headroom, ID: o.id, Grace: o.grace,
		Budget: storage.NewDecodeBudget(storage.DefaultDecodeBudget)} // one for the given runs and every trial
	s := fit.New(db, opt, o.launcher(gpus))
	log := o.rec.io.Out
	if o.json {
		log = o.rec.io.Err
	}
	s.Say = func(line string) { fmt.Fprintln(log, line) }
	s.OnTrial = func(t fit.Trial) { printTrial(log, o.by, t) }
	searchErr := o.given(db, s, opt.Budget)
	if searchErr == nil {
		searchErr = s.Run(ctx)
	}
	res := withSettings(db, s.Result(), log) // fitsettings.go
	if o.json {
		enc := json.NewEncoder(o.rec.io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		printResult(log, res)
	}
	if searchErr != nil {
		if errors.Is(searchErr, context.Canceled) {
			fmt.Fprintf(o.rec.io.Err, "memrec: fit interrupted; the %d trials so far are kept as runs (memrec runs)\n", len(res.Trials))
			return exitError{code: 130}
		}
		if len(res.Trials) == 0 {
			return searchErr
		}
		return fmt.Errorf("%w; the %d trials so far are kept as runs (memrec runs)", searchErr, len(res.Trials))
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
	case o.min <= 0 || !finiteF(o.min) || o.min > fit.Ceiling:
		return fmt.Errorf("--min %g: want a finite value above 0, at most %d", o.min, int64(fit.Ceiling))
	case o.max < 0 || !finiteF(o.max) || o.max > fit.Ceiling:
		return fmt.Errorf("--max %g: want a finite value above 0, at most %d (or 0: none given)", o.max, int64(fit.Ceiling))
	case o.max != 0 && o.max < o.min:
		return fmt.Errorf("--max %g is below --min %g (equal: try that one value)", o.max, o.min)
	case o.multiple < 0 || !finiteF(o.multiple):
		return fmt.Errorf("--multiple %g: want a value above 0", o.multiple)
	case o.by == "":
		return errors.New("--by: want a tag name, like batch_size")
	}
	return nil
}

// given analyses the runs --runs names and gives them to the search.
func (o *fitOptions) given(db *storage.DB, s *fit.Search, budget *storage.DecodeBudget) error {
	if len(o.runs) == 0 {
		return nil
	}
	var runs []storage.Run
	for _, ref := range o.runs {
		r, err := db.Run(ref)
		if err != nil {
			return fmt.Errorf("--runs: %w", err)
		}
		if _, ok := r.Tags[o.by]; !ok {
			return fmt.Errorf("--runs: run %q has no tag %s (tag it with memrec tag %s %s=VALUE)", r.Name, o.by, r.Name, o.by)
		}
		runs = append(runs, r)
	}
	reps, err := analyzeAll(db, runs, budget)
	if err == nil {
		err = s.Given(reps)
	}
	if err != nil {
		return fmt.Errorf("--runs: %w", err)
	}
	return nil
}

// launcher records each trial as record would: the command with {}
// replaced by the value (or, without one, the simulated job at it).
func (o *fitOptions) launcher(gpus []int) fit.Launcher {
	return func(run, value string, tags map[string]string) (recorder.Options, func() int, error) {
		r := o.rec
		r.name = run
		r.allocTrace = true // its requests, for the replay (ignored by a job without PyTorch)
		r.command = make([]string, len(o.command))
		for i, a := range o.command {
			r.command[i] = strings.ReplaceAll(a, "{}", value)
		}
		r.tags = []string{o.by + "=" + value} // the simulated job's shape, with --source sim
		now := time.Now()
		src, err := openSource(&r, now)
		if err != nil {
			return recorder.Options{}, nil, err
		}
		opts := recorderOptions(&r, src, now, gpus, tags)
		cleanup, err := probeEnv(&r, &opts)
		done := func() int {
			code := simExit(src)
			src.Close()
			cleanup()
			return code
		}
		if err != nil {
			done()
			return recorder.Options{}, nil, err
		}
		return opts, done, nil
	}
}

func finiteF(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// num writes a value as the command line gets it.
func num(v float64) string { return fit.Arg(v) }

// printTrial writes a trial's line.
func printTrial(w io.Writer, by string, t fit.Trial) {
	peak := "-"
	if t.StepPeakBytes != nil {
		peak = units.FormatBytes(*t.StepPeakBytes)
	}
	what := map[fit.Outcome]string{
		fit.Stopped:     fmt.Sprintf("ran %d steps, stopped", t.Steps),
		fit.Completed:   fmt.Sprintf("ran, exited 0 after %d steps", t.Steps),
		fit.OOM:         fmt.Sprintf("out of memory after %d steps", t.Steps),
		fit.Failed:      fmt.Sprintf("FAILED: exit %d after %d steps, no OOM", t.ExitCode, t.Steps),
		fit.Interrupted: "interrupted",
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
	fmt.Fprintf(w, "trial %d  %s=%-8s step peak %-10s %s%s  %.1f s\n", t.N, by, num(t.Value), peak, what, ranks, t.Seconds)
}

// printResult writes the search's answer.
func printResult(w io.Writer, r fit.Result) {
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
	printSettings(w, r)
}
