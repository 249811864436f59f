package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/units"
)

type analyzeOptions struct {
	*globals
	window   windowOptions
	json     bool
	full     bool
	sections []string
	// Profiles of the analysis, for tuning it on long runs.
	cpuProfile, memProfile string
}

func newAnalyzeCmd(g *globals) *cobra.Command {
	o := &analyzeOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "analyze RUN",
		Short: "Per-epoch deltas, leak verdict, fragmentation, peaks and OOM post-mortems of a run",
		Example: `  memrec analyze bs64
  memrec analyze bs64 --full
  memrec analyze bs64 --section epochs,remedies
  memrec analyze bs64 --json | jq '.gpus[].leak'
  memrec analyze bs64 --from epoch:2 --to epoch:3
  memrec analyze long-run --from 2h --to 2h1m`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return stoppedSaying(ctx, o.io.Err, runAnalyze(ctx, o, args[0]), "nothing was printed")
		},
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print one JSON object")
	cmd.Flags().BoolVar(&o.full, "full", false, "print everything: every GPU's peaks, epochs, allocator, budget, remedies with their assumptions, OOMs and sites")
	cmd.Flags().StringSliceVar(&o.sections, "section", nil, "print only these parts of each GPU's full section: "+sectionNames())
	addWindowFlags(cmd, &o.window)
	cmd.Flags().StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the analysis to this file")
	cmd.Flags().StringVar(&o.memProfile, "memprofile", "", "write a heap profile (after the analysis) to this file")
	_ = cmd.Flags().MarkHidden("cpuprofile")
	_ = cmd.Flags().MarkHidden("memprofile")
	return cmd
}

// analyzeRun opens the database and analyses one run, or the window of it.
func analyzeRun(g *globals, ref string, w windowOptions) (*analysis.Report, error) {
	db, r, err := openRun(g, ref, w)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	return analysis.Analyze(db, r, analysis.Options{})
}

// runAnalyze prints nothing when ctx is done before the analysis is.
func runAnalyze(ctx context.Context, o *analyzeOptions, ref string) error {
	if err := checkSections(o.sections); err != nil {
		return err
	}
	stop, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	var rep *analysis.Report
	err = untilDone(ctx, func() (err error) {
		rep, err = analyzeRun(o.globals, ref, o.window)
		return err
	})
	stop()
	if err == nil {
		err = writeHeapProfile(o.memProfile)
	}
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	switch {
	case o.full:
		printAnalysis(o.io.Out, rep)
	case len(o.sections) > 0:
		printSections(o.io.Out, rep, o.sections)
	default:
		printSummary(o.io.Out, rep)
	}
	return nil
}

// printAnalysis writes the text report: the run's header, then either every
// GPU's details or a table of all GPUs and the details of those with
// findings.
func printAnalysis(w io.Writer, rep *analysis.Report) {
	printRunHeader(w, rep)
	gpus := rep.GPUs
	if compact(rep) {
		printGPUTable(w, rep)
		gpus = notable(rep.GPUs)
		if len(gpus) > 0 {
			fmt.Fprintf(w, "\nDetails of the %d GPUs with findings (leak, OOM, allocation retries):\n", len(gpus))
		}
	} else {
		printTogether(w, rep)
	}
	for _, g := range gpus {
		printGPUDetails(w, rep, g)
	}
}

// printRunHeader writes the lines about the whole run: its name, span and
// state, tags, mark counts and notes.
func printRunHeader(w io.Writer, rep *analysis.Report) {
	state := "complete"
	if !rep.Complete {
		state = "incomplete (the recorder did not finish)"
	}
	if len(rep.Hosts) > 0 {
		job := ""
		if rep.Job != "" {
			job = fmt.Sprintf(", job %s", rep.Job)
		}
		fmt.Fprintf(w, "Run %s (id %d%s): %s, %d GPUs on %d hosts, %s\n", rep.Run, rep.RunID, job,
			units.FormatDuration(rep.DurationS), len(rep.GPUs), len(rep.Hosts), state)
	} else {
		fmt.Fprintf(w, "Run %s (id %d) on %s: %s, %d GPUs, %s\n", rep.Run, rep.RunID, rep.Host,
			units.FormatDuration(rep.DurationS), len(rep.GPUs), state)
	}
	if len(rep.Tags) > 0 {
		fmt.Fprintf(w, "Tags: %s\n", formatTags(rep.Tags))
	}
	fmt.Fprintf(w, "Marks: %d epochs, %d steps, %d events, %d OOMs", rep.Marks.Epochs, rep.Marks.Steps, rep.Marks.Events, rep.Marks.OOMs)
	if rep.StepTimeS != nil {
		fmt.Fprintf(w, "; %.1f ms per step", *rep.StepTimeS*1e3)
	}
	fmt.Fprintln(w)
	for _, n := range rep.Notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
}

