package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/units"
)

// analyzeSections are the parts of a GPU's full section that --section
// picks by name, in the order --full writes them.
var analyzeSections = []struct {
	name  string
	print []gpuPrinter
}{
	{"leak", []gpuPrinter{printLeak, printJob}},
	{"peaks", []gpuPrinter{printPeaks}},
	{"epochs", []gpuPrinter{printEpochTable, printEpochsNotInferred}},
	{"fragmentation", []gpuPrinter{printFragmentation, printMemory}},
	{"budget", []gpuPrinter{printBudgetParts}},
	{"remedies", []gpuPrinter{printRemedies}},
	{"ooms", []gpuPrinter{printOOMs}},
	{"sites", []gpuPrinter{printSites}},
}

// sectionNames lists the names --section takes.
func sectionNames() string {
	var n []string
	for _, s := range analyzeSections {
		n = append(n, s.name)
	}
	return strings.Join(n, ",")
}

// checkSections refuses a name --section does not know.
func checkSections(names []string) error {
	for _, n := range names {
		if !slices.ContainsFunc(analyzeSections, func(s struct {
			name  string
			print []gpuPrinter
		}) bool {
			return s.name == n
		}) {
			return fmt.Errorf("--section %q: no such section (want some of %s)", n, sectionNames())
		}
	}
	return nil
}

// printSections writes the run's header and, per GPU, the named sections.
func printSections(w io.Writer, rep *analysis.Report, names []string) {
	printRunHeader(w, rep)
	for _, g := range rep.GPUs {
		printGPUHeading(w, g)
		for _, s := range analyzeSections {
			if slices.Contains(names, s.name) {
				for _, p := range s.print {
					p(w, rep, g)
				}
			}
		}
	}
}

// summaryBuckets is the most rows the summary's epoch table has.
const summaryBuckets = 20

// printSummary writes what fits a screen: the run, then per GPU its
// verdict, its peak and what it is made of, the three remedies that free
// most and its OOMs, then the epochs of all GPUs in one table of at most
// summaryBuckets rows; and how to see the rest.
func printSummary(w io.Writer, rep *analysis.Report) {
	printRunHeader(w, rep)
	gpus := rep.GPUs
	if compact(rep) {
		printGPUTable(w, rep)
		gpus = notable(rep.GPUs)
	} else {
		printTogether(w, rep)
	}
	for _, g := range gpus {
		printGPUSummary(w, rep, g)
	}
	printEpochBuckets(w, gpus)
	fmt.Fprintf(w, "\nMore: --full for everything, --section %s for parts of it, --json for every figure.\n", sectionNames())
}

