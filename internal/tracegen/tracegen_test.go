package tracegen

import (
	"testing"
	"time"
)

// recSink keeps the allocator samples and the step marks.
type recSink struct {
	torch []Torch
	steps map[int64]int // step mark time → step, rank 0
}

func (r *recSink) Run(RunInfo)                     {}
func (r *recSink) GPU(GPUInfo)                     {}
func (r *recSink) Device(int64, int, int64, int64) {}
func (r *recSink) Proc(int64, int, int, int64)     {}
func (r *recSink) Torch(t Torch)                   { r.torch = append(r.torch, t) }
func (r *recSink) Mark(m Mark) {
	if m.Kind == "step" && m.Rank == 0 {
		r.steps[m.T] = m.Step
	}
}

// The step-end allocator samples hold what the configuration says: each
// step end keeps LeakPerStep more than the one before, and reports the
// step's peak, the job's 9 GiB (1 GiB weights, 2 GiB optimizer state, 6 GiB
// activations) plus what leaked in the steps before it.
func TestStepEndsFollowTheLeak(t *testing.T) {
	const leak = 3 << 20
	c := Config{GPUs: 2, Duration: 20 * time.Second, TorchInterval: 100 * time.Millisecond, StepTime: 200 * time.Millisecond,
		EpochSteps: 10, LeakPerStep: []int64{leak}, StepEndTorch: true, Seed: 5}
	s := &recSink{steps: map[int64]int{}}
	truth := Generate(s, c)
	if truth.LeakPerStep[0] != leak || truth.LeakPerStep[1] != 0 {
		t.Fatalf("truth %+v", truth.LeakPerStep)
	}
	var prev *Torch
	ends := 0
	for i, tr := range s.torch {
		step, ok := s.steps[tr.T]
		if tr.GPU != 0 || !ok {
			continue
		}
		ends++
		if want := int64(9<<30) + int64(step)*leak; tr.Peak != want {
			t.Errorf("step %d: peak %d, want %d", step, tr.Peak, want)
		}
		if prev != nil && step > 1 && tr.Allocated-prev.Allocated != leak {
			t.Errorf("step %d: allocated grew %d, want %d", step, tr.Allocated-prev.Allocated, leak)
		}
		prev = &s.torch[i]
	}
	if ends < truth.Steps-1 || ends == 0 {
		t.Fatalf("%d step-end samples of %d steps", ends, truth.Steps)
	}
}