// printGPUDetails writes one GPU's section: leak verdict, peaks, per-epoch
// table, allocator, job span, unseen memory, OOMs and allocation sites.
func printGPUDetails(w io.Writer, rep *analysis.Report, g analysis.GPUReport) {
	printGPUHeading(w, g)
	for _, p := range []gpuPrinter{printLeak, printPeaks, printEpochTable, printFragmentation, printJob, printEpochsNotInferred,
		printMemory, printBudgetParts, printRemedies, printOOMs, printSites} {
		p(w, rep, g)
	}
}

// gpuPrinter writes one part of a GPU's section.
type gpuPrinter func(io.Writer, *analysis.Report, analysis.GPUReport)

func printGPUHeading(w io.Writer, g analysis.GPUReport) {
	fmt.Fprintf(w, "\n== %s  %s  %s total\n", g.Label(), g.Name, units.FormatBytes(g.TotalBytes))
}

// printLeak writes the leak verdict and its fit.
func printLeak(w io.Writer, _ *analysis.Report, g analysis.GPUReport) {
	fmt.Fprintf(w, "Leak: %s\n", g.Leak.SentenceFor(g.Label()))
	if g.Leak.SlopeBytesPerStep != nil && g.Leak.CILowBytesPerStep != nil {
		fmt.Fprintf(w, "      slope %s/step, 95%% interval [%s, %s], p = %.2g, %d points after %d warm-up points\n",
			units.FormatBytes(int64(*g.Leak.SlopeBytesPerStep)), units.FormatBytes(int64(*g.Leak.CILowBytesPerStep)),
			units.FormatBytes(int64(*g.Leak.CIHighBytesPerStep)), *g.Leak.PValue, g.Leak.Points, g.Leak.SkippedWarmup)
	} else if g.Leak.SlopeBytesPerHour != nil {
		fmt.Fprintf(w, "      slope %s/hour, 95%% interval [%s, %s], p = %.2g, %d points after %d warm-up points\n",
			units.FormatBytes(int64(*g.Leak.SlopeBytesPerHour)), units.FormatBytes(int64(*g.Leak.CILowBytesPerHour)),
			units.FormatBytes(int64(*g.Leak.CIHighBytesPerHour)), *g.Leak.PValue, g.Leak.Points, g.Leak.SkippedWarmup)
	}
	if d, n := inferredGrowth(g); n > 0 && g.Leak.IsLeak() {
		fmt.Fprintf(w, "      per inferred epoch: Δ used median %s (%d epochs found in device memory, not marked)\n", units.FormatBytes(d), n)
	}
}

// printPeaks writes the table of peaks.
func printPeaks(w io.Writer, rep *analysis.Report, g analysis.GPUReport) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "Peak\tbytes\twhen\tepoch\tstep\tnear")
	for _, p := range g.Peaks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", p.What, units.FormatBytes(p.Bytes), sinceStart(rep, p.TNS), optInt(p.Epoch), optInt(p.Step), p.NearMark)
	}
	tw.Flush()
}

// epochRows are the rows of a GPU's epoch table: its marked epochs, else
// those inferred from device memory, else time slices; and their name.
func epochRows(g analysis.GPUReport) ([]analysis.EpochDelta, string) {
	switch {
	case len(g.Epochs) > 0:
		return g.Epochs, "Epoch"
	case len(g.InferredEpochs) > 0:
		return g.InferredEpochs, "Inferred epoch"
	case len(g.Intervals) > 0:
		return g.Intervals, "Slice"
	}
	return nil, ""
}