// printGPUSummary writes one GPU's few lines.
func printGPUSummary(w io.Writer, rep *analysis.Report, g analysis.GPUReport) {
	verdict := g.Leak.SentenceFor(g.Label())
	verdict = strings.TrimPrefix(strings.TrimPrefix(verdict, g.Label()+": "), g.Label()+" ")
	fmt.Fprintf(w, "\n%s (%s, %s): %s\n", g.Label(), g.Name, units.FormatBytes(g.TotalBytes), verdict)
	if line := peakLine(rep, g); line != "" {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if b := g.Budget; b != nil && len(b.Help) > 0 {
		help := slices.Clone(b.Help)
		slices.SortStableFunc(help, func(x, y budget.Remedy) int { return cmp.Compare(y.SavedBytes, x.SavedBytes) })
		fmt.Fprintln(w, "  what would help most (--section remedies for all and their assumptions):")
		for _, r := range help[:min(3, len(help))] {
			line := fmt.Sprintf("    %s: frees %s", r.Title, r.SavedWords())
			if r.LowersPeak {
				line += ", peak " + units.FormatBytes(r.PeakAfterBytes)
			}
			fmt.Fprintln(w, line)
		}
	}
	survived := 0
	for _, o := range g.OOMs {
		if o.Outcome == analysis.OOMSurvived {
			survived++
			continue
		}
		what := "OOM"
		if o.Outcome == analysis.OOMFatal {
			what = "fatal OOM"
		}
		fmt.Fprintf(w, "  %s at %s (epoch %s, step %s): %s\n", what, sinceStart(rep, o.TNS), optInt(o.Epoch), optInt(o.Step), messageHead(o.Message))
	}
	if survived > 0 {
		fmt.Fprintf(w, "  OOMs survived: %d\n", survived)
	}
}

// peakLine is the GPU's peak and its largest parts, from the budget at the
// peak where there is one, else the highest of its peaks.
func peakLine(rep *analysis.Report, g analysis.GPUReport) string {
	if b := g.Budget; b != nil {
		parts := slices.Clone(b.Parts)
		slices.SortStableFunc(parts, func(x, y budget.Slice) int { return cmp.Compare(y.Bytes, x.Bytes) })
		var top []string
		for _, p := range parts[:min(4, len(parts))] {
			if p.Bytes > 0 {
				top = append(top, fmt.Sprintf("%s %s", p.Part.Words(), units.FormatBytes(p.Bytes)))
			}
		}
		what := b.TotalWords()
		at := sinceStart(rep, b.TNS)
		if b.Step != nil {
			at += fmt.Sprintf(" (step %d)", *b.Step)
		}
		return fmt.Sprintf("peak %s %s at %s: %s", units.FormatBytes(b.TotalBytes), what, at, strings.Join(top, ", "))
	}
	var best *analysis.Peak
	for i, p := range g.Peaks {
		if best == nil || p.Bytes > best.Bytes {
			best = &g.Peaks[i]
		}
	}
	if best == nil {
		return ""
	}
	return fmt.Sprintf("peak %s %s at %s (epoch %s, step %s)", units.FormatBytes(best.Bytes), strings.ReplaceAll(best.What, "_", " "),
		sinceStart(rep, best.TNS), optInt(best.Epoch), optInt(best.Step))
}

func messageHead(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// epochDelta is a row's Δ in the series it is shown by: allocated where
// the GPU has allocator samples, else device used.
func epochDelta(e analysis.EpochDelta, allocated bool) *int64 {
	if allocated {
		return e.DeltaAllocatedBytes
	}
	return e.DeltaUsedBytes
}

// printEpochBuckets writes the GPUs' epochs side by side: the warm-up and
// the open epoch on rows of their own, the judged epochs between them in
// at most summaryBuckets rows, each the sum of its epochs' Δ; then each
// GPU's largest judged Δ.
func printEpochBuckets(w io.Writer, gpus []analysis.GPUReport) {
	type column struct {
		g         analysis.GPUReport
		rows      []analysis.EpochDelta
		allocated bool
	}
	var cols []column
	var label string
	n := 0
	for _, g := range gpus {
		rows, l := epochRows(g)
		if len(rows) == 0 {
			continue
		}
		allocated := slices.ContainsFunc(rows, func(e analysis.EpochDelta) bool { return e.DeltaAllocatedBytes != nil })
		cols, label, n = append(cols, column{g, rows, allocated}), l, max(n, len(rows))
		if len(cols) == 8 {
			break
		}
	}
	if len(cols) == 0 {
		return
	}
	// Rows by position: GPUs of one run share their epochs.
	type bucket struct {
		name   string
		lo, hi int // rows [lo, hi)
	}
	var buckets []bucket
	first, last := 0, n
	if e := cols[0].rows[0]; e.Warmup {
		buckets, first = append(buckets, bucket{epochName(e), 0, 1}), 1
	}
	var tail []bucket
	if e := cols[0].rows[len(cols[0].rows)-1]; e.Open && len(cols[0].rows) == n && n-1 >= first {
		tail, last = []bucket{{epochName(e), n - 1, n}}, n-1
	}
	per := max(1, (last-first+summaryBuckets-1)/summaryBuckets)
	for lo := first; lo < last; lo += per {
		hi := min(last, lo+per)
		name := fmt.Sprint(cols[0].rows[lo].Epoch)
		if hi-lo > 1 {
			name = fmt.Sprintf("%d–%d", cols[0].rows[lo].Epoch, cols[0].rows[hi-1].Epoch)
		}
		buckets = append(buckets, bucket{name, lo, hi})
	}
	buckets = append(buckets, tail...)
	fmt.Fprintf(w, "\n%ss (Δ summed over a row's epochs; %s):\n", label, deltaBasisWords(cols[0].rows))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t", label)
	for _, c := range cols {
		what := "Δ used"
		if c.allocated {
			what = "Δ alloc"
		}
		fmt.Fprintf(tw, "%s %s\t", c.g.Label(), what)
	}
	fmt.Fprintln(tw)
	for _, b := range buckets {
		fmt.Fprintf(tw, "%s\t", b.name)
		for _, c := range cols {
			var sum int64
			known := false
			for _, e := range c.rows[min(b.lo, len(c.rows)):min(b.hi, len(c.rows))] {
				if d := epochDelta(e, c.allocated); d != nil {
					sum, known = sum+*d, true
				}
			}
			if known {
				fmt.Fprintf(tw, "%s\t", units.FormatBytes(sum))
			} else {
				fmt.Fprint(tw, "n/a\t")
			}
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "largest\t")
	for _, c := range cols {
		var best *analysis.EpochDelta
		for i, e := range c.rows {
			d := epochDelta(e, c.allocated)
			if e.Judged() && d != nil && (best == nil || *d > *epochDelta(*best, c.allocated)) {
				best = &c.rows[i]
			}
		}
		if best == nil {
			fmt.Fprint(tw, "-\t")
		} else {
			fmt.Fprintf(tw, "%s at %d\t", units.FormatBytes(*epochDelta(*best, c.allocated)), best.Epoch)
		}
	}
	fmt.Fprintln(tw)
	tw.Flush()
}
