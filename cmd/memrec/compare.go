package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/report"
	"github.com/memrec/memrec/storage"
)

type compareOptions struct {
	reportOptions
	baseline string
	align    string
	json     bool
	by       string
	headroom string
}

func newCompareCmd(g *globals) *cobra.Command {
	o := &compareOptions{reportOptions: reportOptions{globals: g}}
	cmd := &cobra.Command{
		Use:   "compare RUN RUN... | compare --by TAG [RUN...]",
		Short: "Compare runs side by side, or fit peak memory against a numeric tag",
		Long: `Compare runs: peaks, steady-state memory, per-epoch growth, leak verdicts,
fragmentation and time per step, each with its ratio to the baseline (the first
run unless --baseline), and overlay charts aligned by step, epoch or time.

With --by TAG, what the job needs is projected against a numeric tag (batch
size, sequence length) over the given runs, or over every run that has the tag:
its per-step peak allocated (peak device memory without the probe), plus what
the allocator may strand at the limit (two of its largest segments where the
probe measures them, else 40 % of the peak), plus what PyTorch
does not see. A run that exited with an error before its first step is left
out, and a note says so. The
largest value that still fits on the GPU with --headroom is stated, with the
interval of the projection and how far it reaches.`,
		Example: `  memrec compare bs64 bs64-amp bs64-ckpt -o cmp
  memrec compare --by batch_size --headroom 5%
  memrec compare bs32 bs64 --json | jq '.runs[] | {run, peak_used_ratio}'`,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			err := profiled(o.cpuProfile, func() error { return runCompare(ctx, o, args) })
			return stoppedSaying(ctx, o.io.Err, err, "no comparison folder was written")
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.baseline, "baseline", "", "run the ratios are taken against (default: the first)")
	f.StringVar(&o.align, "align", "step", "overlay charts aligned by step, epoch or time")
	f.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	f.StringVar(&o.by, "by", "", "fit peak memory against this numeric tag")
	f.StringVar(&o.headroom, "headroom", "5%", "with --by: memory to keep free, as a percentage of the GPU")
	addReportFlags(cmd, &o.reportOptions, "")
	addWindowFlags(cmd, &o.window)
	addCPUProfileFlag(cmd, &o.cpuProfile)
	return cmd
}

func parseHeadroom(s string) (float64, error) {
	v, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "%")), 64)
	if err != nil || v < 0 || v >= 100 {
		return 0, fmt.Errorf("--headroom %q: want a percentage from 0 to 99, like 5%%", s)
	}
	return v / 100, nil
}