// epochName is an epoch row's number, with what keeps its Δ from being
// read as growth.
func epochName(e analysis.EpochDelta) string {
	switch {
	case e.Open:
		return fmt.Sprintf("%d (open)", e.Epoch)
	case e.Warmup:
		return fmt.Sprintf("%d (warm-up)", e.Epoch)
	}
	return fmt.Sprint(e.Epoch)
}

// printEpochTable writes a row per epoch (or inferred epoch, or slice).
func printEpochTable(w io.Writer, rep *analysis.Report, g analysis.GPUReport) {
	B := units.FormatBytesPtr
	rows, label := epochRows(g)
	if len(rows) == 0 {
		return
	}
	// Marked epochs are placed by their marks; inferred ones show where
	// they were found.
	inferred := label == "Inferred epoch"
	if inferred {
		fmt.Fprintf(w, "Epochs inferred from device memory, not marked: %s\n", g.InferredEpochBasis)
	}
	fmt.Fprintf(w, "%s figures: %s\n", label, deltaBasisWords(rows))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t", label)
	if inferred {
		fmt.Fprint(tw, "start\tend\t")
	}
	fmt.Fprintln(tw, "used start\tused end\tΔ used\tpeak used\talloc start\talloc end\tΔ alloc\tpeak alloc\t")
	for _, e := range rows {
		fmt.Fprintf(tw, "%s\t", epochName(e))
		if inferred {
			fmt.Fprintf(tw, "%s\t%s\t", sinceStart(rep, e.StartNS), sinceStart(rep, e.EndNS))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", B(e.UsedStartBytes), B(e.UsedEndBytes), B(e.DeltaUsedBytes),
			B(e.PeakUsedBytes), B(e.AllocatedStartBytes), B(e.AllocatedEndBytes), B(e.DeltaAllocatedBytes), B(e.PeakAllocatedBytes))
	}
	tw.Flush()
}

// deltaBasisWords says what the rows' start and end were read from, the
// basis of most rows first.
func deltaBasisWords(rows []analysis.EpochDelta) string {
	words := map[analysis.DeltaBasis]string{
		analysis.DeltaStepFloors:  "floors between steps",
		analysis.DeltaTimeFloors:  "the lowest sample near each end",
		analysis.DeltaFloorBounds: "the floors where each was found",
		analysis.DeltaBounds:      "the samples at each bound",
	}
	count := map[analysis.DeltaBasis]int{}
	var seen []analysis.DeltaBasis
	for _, e := range rows {
		if _, ok := words[e.DeltaBasis]; ok {
			if count[e.DeltaBasis] == 0 {
				seen = append(seen, e.DeltaBasis)
			}
			count[e.DeltaBasis]++
		}
	}
	slices.SortStableFunc(seen, func(x, y analysis.DeltaBasis) int { return count[y] - count[x] })
	out := "start and end at the samples at each bound"
	for i, b := range seen {
		if i == 0 {
			out = "start and end at " + words[b]
		} else {
			out += fmt.Sprintf(", %d at %s", count[b], words[b])
		}
	}
	return out + "; open and warm-up epochs are not growth"
}

// printFragmentation writes the allocator's cached and free memory.
func printFragmentation(w io.Writer, _ *analysis.Report, g analysis.GPUReport) {
	if f := g.Fragmentation; f != nil {
		fmt.Fprintf(w, "Allocator memory cached and free (reserved − allocated)/reserved, what empty_cache() would return: mean %.1f%%, p95 %.1f%%, max %.1f%%, final %.1f%%\n",
			100*f.Mean, 100*f.P95, 100*f.Max, 100*f.Final)
		if f.PeakWasteMean != nil {
			fmt.Fprintf(w, "Never used even at the step's peak (1 − peak allocated/reserved): mean %.1f%%, max %.1f%%; in inactive split blocks: mean %.1f%%\n",
				100**f.PeakWasteMean, 100**f.PeakWasteMax, 100*f.InactiveSplitMean)
		} else {
			fmt.Fprintf(w, "In inactive split blocks: mean %.1f%%\n", 100*f.InactiveSplitMean)
		}
	} else {
		fmt.Fprintln(w, "Allocator memory: unknown (no allocator samples)")
	}
}

