package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// This file looks at a run's GPUs together: per host (a merged run of
// several nodes), the spread of peaks across ranks, and the GPU to look at
// first.

// Label names a GPU for people: "node2/gpu3" in a merged run, "GPU 3"
// otherwise.
func (g GPUReport) Label() string {
	if g.Host == "" {
		return "GPU " + strconv.Itoa(g.GPU)
	}
	return g.Host + "/gpu" + strconv.Itoa(g.HostGPU)
}

// summarize fills the run-wide figures of a report of two GPUs or more.
func (rep *Report) summarize(run storage.Run, mi *markIndex) {
	if len(rep.GPUs) < 2 {
		return
	}
	rep.Imbalance = imbalance(rep.GPUs)
	rep.Worst = worst(rep.GPUs)
	for k, h := range run.Hosts {
		hs := HostSummary{Host: h.Name, GPUs: h.GPUs, OffsetNS: h.OffsetNS, Aligned: k == 0 || h.CommonSteps > 0}
		for i := range rep.GPUs {
			g := &rep.GPUs[i]
			if g.Host != h.Name {
				continue
			}
			if g.PeakUsedBytes != nil && (hs.PeakUsedBytes == nil || *g.PeakUsedBytes > *hs.PeakUsedBytes) {
				hs.PeakUsedBytes, hs.PeakUsedGPU = i64(*g.PeakUsedBytes), g.Label()
			}
			if g.PeakAllocatedBytes != nil && (hs.PeakAllocatedBytes == nil || *g.PeakAllocatedBytes > *hs.PeakAllocatedBytes) {
				hs.PeakAllocatedBytes = i64(*g.PeakAllocatedBytes)
			}
			if g.Leak.IsLeak() {
				hs.Leaks++
			}
			hs.OOMs += len(g.OOMs)
		}
		hs.Growth = hostGrowth(rep.GPUs, h.Name, mi.warm, run.StartNS)
		rep.Hosts = append(rep.Hosts, hs)
	}
}

// hostGrowth is the growth rule on the sum of a node's GPUs' floors, at
// the x (step or time slice) every one of them has; nil where the GPUs'
// floors are of different kinds or share no x.
func hostGrowth(gpus []GPUReport, host string, w growth.Warmup, startNS int64) *growth.Growth {
	type acc struct {
		tns, bytes int64
		n          int
	}
	sum := map[float64]*acc{}
	n, per := 0, ""
	for _, g := range gpus {
		if g.Host != host || len(g.Floors) == 0 {
			continue
		}
		if n > 0 && g.Leak.Per != per {
			return nil
		}
		n, per = n+1, g.Leak.Per
		for _, f := range g.Floors {
			a := sum[f.X]
			if a == nil {
				a = &acc{tns: f.TNS}
				sum[f.X] = a
			}
			a.bytes += f.Bytes
			a.n++
			a.tns = max(a.tns, f.TNS)
		}
	}
	var floors []growth.FloorPoint
	for x, a := range sum {
		if a.n == n {
			floors = append(floors, growth.FloorPoint{X: x, TNS: a.tns, Bytes: a.bytes})
		}
	}
	if n == 0 || len(floors) == 0 {
		return nil
	}
	slices.SortFunc(floors, func(a, b growth.FloorPoint) int { return cmp.Compare(a.X, b.X) })
	g := growth.GrowthOfFloors("host_total", floors, w, per == "step", startNS)
	return &g
}

// imbalance compares the GPUs the job ran on: those with allocator samples,
// processes or a job span. A GPU nobody used would otherwise make any
// spread look huge (3 GiB against the idle 3 MiB of a spare GPU). Without
// any such sign on any GPU, all GPUs count. Nil under two GPUs to compare.
func imbalance(all []GPUReport) *Imbalance {
	var gpus []GPUReport
	for _, g := range all {
		if g.PeakAllocatedBytes != nil || len(g.Processes) > 0 || g.JobSpan != nil {
			gpus = append(gpus, g)
		}
	}
	if len(gpus) == 0 {
		gpus = all
	}
	if len(gpus) < 2 {
		return nil
	}
	bases := []struct {
		name string
		get  func(*GPUReport) *int64
	}{
		{"step_peak", func(g *GPUReport) *int64 { return g.PeakStepBytes }},
		{"allocated", func(g *GPUReport) *int64 { return g.PeakAllocatedBytes }},
		{"device_used", func(g *GPUReport) *int64 { return g.PeakUsedBytes }},
	}
	for _, b := range bases {
		var im *Imbalance
		for i := range gpus {
			v := b.get(&gpus[i])
			if v == nil {
				im = nil
				break
			}
			if im == nil {
				im = &Imbalance{Basis: b.name, MaxBytes: *v, MinBytes: *v, MaxGPU: gpus[i].Label(), MinGPU: gpus[i].Label()}
			}
			if *v > im.MaxBytes {
				im.MaxBytes, im.MaxGPU = *v, gpus[i].Label()
			}
			if *v < im.MinBytes {
				im.MinBytes, im.MinGPU = *v, gpus[i].Label()
			}
		}
		if im != nil && im.MinBytes > 0 {
			im.Ratio = float64(im.MaxBytes) / float64(im.MinBytes)
			return im
		}
	}
	return nil
}

func worst(gpus []GPUReport) *Worst {
	for _, g := range gpus {
		if len(g.OOMs) > 0 {
			return &Worst{GPU: g.GPU, Label: g.Label(), Reason: fmt.Sprintf("ran out of memory (%d OOMs)", len(g.OOMs))}
		}
	}
	var w *GPUReport
	rate := func(g *GPUReport) float64 {
		if g.Leak.SlopeBytesPerHour != nil {
			return *g.Leak.SlopeBytesPerHour
		}
		return 0
	}
	for i := range gpus {
		g := &gpus[i]
		if g.Leak.IsLeak() && (w == nil || rate(g) > rate(w)) {
			w = g
		}
	}
	if w != nil {
		return &Worst{GPU: w.GPU, Label: w.Label(), Reason: "leaks: " + w.Leak.SentenceFor(w.Label())}
	}
	full := func(g *GPUReport) float64 {
		if g.PeakUsedBytes == nil || g.TotalBytes <= 0 {
			return -1
		}
		return float64(*g.PeakUsedBytes) / float64(g.TotalBytes)
	}
	for i := range gpus {
		if g := &gpus[i]; full(g) >= 0 && (w == nil || full(g) > full(w)) {
			w = g
		}
	}
	if w == nil {
		return nil
	}
	return &Worst{GPU: w.GPU, Label: w.Label(), Reason: fmt.Sprintf("fullest: peak %s of %s (%.0f%%)", units.FormatBytes(*w.PeakUsedBytes), units.FormatBytes(w.TotalBytes), 100*full(w))}
}
