package jobmodel

import "testing"

// The expected values are written from the package comment's description,
// not read from the code's output.
func TestStepShape(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	j := H200(2, 10)
	j.Leak = []int64{0, 4 * MiB}
	tests := []struct {
		gpu, step int
		f         float64
		want      int64
	}{
		{0, -1, 0, 1 * GiB},                            // weights only
		{0, 0, 0.5, 1*GiB + 4*GiB/11*10/512*512},       // backward: (1-0.5)/0.55 = 10/11 of activations
		{0, 0, 0.95, 1*GiB + 2*GiB + 4*GiB/11/512*512}, // optimizer state from 0.9 of step 0
		{0, 3, 0.45, 1*GiB + 2*GiB + 4*GiB},            // the peak of the forward pass
		{1, 3, 0.45, 1*GiB + 2*GiB + 4*GiB + 3*4*MiB},  // three steps' leaks kept
		{1, 3, 1, 1*GiB + 2*GiB + 4*4*MiB},             // the step ended: its leak is kept too
	}
	for _, tt := range tests {
		if got := j.Allocated(tt.gpu, tt.step, tt.f); got != tt.want {
			t.Errorf("Allocated(%d, %d, %v) = %d, want %d", tt.gpu, tt.step, tt.f, got, tt.want)
		}
	}
}

func TestTruth(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	j := H200(1, 10)
	j.Leak = []int64{64 * MiB}
	j.Total = 12 * GiB
	if d := j.EpochDelta(0, 2); d != 10*64*MiB {
		t.Errorf("epoch delta %d, want ten leaks", d)
	}
	// 7 GiB + s·64 MiB + the 512 MiB context exceeds 12 GiB from s = 73.
	if s := j.OOMStep(0, 1000); s != 73 {
		t.Errorf("OOM at step %d, want 73", s)
	}
	if s := j.OOMStep(0, 73); s != -1 {
		t.Errorf("OOM at step %d within 73 steps", s)
	}
	// Reserved covers the peak (reached mid-step once the optimizer state
	// exists) and grows 15 % over the first epoch.
	for _, step := range []int{5, 10, 50} {
		a := j.At(0, step, 0.45)
		if a.Reserved < a.Peak || a.Reserved%(2*MiB) != 0 || a.Allocated != a.Peak {
			t.Errorf("step %d: %+v", step, a)
		}
	}
	if r := j.At(0, 10, 0).Reserved; r < int64(float64(j.Peak(0, 10))*1.15) || r >= int64(float64(j.Peak(0, 10))*1.15)+2*MiB {
		t.Errorf("reserved after one epoch %d, want 1.15 × %d in 2 MiB pages", r, j.Peak(0, 10))
	}
}

// A job without epochs has its cache's full headroom from the start.
func TestNoEpochs(t *testing.T) {
	j := H200(1, 0)
	a := j.At(0, 3, 0.45)
	if want := roundUp(int64(float64(j.Peak(0, 3))*1.15), j.Page); a.Reserved != want {
		t.Errorf("reserved %d, want %d", a.Reserved, want)
	}
}

// A job that empties its cache at every step end shows the step on the
// device: up to the forward pass's peak, held through the backward pass,
// back to the weights and optimizer state when the next step starts. Its
// evaluation pass between epochs holds the evaluation's activations.
func TestEmptyCacheSawtooth(t *testing.T) {
	const MiB, GiB = 1 << 20, 1 << 30
	j := H200(1, 10)
	j.EmptyCache, j.EvalActivations, j.Leak = true, GiB, []int64{2 * MiB}
	base := j.Idle + j.Context // one GPU: no communication buffers
	pages := func(v int64) int64 { return (v + 2*MiB - 1) / (2 * MiB) * (2 * MiB) }
	act := func(f float64) float64 { return f / 0.45 } // share of the activations, forward
	for _, tc := range []struct {
		step int
		f    float64
		want int64
	}{
		{3, 0, base + 3*GiB + 3*2*MiB},                                      // weights, optimizer, three steps' leaks
		{3, 0.45, base + 7*GiB + 3*2*MiB},                                   // the forward pass's peak
		{3, 0.9, base + 7*GiB + 3*2*MiB},                                    // held until the step ends
		{4, 0, base + 3*GiB + 4*2*MiB},                                      // emptied: the floor, one leak more
		{0, 0.95, base + 5*GiB},                                             // step 0 peaks before the optimizer state exists
		{-1, 0, base + 1*GiB},                                               // before training: the weights
		{9, 0.2, base + pages(3*GiB+9*2*MiB+int64(act(0.2)*4*GiB)/512*512)}, // 0.2/0.45 of the activations, in 2 MiB pages
	} {
		if got := j.Used(0, tc.step, tc.f, true); got != tc.want {
			t.Errorf("Used(step %d, f %v) = %d, want %d", tc.step, tc.f, got, tc.want)
		}
	}
	// After epoch 0 (steps 0 to 9): ten leaks kept, and 1 GiB of evaluation.
	if got, want := j.EvalUsed(0, 0), base+4*GiB+10*2*MiB; got != want {
		t.Errorf("EvalUsed = %d, want %d", got, want)
	}
}
