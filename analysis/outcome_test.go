package analysis

import "testing"

// FullGPU names the first GPU with less than FullFree free at its peak. On
// an H200 an EfficientNet-B0 at batch 1680 failed so
// (CUBLAS_STATUS_ALLOC_FAILED), with 139.76 of 140.40 GiB used.
func TestFullGPU(t *testing.T) {
	gpu := func(used, total int64) GPUReport {
		return GPUReport{PeakUsedBytes: &used, TotalBytes: total}
	}
	const gib = int64(1) << 30
	for _, c := range []struct {
		gpus []GPUReport
		want string
	}{
		{[]GPUReport{gpu(139760*gib/1000, 140400*gib/1000)}, "139.76 GiB of 140.40 GiB"},
		{[]GPUReport{gpu(20*gib, 140*gib), gpu(138*gib, 140*gib)}, "138.00 GiB of 140.00 GiB"},
		{[]GPUReport{gpu(136*gib, 140*gib)}, ""}, // 2.9 % free: failed for another reason
		{[]GPUReport{{TotalBytes: 140 * gib}}, ""},
		{nil, ""},
	} {
		if got := FullGPU(&Report{GPUs: c.gpus}); got != c.want {
			t.Errorf("FullGPU(%v) = %q, want %q", c.gpus, got, c.want)
		}
	}
}