// runCompare prints and writes nothing when ctx is done before the runs
// are analysed and fitted, and stops at ctx wherever it is after: it
// prints only while ctx is not done, and -o's folder is made aside and
// renamed into place only if ctx is still not done (report.WriteCompare
// with the Context), so a late signal leaves no folder half-written.
func runCompare(ctx context.Context, o *compareOptions, refs []string) error {
	headroom, err := parseHeadroom(o.headroom)
	if err != nil {
		return err
	}
	var c *compare.Comparison
	if err := untilDone(ctx, func() (err error) {
		c, err = compareAll(o, refs, headroom)
		return err
	}); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if o.json {
		if err := printCompareJSON(o.io.Out, c); err != nil {
			return err
		}
	} else {
		printCompare(o.io.Out, c)
	}
	if o.out == "" {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	var path string
	if err := untilDone(ctx, func() (err error) {
		path, err = report.WriteCompare(o.out, c, report.Options{Width: o.width, Height: o.height, PNGOnly: o.pngOnly, Context: ctx})
		return err
	}); err != nil {
		if ctx.Err() != nil {
			return err
		}
		return outputError(err)
	}
	if !o.json {
		fmt.Fprintf(o.io.Out, "comparison written: %s\n", path)
	}
	return nil
}

// compareAll analyses the runs and compares them (and fits them by --by).
func compareAll(o *compareOptions, refs []string, headroom float64) (*compare.Comparison, error) {
	db, err := o.openRead()
	if err != nil {
		return nil, err
	}
	defer db.Close()
	runs, err := compareRuns(o, db, refs)
	if err != nil {
		return nil, err
	}
	reps, err := analyzeAll(db, runs, storage.NewDecodeBudget(storage.DefaultDecodeBudget))
	if err != nil {
		return nil, err
	}
	c, err := compare.Compare(reps, o.baseline, compare.Align(o.align))
	switch {
	case errors.Is(err, compare.ErrBadAlign):
		return nil, fmt.Errorf("--align %w", err)
	case errors.Is(err, compare.ErrUnknownBaseline):
		return nil, fmt.Errorf("--baseline %w", err)
	case err != nil:
		return nil, err
	}
	if o.by != "" {
		err := compare.FitByTag(c, o.by, headroom)
		switch {
		case errors.Is(err, compare.ErrNoTag):
			return nil, fmt.Errorf("--by %s: %w (tag it with memrec tag RUN %s=VALUE)", o.by, err, o.by)
		case err != nil:
			return nil, fmt.Errorf("--by %s: %w", o.by, err)
		}
	}
	return c, nil
}

// compareRuns returns the runs named by refs, or with none named those
// that carry the --by tag, each cut to the window asked for.
func compareRuns(o *compareOptions, db *storage.DB, refs []string) ([]storage.Run, error) {
	var runs []storage.Run
	if len(refs) == 0 {
		if o.by == "" {
			return nil, errors.New("name at least two runs to compare (or use --by TAG)")
		}
		all, err := db.Runs()
		if err != nil {
			return nil, err
		}
		for _, r := range all {
			if _, ok := r.Tags[o.by]; ok {
				runs = append(runs, r)
			}
		}
		if len(runs) < 2 {
			return nil, fmt.Errorf("--by %s: %d runs in %s have that tag; at least two are needed", o.by, len(runs), db.Path())
		}
	} else {
		for _, ref := range refs {
			r, err := db.Run(ref)
			if err != nil {
				return nil, err
			}
			runs = append(runs, r)
		}
	}
	if len(runs) < 2 {
		return nil, errors.New("name at least two runs to compare")
	}
	for i := range runs {
		var err error
		if runs[i], err = o.window.apply(db, runs[i]); err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// analyzeAll analyses the runs in parallel. Analyze already spreads a run's
// GPUs over the cores, so runs go in parallel only as far as cores are left:
// two 8-GPU runs one after the other, ten 1-GPU runs two at a time on two
// cores. That keeps memory to one run's analyses in flight at a time. The
// runs share budget, the command's.
func analyzeAll(db *storage.DB, runs []storage.Run, budget *storage.DecodeBudget) ([]*analysis.Report, error) {
	reps := make([]*analysis.Report, len(runs))
	errs := make([]error, len(runs))
	gpus := 1
	for _, r := range runs {
		gpus = max(gpus, len(r.GPUs))
	}
	sem := make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/gpus))
	var wg sync.WaitGroup
	for i, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			reps[i], errs[i] = analysis.Analyze(db, r, analysis.Options{Budget: budget})
		}()
	}
	wg.Wait()
	return reps, errors.Join(errs...)
}

// compareJSON is `memrec compare --json`: the comparison, with the by-tag
// fit's keys at the top level as well.
type compareJSON struct {
	*compare.Comparison
	By              string      `json:"by,omitempty"`
	Fit             *replay.Fit `json:"fit,omitempty"`
	MaxFittingValue *float64    `json:"max_fitting_value,omitempty"`
}

