package analysis

import (
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// How a run ended, read from its report: whether it ran out of memory
// (an OOM mark, or a GPU left full by a job that failed before its first
// step) or failed for another reason before its steps. fit and compare
// --by both ask, to keep such runs out of what they fit.

// FailedBeforeAStep reports whether the run's job exited with an error
// before it marked a step without running out of memory (RanOutOfMemory),
// and its exit code: what it allocated was not a training step's (a script
// that crashed in its first forward pass). A run without step marks that
// exited 0 (a probe that does not mark steps) is kept.
func FailedBeforeAStep(r *Report) (int, bool) {
	code, ok := exitBeforeAStep(r)
	return code, ok && !RanOutOfMemory(r)
}

// exitBeforeAStep is the run's exit code when its job exited with an error
// before it marked a step.
func exitBeforeAStep(r *Report) (int, bool) {
	if r.Marks.Steps > 0 {
		return 0, false
	}
	for i := len(r.Events) - 1; i >= 0; i-- {
		if m := r.Events[i]; m.Kind == wire.MarkExit {
			return int(m.Code), m.Code != 0 && m.Code != storage.None
		}
	}
	return 0, false
}

// FullFree is the share of a GPU left free at most, at its peak, for a job
// that exited with an error before its steps to count as out of memory
// without an OOM mark. An allocation outside PyTorch's caching allocator
// (cuBLAS's or cuDNN's workspace, NCCL's buffers) that fails raises no OOM
// mark (CUBLAS_STATUS_ALLOC_FAILED is a plain RuntimeError), and a script
// that catches its OOM error and exits leaves none either; a job that ends
// before its steps with its GPU this full most likely ran out of memory.
const FullFree = 0.02

// FullGPU is "USED of TOTAL" (device memory in use at its peak) of the
// first of the run's GPUs that had less than FullFree of it free, else "".
func FullGPU(r *Report) string {
	for _, g := range r.GPUs {
		if g.PeakUsedBytes != nil && g.TotalBytes > 0 && float64(g.TotalBytes-*g.PeakUsedBytes) < FullFree*float64(g.TotalBytes) {
			return units.FormatBytes(*g.PeakUsedBytes) + " of " + units.FormatBytes(g.TotalBytes)
		}
	}
	return ""
}

// RanOutOfMemory reports whether the run ended by running out of memory:
// a fatal OOM, or an exit with an error before its first step with a GPU
// full (FullGPU).
func RanOutOfMemory(r *Report) bool {
	if FatalOOM(r) {
		return true
	}
	_, failed := exitBeforeAStep(r)
	return failed && FullGPU(r) != ""
}

// FatalOOM reports whether an out-of-memory error ended the run.
func FatalOOM(r *Report) bool {
	for _, g := range r.GPUs {
		for _, o := range g.OOMs {
			if o.Outcome == OOMFatal {
				return true
			}
		}
	}
	return false
}
