package report

import (
	"slices"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/memrec/memrec/analysis/budget"
)

// TestBudgetChartRows: the legend lists the parts some budget holds bytes
// of (buffers, empty in both, is left out); the first budget is the top
// bar; each bar has a row of its own, inside the frame.
func TestBudgetChartRows(t *testing.T) {
	mk := func(params, acts int64) *budget.Budget {
		return &budget.Budget{TotalBytes: params + acts, Parts: []budget.Slice{
			{Part: budget.PartParams, Bytes: params}, {Part: budget.PartBuffers}, {Part: budget.PartActivations, Bytes: acts}}}
	}
	budgets := []*budget.Budget{mk(1<<30, 5<<30), mk(2<<30, 1<<30)}
	if got, want := partsOf(budgets), []budget.Part{budget.PartParams, budget.PartActivations}; !slices.Equal(got, want) {
		t.Errorf("parts %v, want %v", got, want)
	}
	h := budgetHeight(vg.Points(375), len(budgets), budgetParts(budgets))
	p := budgetChart("b", []string{"first", "second"}, budgets, h)
	if p.Y.Min != -0.5 || p.Y.Max != 1.5 {
		t.Errorf("y from %g to %g, want a row a bar (-0.5 to 1.5)", p.Y.Min, p.Y.Max)
	}
	// The rows from the bottom up: the second budget, then the first.
	ticks := p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max)
	if len(ticks) != 2 || ticks[0].Label != "second" || ticks[1].Label != "first" || ticks[1].Value != 1 {
		t.Errorf("rows from the bottom %v, want second then first (the first budget on top)", ticks)
	}
}