func printCompareJSON(w io.Writer, c *compare.Comparison) error {
	out := compareJSON{Comparison: c}
	if c.By != nil {
		out.By, out.Fit, out.MaxFittingValue = c.By.Tag, &c.By.Fit, c.By.MaxFittingValue
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func printCompare(w io.Writer, c *compare.Comparison) {
	B := units.FormatBytesPtr
	R := func(r *float64) string {
		if r == nil {
			return ""
		}
		return fmt.Sprintf("×%.2f", *r)
	}
	fmt.Fprintf(w, "Baseline: %s (each run's figures are its worst GPU's)\n", c.Baseline)
	for _, n := range c.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tTAGS\tGPUS\tPEAK USED\t\tPEAK ALLOC\t\tSTEADY\t\tΔ/EPOCH\tLEAK\tSLOPE/STEP\tCACHED FREE\tSTEP TIME\t")
	for _, s := range c.Runs {
		slope, frag, st := "-", "-", "-"
		if s.SlopeBytesPerStep != nil {
			slope = units.FormatBytes(int64(*s.SlopeBytesPerStep))
		}
		if s.FragmentationMean != nil {
			frag = fmt.Sprintf("%.1f%%", 100**s.FragmentationMean)
		}
		if s.StepTimeS != nil {
			st = fmt.Sprintf("%.1f ms %s", *s.StepTimeS*1e3, R(s.StepTimeRatio))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", s.Run, formatTags(s.Tags), s.GPUs,
			B(s.PeakUsedBytes), R(s.PeakUsedRatio), B(s.PeakAllocatedBytes), R(s.PeakAllocatedRatio),
			B(s.SteadyBytes), R(s.SteadyRatio), B(s.EpochDeltaBytes), s.LeakKind, slope, frag, st)
	}
	tw.Flush()
	printAcrossGPUs(w, c.Runs)
	printBudgets(w, c.Runs)
	if b := c.By; b != nil {
		fmt.Fprintf(w, "\nPeak device memory by %s: %s per unit + %s (R² %.4f, %d runs)\n", b.Tag,
			units.FormatBytes(int64(b.Fit.SlopeBytesPerUnit)), units.FormatBytes(int64(b.Fit.InterceptBytes)), b.Fit.R2, len(b.Points))
		if f := b.NeedFit; f != nil {
			fmt.Fprintf(w, "Per-step peak allocated by %s: %s per unit + %s (R² %.4f)\n", b.Tag,
				units.FormatBytes(int64(f.SlopeBytesPerUnit)), units.FormatBytes(int64(f.InterceptBytes)), f.R2)
		}
		fmt.Fprintln(w, b.Statement)
		fmt.Fprintf(w, "  made from %s\n", b.BasisWords)
		if b.IntervalWords != "" {
			fmt.Fprintf(w, "  %s\n", b.IntervalWords)
		}
		if s := compare.LimitBySettingWords(b); s != "" {
			fmt.Fprintf(w, "  %s\n", s)
		}
		if b.MaxFittingValueNoHeadroom != nil {
			runs := make([]string, len(b.Points))
			for i, p := range b.Points {
				runs[i] = p.Run
			}
			fmt.Fprintf(w, "  a projection, not a trial: %s finds the limit by running the job\n", fitLine(b.Tag, runs, c.Runs))
			if b.Basis == "step_peak_allocated" {
				fmt.Fprintln(w, "  with allocator traces in the runs at the two largest values (memrec record's default for PyTorch, as in memrec fit's trials; these have none: --alloc-trace=false, an older memrec, or a probe note says why), the caching allocator is replayed over their requests instead of bounded")
			}
		}
		if len(b.Help) > 0 {
			from := "the runs' need curve"
			if b.Basis == "allocator_replay" {
				from = "the allocator replayed"
			}
			fmt.Fprintf(w, "What would help run %q, each batch that would then fit from %s:\n", b.HelpRun, from)
			for i, h := range (&budget.Budget{Help: b.Help}).HelpWords(len(b.Help)) {
				fmt.Fprintf(w, "  %d. %s\n", i+1, h)
			}
		}
	}
}

// printAcrossGPUs says, for each run of several GPUs, which GPU to look at
// first and how far apart its ranks' peaks are.
func printAcrossGPUs(w io.Writer, runs []compare.RunSummary) {
	first := true
	for _, s := range runs {
		if s.GPUs < 2 {
			continue
		}
		if first {
			fmt.Fprintln(w, "\nAcross each run's GPUs:")
			first = false
		}
		where := fmt.Sprintf("%d GPUs", s.GPUs)
		if s.Hosts > 0 {
			where += fmt.Sprintf(" on %d hosts", s.Hosts)
		}
		im := "-"
		if s.Imbalance != nil {
			im = fmt.Sprintf("%.2f", *s.Imbalance)
		}
		fmt.Fprintf(w, "  %s: %s; imbalance max/min %s; worst GPU %s: %s\n", s.Run, where, im, s.WorstLabel, s.WorstReason)
	}
}

// fitLine is the memrec fit that tries compare --by's projection of runs:
// the simulated job's where every run is the simulator's (tag source=sim,
// on as many GPUs as they had), else the user's command.
func fitLine(tag string, runs []string, all []compare.RunSummary) string {
	by := map[string]compare.RunSummary{}
	for _, r := range all {
		by[r.Run] = r
	}
	sim, gpus := len(runs) > 0, 0
	for _, name := range runs {
		r := by[name]
		sim = sim && r.Tags["source"] == "sim"
		gpus = max(gpus, r.GPUs)
	}
	if !sim {
		return fmt.Sprintf("memrec fit --by %s --runs %s -- COMMAND ... {}", tag, strings.Join(runs, ","))
	}
	line := "memrec fit --source sim"
	if gpus > 1 {
		line += fmt.Sprintf(" --sim-gpus %d", gpus)
	}
	if tag != "batch_size" {
		line += " --by " + tag
	}
	return line + " --runs " + strings.Join(runs, ",")
}
