package budget

import (
	"strings"
	"testing"

	"github.com/memrec/memrec/storage"
)

const GiB = 1 << 30

func i64(v int64) *int64 { return &v }

// TestOOMBudget: a fatal OOM's step split, and the fewest micro-batches of
// accumulation that fit what the step had, from the arithmetic.
func TestOOMBudget(t *testing.T) {
	batch := 48.0
	o := OOMInput{Allocated: i64(60 * GiB), Requested: i64(8 * GiB), Free: i64(2 * GiB), FittingBatch: &batch, UpperBound: true}
	ob := NewOOM(o, &storage.BudgetSample{Params: 4 * GiB, Grads: 4 * GiB, OptimizerState: 8 * GiB}, 64)
	// need 68 GiB, fixed 16: activations 52 GiB; have 62, room 46: k = ceil(52/46) = 2.
	if ob.NeedBytes != 68*GiB || ob.Accumulation != 2 {
		t.Fatalf("need %d accumulation %d, want 68 GiB and 2", ob.NeedBytes, ob.Accumulation)
	}
	if ob.Parts[0].Part != PartActivations || ob.Parts[0].Bytes != 52*GiB {
		t.Errorf("first part %+v, want activations 52 GiB", ob.Parts[0])
	}
	for _, w := range []string{"activations and temporaries 76 %", "optimizer state 12 %", "a batch of at most 48", "accumulation over at least 2"} {
		if !strings.Contains(ob.Words, w) {
			t.Errorf("words %q lack %q", ob.Words, w)
		}
	}
}

// TestFirstStepState: the Adam family's two moments a trainable parameter
// in its dtype, 8-bit Adam's one byte each; nothing for an optimizer
// whose class does not say (SGD's momentum is a setting), or unwatched.
func TestFirstStepState(t *testing.T) {
	for _, c := range []struct {
		b    *Budget
		want int64
	}{
		{&Budget{Watched: true, Trainable: 1000, DType: "float32", Optimizer: "AdamW"}, 8000},
		{&Budget{Watched: true, Trainable: 1000, DType: "bfloat16", Optimizer: "Adam"}, 4000},
		{&Budget{Watched: true, Trainable: 1000, DType: "float32", Optimizer: "AdamW8bit"}, 2000},
		{&Budget{Watched: true, Trainable: 1000, DType: "float32", Optimizer: "SGD"}, 0},
		{&Budget{Trainable: 1000, DType: "float32", Optimizer: "AdamW"}, 0},
		{nil, 0},
	} {
		if got := FirstStepState(c.b); got != c.want {
			t.Errorf("%+v: %d, want %d", c.b, got, c.want)
		}
	}
}
