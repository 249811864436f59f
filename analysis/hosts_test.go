package analysis

import "testing"

func TestImbalanceLeavesOutGPUsTheJobDidNotUse(t *testing.T) {
	p := func(v int64) *int64 { return &v }
	const gib = 1 << 30
	rank := func(gpu int, step int64) GPUReport {
		return GPUReport{GPU: gpu, PeakUsedBytes: p(3 * gib), PeakAllocatedBytes: p(step), PeakStepBytes: p(step)}
	}
	idle := GPUReport{GPU: 9, PeakUsedBytes: p(3 << 20)}

	tests := []struct {
		name      string
		gpus      []GPUReport
		wantNil   bool
		wantRatio float64
		wantBasis string
	}{
		{"one rank and an idle GPU", []GPUReport{rank(0, 2*gib), idle}, true, 0, ""},
		{"two ranks and an idle GPU", []GPUReport{rank(0, 2*gib), rank(1, 4*gib), idle}, false, 2, "step_peak"},
		{"device only, nothing tells the job apart", []GPUReport{{GPU: 0, PeakUsedBytes: p(4 * gib)}, {GPU: 1, PeakUsedBytes: p(1 * gib)}}, false, 4, "device_used"},
		{"device only, processes name the job's GPUs", []GPUReport{
			{GPU: 0, PeakUsedBytes: p(4 * gib), Processes: []Process{{}}},
			{GPU: 1, PeakUsedBytes: p(2 * gib), Processes: []Process{{}}},
			idle,
		}, false, 2, "device_used"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			im := imbalance(tc.gpus)
			if tc.wantNil {
				if im != nil {
					t.Fatalf("imbalance = %+v, want none", *im)
				}
				return
			}
			if im == nil {
				t.Fatal("imbalance = nil")
			}
			if im.Ratio != tc.wantRatio || im.Basis != tc.wantBasis {
				t.Errorf("imbalance = %v on %s, want %v on %s", im.Ratio, im.Basis, tc.wantRatio, tc.wantBasis)
			}
		})
	}
}