// printJob writes the job's span and the step time read from the device.
func printJob(w io.Writer, rep *analysis.Report, g analysis.GPUReport) {
	if j := g.JobSpan; j != nil {
		how := "where its processes hold memory"
		if j.Basis == "device_rise_fall" {
			how = "from the first sustained rise of device memory to its final fall"
		}
		fmt.Fprintf(w, "Job: %s to %s (%s); start-up and teardown are left out of the leak fit\n", sinceStart(rep, j.FromNS), sinceStart(rep, j.ToNS), how)
	}
	if g.InferredStepTimeS != nil {
		fmt.Fprintf(w, "Step time without step marks: %.3f s, inferred: %s\n", *g.InferredStepTimeS, g.InferredStepBasis)
	}
}

func printEpochsNotInferred(w io.Writer, _ *analysis.Report, g analysis.GPUReport) {
	if g.EpochsNotInferred != "" {
		fmt.Fprintf(w, "Epochs without epoch marks: none inferred: %s\n", g.EpochsNotInferred)
	}
}

// printMemory writes memory PyTorch does not see, the allocator's
// segments, its trace and its retries.
func printMemory(w io.Writer, _ *analysis.Report, g analysis.GPUReport) {
	if u := g.Unseen; u != nil {
		fmt.Fprintf(w, "Memory PyTorch does not see (device used − reserved, samples at most %s apart): median %s, max %s, final %s\n",
			units.FormatDuration(float64(u.ToleranceNS)/1e9), units.FormatBytes(u.MedianBytes), units.FormatBytes(u.MaxBytes), units.FormatBytes(u.FinalBytes))
	}
	if l := g.LargestSegmentBytes; l != nil {
		most := ""
		if g.MostSegments != nil {
			most = fmt.Sprintf("; at most %d segments at once", *g.MostSegments)
		}
		fmt.Fprintf(w, "Largest allocator segment with room free: %s, the largest request that comes and goes (what the allocator may strand at the limit: compare --by adds two of them)%s\n",
			units.FormatBytes(*l), most)
	}
	if tr := g.AllocTrace; tr != nil {
		fmt.Fprintf(w, "Allocator trace: %d requests from CUDA's start over %d steps (compare --by of runs at several values replays the caching allocator over them)\n",
			g.AllocTraceRequests, tr.Steps)
	}
	if g.AllocRetries != nil && *g.AllocRetries > 0 {
		fmt.Fprintf(w, "Warning: the allocator retried %d allocations (freed its cache to satisfy them): memory is tight\n", *g.AllocRetries)
	}
	printCounters(w, g)
}

// printCounters writes a line for each allocator counter that counted
// anything: its total, its rate a step after the warm-up, and what it
// means (the field table's help).
func printCounters(w io.Writer, g analysis.GPUReport) {
	for _, c := range g.Counters {
		if c.Total == 0 {
			continue
		}
		rate := ""
		if c.PerStep != nil {
			rate = fmt.Sprintf(" (%.1f a step after the warm-up, over %d steps)", *c.PerStep, c.Steps)
		}
		fmt.Fprintf(w, "Allocator %s: %d%s. %s\n", c.Name, c.Total, rate, c.Help)
	}
}

func printBudgetParts(w io.Writer, rep *analysis.Report, g analysis.GPUReport) {
	if g.Budget != nil {
		printBudget(w, rep, g.Budget)
	}
}

func printRemedies(w io.Writer, _ *analysis.Report, g analysis.GPUReport) {
	if g.Budget != nil {
		printHelp(w, g.Budget)
	}
}

func printSites(w io.Writer, rep *analysis.Report, g analysis.GPUReport) {
	if g.Where != nil {
		printWhere(w, rep, g.Where, 5)
	}
}

