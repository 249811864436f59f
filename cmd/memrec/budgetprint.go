package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/analysis/units"
)

// printBudget writes "Budget at the peak" of one GPU.
func printBudget(w io.Writer, rep *analysis.Report, b *budget.Budget) {
	where := []string{sinceStart(rep, b.TNS)}
	if b.Step != nil {
		where = append([]string{fmt.Sprintf("step %d", *b.Step)}, where...)
	}
	if b.Epoch != nil {
		where = append(where, fmt.Sprintf("epoch %d", *b.Epoch))
	}
	total := b.TotalWords()
	fmt.Fprintf(w, "Budget at the peak (%s; %s %s):\n", strings.Join(where, ", "), total, units.FormatBytes(b.TotalBytes))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range b.Parts {
		fmt.Fprintf(tw, "  %s\t%s\t%5.1f %%\t%s\n", p.Part.Words(), units.FormatBytes(p.Bytes), 100*p.Share, p.Detail)
	}
	if b.UnseenWhy != "" {
		fmt.Fprintf(tw, "  %s\tnot known\t\t%s\n", budget.PartUnseen.Words(), b.UnseenWhy)
	}
	fmt.Fprintf(tw, "  = %s\t%s\t\t\n", total, units.FormatBytes(b.TotalBytes))
	tw.Flush()
	if b.LeftOverBytes != 0 {
		fmt.Fprintf(w, "  left over: %s (see the notes)\n", units.FormatBytes(b.LeftOverBytes))
	}
	if b.Watched {
		fmt.Fprintf(w, "  model: %s (%s trainable), %s, optimizer %s, autocast %s\n", budget.FormatCount(b.ParamCount),
			strings.TrimSuffix(budget.FormatCount(b.Trainable), " parameters"), orDash(b.DType), orDash(b.Optimizer), b.Autocast)
	}
	fmt.Fprintf(w, "  basis: %s\n", b.Basis)
	for _, n := range b.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if b.FitsBatch != nil {
		fmt.Fprintf(w, "  as it runs, a batch of %s would fit (batch_size %s now)\n", strconv.FormatFloat(*b.FitsBatch, 'f', -1, 64), strconv.FormatFloat(b.Batch, 'f', -1, 64))
	}
}

// printHelp writes "What would help" of one GPU, an assumption once.
func printHelp(w io.Writer, b *budget.Budget) {
	if len(b.Help) > 0 {
		fmt.Fprintf(w, "What would help, by what it frees at the peak (a saving of allocated memory assumes %s):\n", budget.HelpAssumes)
	}
	said := map[string]bool{} // an assumption is written once
	for i, r := range b.Help {
		line := fmt.Sprintf("  %d. %s: frees %s", i+1, r.Title, r.SavedWords())
		if r.LowersPeak {
			line += fmt.Sprintf(", peak %s (allocated %s)", units.FormatBytes(r.PeakAfterBytes), units.FormatBytes(r.PeakAllocatedAfterBytes))
		}
		switch {
		case r.FitsBatch == nil:
		case r.Kind == budget.RemedyAccumulation:
			line += fmt.Sprintf("; an effective batch of %s would fit (%s)", strconv.FormatFloat(*r.FitsBatch, 'f', -1, 64), r.FitsWhy)
		default:
			line += fmt.Sprintf("; batch %s would fit", strconv.FormatFloat(*r.FitsBatch, 'f', -1, 64))
		}
		fmt.Fprintln(w, line)
		fmt.Fprintf(w, "     %s\n", r.Basis)
		for _, a := range r.Assumptions {
			if !said[a] {
				said[a] = true
				fmt.Fprintf(w, "     assumes %s\n", a)
			}
		}
	}
	for _, s := range b.Skipped {
		fmt.Fprintf(w, "  not applicable: %s\n", s)
	}
	for _, m := range b.Missing {
		fmt.Fprintf(w, "  missing: %s\n", m)
	}
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printBudgets writes the runs' budgets at the peak side by side: a row per
// part, a column per run (its worst GPU's), and each run's first remedy.
func printBudgets(w io.Writer, runs []compare.RunSummary) {
	var have []compare.RunSummary
	for _, r := range runs {
		if r.Budget != nil {
			have = append(have, r)
		}
	}
	if len(have) == 0 {
		return
	}
	var order []budget.Part
	seen := map[budget.Part]bool{}
	unknown := false // a run whose unseen part is not known still gets its row
	for _, r := range have {
		unknown = unknown || r.Budget.UnseenWhy != ""
	}
	for _, r := range have {
		for _, p := range r.Budget.Parts {
			if !seen[p.Part] {
				seen[p.Part] = true
				order = append(order, p.Part)
			}
		}
	}
	if unknown && !seen[budget.PartUnseen] {
		order = append(order, budget.PartUnseen)
	}
	fmt.Fprintln(w, "\nBudget at the peak (each run's worst GPU):")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "\t")
	for _, r := range have {
		fmt.Fprintf(tw, "%s\t", r.Run)
	}
	fmt.Fprintln(tw)
	for _, part := range order {
		fmt.Fprintf(tw, "%s\t", part.Words())
		for _, r := range have {
			if v, ok := r.Budget.Part(part); ok {
				fmt.Fprintf(tw, "%s\t", units.FormatBytes(v))
			} else if part == budget.PartUnseen && r.Budget.UnseenWhy != "" {
				fmt.Fprint(tw, "not known\t")
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprint(tw, "= total\t")
	for _, r := range have {
		fmt.Fprintf(tw, "%s\t", units.FormatBytes(r.Budget.TotalBytes))
	}
	fmt.Fprintln(tw)
	tw.Flush()
	for _, r := range have {
		if r.Budget.UnseenWhy != "" {
			fmt.Fprintf(w, "  %s: %s not known: %s; its total is reserved\n", r.Run, budget.PartUnseen.Words(), r.Budget.UnseenWhy)
		}
	}
	for _, r := range have {
		if h := r.Budget.HelpWords(1); len(h) > 0 {
			fmt.Fprintf(w, "  %s: first remedy: %s\n", r.Run, h[0])
		}
	}
}
