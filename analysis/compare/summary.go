package compare

import (
	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/growth"
)

// RunSummary is one run's figures: its worst GPU's (highest peak, steepest
// leak), and each figure's ratio to the baseline's.
type RunSummary struct {
	Run                string            `json:"run"`
	Tags               map[string]string `json:"tags"`
	GPUs               int               `json:"gpus"`
	WorstGPU           int               `json:"worst_gpu"`
	PeakUsedBytes      *int64            `json:"peak_used_bytes"`
	PeakUsedByGPU      []int64           `json:"peak_used_by_gpu_bytes"`
	PeakAllocatedBytes *int64            `json:"peak_allocated_bytes"`
	PeakAllocatedByGPU []int64           `json:"peak_allocated_by_gpu_bytes,omitempty"`
	SteadyBytes        *int64            `json:"steady_state_bytes"`
	EpochDeltaBytes    *int64            `json:"epoch_delta_used_bytes"` // mean over epochs after the first
	LeakVerdict        growth.Verdict    `json:"leak_verdict"`           // LeakKind as earlier versions spelled it (Verdict.Legacy)
	LeakKind           growth.Verdict    `json:"leak_kind"`              // the most severe of the GPUs' (Verdict.Severity)
	SlopeBytesPerStep  *float64          `json:"slope_bytes_per_step"`
	SlopeBytesPerHour  *float64          `json:"slope_bytes_per_hour"`
	FragmentationMean  *float64          `json:"fragmentation_mean"`
	StepTimeS          *float64          `json:"step_time_s"`
	PeakUsedRatio      *float64          `json:"peak_used_ratio"`
	PeakAllocatedRatio *float64          `json:"peak_allocated_ratio"`
	SteadyRatio        *float64          `json:"steady_state_ratio"`
	FragmentationRatio *float64          `json:"fragmentation_mean_ratio"`
	StepTimeRatio      *float64          `json:"step_time_ratio"`
	// Across the GPUs of a run of two or more: its hosts (0 for one
	// machine), the GPU to look at first (Report.Worst) and the imbalance
	// of peaks (Report.Imbalance's ratio).
	Hosts       int      `json:"hosts,omitempty"`
	WorstLabel  string   `json:"worst_gpu_label,omitempty"`
	WorstReason string   `json:"worst_gpu_reason,omitempty"`
	Imbalance   *float64 `json:"imbalance,omitempty"`
	// Budget is the worst GPU's budget at its peak, for the runs side by
	// side; nil without allocator samples.
	Budget *budget.Budget `json:"budget,omitempty"`
}

// Summarize reduces a report to the figures compared.
func Summarize(rep *analysis.Report) RunSummary {
	s := RunSummary{Run: rep.Run, Tags: rep.Tags, GPUs: len(rep.GPUs), LeakVerdict: growth.VerdictInsufficient, LeakKind: growth.VerdictInsufficient, StepTimeS: rep.StepTimeS, Hosts: len(rep.Hosts)}
	if w := rep.Worst; w != nil {
		s.WorstLabel, s.WorstReason = w.Label, w.Reason
	}
	if im := rep.Imbalance; im != nil {
		s.Imbalance = f64(im.Ratio)
	}
	worst := -1
	for i, g := range rep.GPUs {
		if g.PeakUsedBytes != nil {
			s.PeakUsedByGPU = append(s.PeakUsedByGPU, *g.PeakUsedBytes)
			if s.PeakUsedBytes == nil || *g.PeakUsedBytes > *s.PeakUsedBytes {
				s.PeakUsedBytes, worst = i64(*g.PeakUsedBytes), i
			}
		}
		if g.PeakAllocatedBytes != nil {
			s.PeakAllocatedByGPU = append(s.PeakAllocatedByGPU, *g.PeakAllocatedBytes)
			if s.PeakAllocatedBytes == nil || *g.PeakAllocatedBytes > *s.PeakAllocatedBytes {
				s.PeakAllocatedBytes = i64(*g.PeakAllocatedBytes)
				if worst < 0 {
					worst = i
				}
			}
		}
		if g.Fragmentation != nil && (s.FragmentationMean == nil || g.Fragmentation.Mean > *s.FragmentationMean) {
			s.FragmentationMean = f64(g.Fragmentation.Mean)
		}
		// Leak: the most serious verdict, and the steepest slope.
		if k := g.Leak.Judgement(); k.Severity() > s.LeakKind.Severity() {
			s.LeakKind, s.LeakVerdict = k, k.Legacy()
		}
		if g.Leak.SlopeBytesPerHour != nil && (s.SlopeBytesPerHour == nil || *g.Leak.SlopeBytesPerHour > *s.SlopeBytesPerHour) {
			s.SlopeBytesPerHour = f64(*g.Leak.SlopeBytesPerHour)
			if g.Leak.SlopeBytesPerStep != nil {
				s.SlopeBytesPerStep = f64(*g.Leak.SlopeBytesPerStep)
			} else {
				s.SlopeBytesPerStep = nil
			}
		}
	}
	if worst < 0 && len(rep.GPUs) > 0 {
		worst = 0
	}
	if worst >= 0 {
		g := rep.GPUs[worst]
		s.Budget = g.Budget
		s.WorstGPU = g.GPU
		s.SteadyBytes = g.SteadyFloorBytes
		var sum int64
		n := 0
		for i, e := range g.Epochs {
			if i > 0 && e.DeltaUsedBytes != nil && !e.Open {
				sum += *e.DeltaUsedBytes
				n++
			}
		}
		if n > 0 {
			s.EpochDeltaBytes = i64(sum / int64(n))
		}
	}
	return s
}
