package tensorboard

import (
	"bytes"
	"math"
	"testing"

	"github.com/memrec/memrec/analysis/budget"
)

// TestExportBudget: each part of a GPU's budget at the peak is one scalar,
// in MiB, at the peak's step and time.
func TestExportBudget(t *testing.T) {
	rep := syntheticReport()
	g := &rep.GPUs[0]
	peak := g.Steps.T(1) // the end of step 2
	g.Budget = &budget.Budget{TNS: peak, Parts: []budget.Slice{
		{Part: budget.PartParams, Bytes: 3 << 20}, {Part: budget.PartOptimizer, Bytes: 6 << 20},
		{Part: budget.PartActivations, Bytes: 40 << 20}, {Part: budget.PartUnseen, Bytes: 1 << 19}}}
	var buf bytes.Buffer
	if err := Export(&buf, rep, 0); err != nil {
		t.Fatal(err)
	}
	ef, err := readEventFile(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	for tag, v := range map[string]float32{"budget_parameters_MiB/gpu3": 3, "budget_optimizer_state_MiB/gpu3": 6,
		"budget_activations_MiB/gpu3": 40, "budget_not_seen_by_pytorch_MiB/gpu3": 0.5} {
		got := ef.ByTag[tag]
		if len(got) != 1 || got[0].V != v || got[0].Step != 2 || math.Abs(got[0].Wall-float64(peak)/1e9) > 1e-6 {
			t.Errorf("%s: %+v, want one point %v at step 2", tag, got, v)
		}
	}
}