// inferredGrowth is the median change of device used over a GPU's
// inferred epochs (when it has no marked ones), and how many had one.
func inferredGrowth(g analysis.GPUReport) (int64, int) {
	if len(g.Epochs) > 0 {
		return 0, 0
	}
	var d []int64
	for _, e := range g.InferredEpochs {
		if e.DeltaUsedBytes != nil {
			d = append(d, *e.DeltaUsedBytes)
		}
	}
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	return d[len(d)/2], len(d)
}

// printOOMs writes the post-mortem of the OOMs that ended the job (or
// whose outcome is unknown) and one line for those it survived.
func printOOMs(w io.Writer, rep *analysis.Report, g analysis.GPUReport) {
	B := units.FormatBytesPtr
	survived := 0
	for _, o := range g.OOMs {
		if o.Outcome == analysis.OOMSurvived {
			survived++
		}
	}
	if survived > 0 {
		fmt.Fprintf(w, "OOMs survived: %d (the job went on after each: fallbacks such as cuDNN choosing a smaller workspace, or errors the script caught)\n", survived)
	}
	for _, o := range g.OOMs {
		if o.Outcome == analysis.OOMSurvived {
			continue
		}
		what := "OOM"
		if o.Outcome == analysis.OOMFatal {
			what = "Fatal OOM"
		}
		fmt.Fprintf(w, "%s at %s (epoch %s, step %s): %s\n", what, sinceStart(rep, o.TNS), optInt(o.Epoch), optInt(o.Step), o.Message)
		fmt.Fprintf(w, "  %s\n", o.OutcomeReason)
		fmt.Fprintf(w, "  at the OOM (samples at most %s from it): used %s, allocated %s, reserved %s", units.FormatDuration(float64(o.PairToleranceNS)/1e9), B(o.UsedBytes), B(o.AllocatedBytes), B(o.ReservedBytes))
		if o.Fragmentation != nil {
			fmt.Fprintf(w, ", cached and free %.1f%%", 100**o.Fragmentation)
		}
		if o.UnseenBytes != nil {
			fmt.Fprintf(w, ", not seen by PyTorch %s", B(o.UnseenBytes))
		}
		fmt.Fprintln(w)
		for _, why := range o.LeftOut {
			fmt.Fprintf(w, "  left out: %s\n", why)
		}
		if o.ShortBytes != nil {
			where := "on the device"
			if o.ProcessLimitBytes != nil {
				where = "within the process's limit of " + B(o.ProcessLimitBytes)
			}
			fmt.Fprintf(w, "  asked for %s with %s free %s: %s short\n", B(o.RequestedBytes), B(o.FreeBytes), where, B(o.ShortBytes))
		}
		if o.CacheWouldHelp != nil {
			if *o.CacheWouldHelp {
				fmt.Fprintf(w, "  the allocator held %s cached and free: with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or torch.cuda.empty_cache() before this step) the request would have fitted\n", B(o.CachedFreeBytes))
			} else {
				fmt.Fprintf(w, "  the allocator held only %s cached and free: expandable_segments or empty_cache() would not have made room\n", B(o.CachedFreeBytes))
			}
		}
		for _, l := range analysis.WhatIfLines(o) {
			fmt.Fprintf(w, "  %s\n", l)
		}
		for _, l := range analysis.CauseLines(o) {
			fmt.Fprintf(w, "  %s\n", l)
		}
		if o.FittingBatch != nil {
			b := strconv.FormatFloat(*o.FittingBatch, 'f', -1, 64)
			if o.FitKind == analysis.FitEstimate {
				fmt.Fprintf(w, "  batch_size %s would fit (from this run's per-step peak)\n", b)
			} else {
				fmt.Fprintf(w, "  batch_size at most %s: an upper bound, not a batch known to fit. No step completed, so the step's need is known only from below (allocated + the request); the batch that fits is smaller, by what the rest of the step would have allocated. Record a smaller batch and use memrec compare --by batch_size\n", b)
			}
		}
		if o.Budget != nil {
			fmt.Fprintf(w, "  %s\n", o.Budget.Words)
		}
		if o.LargestGrowth != nil {
			fmt.Fprintf(w, "  largest growth in the steps before: %s", units.FormatBytes(*o.LargestGrowth))
			if o.LargestGrowthAt != nil {
				fmt.Fprintf(w, " at step %d", *o.LargestGrowthAt)
			}
			fmt.Fprintln(w)
		}
		if len(o.Holders) > 0 {
			fmt.Fprintln(w, "  largest holders at the OOM:")
			printSiteFigures(w, "    ", o.Holders, 5)
		}
		if o.Summary != "" {
			fmt.Fprintf(w, "  allocator summary:\n    %s\n", strings.ReplaceAll(strings.TrimSpace(o.Summary), "\n", "\n    "))
		}
	}
}

