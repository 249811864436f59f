package report

import (
	"fmt"
	"image/color"
	"slices"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/units"
)

// partColors gives each part of the budget one colour, the same in every
// chart: the model's own tensors in greens and blues, activations orange,
// the cache in browns and greys, what PyTorch does not see dark grey.
var partColors = map[budget.Part]color.RGBA{
	budget.PartParams:         {R: 31, G: 119, B: 180, A: 255},
	budget.PartGrads:          {R: 23, G: 190, B: 207, A: 255},
	budget.PartOptimizer:      {R: 148, G: 103, B: 189, A: 255},
	budget.PartBuffers:        {R: 188, G: 189, B: 34, A: 255},
	budget.PartActivations:    {R: 255, G: 127, B: 14, A: 255},
	budget.PartAllocated:      {R: 44, G: 160, B: 44, A: 255},
	budget.PartInactiveSplit:  {R: 140, G: 86, B: 75, A: 255},
	budget.PartCachedFree:     {R: 196, G: 156, B: 148, A: 255},
	budget.PartOtherProcesses: {R: 227, G: 119, B: 194, A: 255},
	budget.PartUnseen:         {R: 90, G: 90, B: 90, A: 255},
}

// budgetChart draws one stacked bar per budget, each part a segment, on
// one scale: one GPU's budget at its peak, or several runs' side by side
// (compare). names label the bars; h is the height the chart is drawn
// at (budgetHeight), whose rows the bars fill. Parts that no budget has
// are left out of the legend.
func budgetChart(title string, names []string, budgets []*budget.Budget, h vg.Length) *plot.Plot {
	top := 1.0
	for _, b := range budgets {
		if b != nil {
			top = max(top, float64(b.TotalBytes))
		}
	}
	unit, uname := byteUnit(top)
	p := newPlot(title, uname, "")
	// The first budget on top: bars are placed from the bottom up.
	names, budgets = slices.Clone(names), slices.Clone(budgets)
	slices.Reverse(names)
	slices.Reverse(budgets)
	// One bar chart per part, stacked on the one before, in the parts' order.
	var order []budget.Part
	seen := map[budget.Part]bool{}
	for _, part := range partsOf(budgets) {
		if !seen[part] {
			seen[part] = true
			order = append(order, part)
		}
	}
	var below *plotter.BarChart
	// A bar fills three fifths of its row: bars read as bars however many
	// rows the legend beside them asks for.
	w := min(vg.Points(40), max(vg.Points(12), (h-budgetFrame)/vg.Length(len(budgets))*3/5))
	for _, part := range order {
		vals := make(plotter.Values, len(budgets))
		for i, b := range budgets {
			v, _ := b.Part(part)
			vals[i] = float64(v) / unit
		}
		bc, err := plotter.NewBarChart(vals, w)
		if err != nil {
			continue
		}
		bc.Horizontal = true
		bc.Color = partColors[part]
		bc.LineStyle.Width = 0
		if below != nil {
			bc.StackOn(below)
		}
		below = bc
		p.Add(bc)
		p.Legend.Add(part.Words(), bc)
	}
	p.NominalY(names...)
	// A row a bar, the bar in its middle (not the first and last bars on
	// the frame's edges, half outside it).
	p.Y.Min, p.Y.Max = -0.5, float64(len(budgets))-0.5
	p.X.Min = 0
	p.Legend.Top = true
	p.Legend.Left = false
	return p
}

// gpuBudgetChart is one GPU's budget at its peak, drawn h high.
func gpuBudgetChart(g analysis.GPUReport, h vg.Length) *plot.Plot {
	b := g.Budget
	total := b.TotalWords()
	return budgetChart(fmt.Sprintf("%s: budget at the peak (%s %s)", g.Label(), total, units.FormatBytes(b.TotalBytes)),
		[]string{g.Label()}, []*budget.Budget{b}, h)
}

// partsOf lists the parts of the budgets that hold bytes, each once, in
// the order met.
func partsOf(budgets []*budget.Budget) []budget.Part {
	var out []budget.Part
	seen := map[budget.Part]bool{}
	for _, b := range budgets {
		for _, s := range b.Parts {
			if !seen[s.Part] && s.Bytes > 0 {
				seen[s.Part] = true
				out = append(out, s.Part)
			}
		}
	}
	return out
}

// budgetParts is the number of parts the budgets' chart lists.
func budgetParts(budgets []*budget.Budget) int { return len(partsOf(budgets)) }

// budgetFrame is a budget chart's height less its bars': the title, the
// x axis and its label.
const budgetFrame = vg.Length(72)

// budgetHeight is the height of a budget chart of bars bars and parts
// legend entries: the frame holds the bars, not the height of a
// timeline, and the legend beside it; at most h.
func budgetHeight(h vg.Length, bars, parts int) vg.Length {
	return min(h, budgetFrame+max(vg.Length(bars)*vg.Points(36), vg.Length(parts)*vg.Points(14)))
}