func sinceStart(rep *analysis.Report, t int64) string {
	return units.FormatSince(float64(t-rep.StartNS) / 1e9)
}

func optInt(v *int) string {
	if v == nil {
		return "-"
	}
	return fmt.Sprint(*v)
}

// compact says whether the GPUs are too many for a section each: a merged
// run, or more than 8 GPUs, gets a table of all and sections for those
// with findings.
func compact(rep *analysis.Report) bool { return len(rep.Hosts) > 0 || len(rep.GPUs) > 8 }

// notable are the GPUs with something to explain.
func notable(gpus []analysis.GPUReport) []analysis.GPUReport {
	var out []analysis.GPUReport
	for _, g := range gpus {
		if g.Leak.Judgement().Grows() || len(g.OOMs) > 0 || g.AllocRetries != nil && *g.AllocRetries > 0 {
			out = append(out, g)
		}
	}
	return out
}

// printTogether prints what the run's GPUs show together.
func printTogether(w io.Writer, rep *analysis.Report) {
	// One GPU, or GPUs alike, have no imbalance to tell.
	if im := rep.Imbalance; im != nil && im.MaxGPU != im.MinGPU && im.MaxBytes != im.MinBytes {
		fmt.Fprintf(w, "Imbalance: peak %s across ranks max/min %.2f (max %s on %s, min %s on %s)\n", im.Basis, im.Ratio,
			units.FormatBytes(im.MaxBytes), im.MaxGPU, units.FormatBytes(im.MinBytes), im.MinGPU)
	}
	if wg := rep.Worst; wg != nil {
		fmt.Fprintf(w, "Worst GPU: %s: %s\n", wg.Label, wg.Reason)
	}
}

// printGPUTable prints the per-host summaries and one line per GPU.
func printGPUTable(w io.Writer, rep *analysis.Report) {
	B := units.FormatBytesPtr
	printTogether(w, rep)
	if len(rep.Hosts) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "Host\tGPUs\tclock offset\tpeak used\ton\tpeak alloc\tleaking\tOOMs")
		for _, h := range rep.Hosts {
			off := fmt.Sprintf("%+.3f s", float64(h.OffsetNS)/1e9)
			if !h.Aligned {
				off = "not aligned"
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%d\t%d\n", h.Host, h.GPUs, off, B(h.PeakUsedBytes), h.PeakUsedGPU, B(h.PeakAllocatedBytes), h.Leaks, h.OOMs)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tpeak used\tpeak alloc\tstep peak\tleak\tfrag mean")
	for _, g := range rep.GPUs {
		leak := strings.ReplaceAll(g.Leak.Judgement().String(), "_", " ")
		if g.Leak.IsLeak() && g.Leak.SlopeBytesPerStep != nil {
			leak = fmt.Sprintf("LEAK %s/step", units.FormatBytes(int64(*g.Leak.SlopeBytesPerStep)))
		} else if g.Leak.IsLeak() && g.Leak.SlopeBytesPerHour != nil {
			leak = fmt.Sprintf("LEAK %s/hour", units.FormatBytes(int64(*g.Leak.SlopeBytesPerHour)))
		}
		frag := "n/a"
		if g.Fragmentation != nil {
			frag = fmt.Sprintf("%.1f%%", 100*g.Fragmentation.Mean)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", g.Label(), B(g.PeakUsedBytes), B(g.PeakAllocatedBytes), B(g.PeakStepBytes), leak, frag)
	}
	tw.Flush()
}
