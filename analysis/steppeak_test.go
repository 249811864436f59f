package analysis

import (
	"testing"

	"github.com/memrec/memrec/testsupport/analysistest"
)

// TestStepPeakAbsentWithoutPeaks: allocator samples that carry no
// peak_allocated_bytes leave the step peak unknown: no peak row, no
// figure. Before, the report said "step_peak 0 B" at time 0 (decades
// before the run's start), and the table 0 B.
func TestStepPeakAbsentWithoutPeaks(t *testing.T) {
	for _, withPeak := range []bool{false, true} {
		g := &analysistest.Gen{}
		const t0 = 1764430000000000000
		g.Line(`{"type":"run","name":"r","start_ns":%d,"end_ns":%d,"interval_ns":100000000}`, t0, t0+int64(60e9))
		g.Line(`{"type":"gpu","gpu":0,"uuid":"GPU-0","name":"G","total_bytes":80000000000}`)
		for i := 0; i < 600; i++ {
			tt := t0 + int64(i)*1e8
			g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, tt, int64(20*GiB))
			if withPeak {
				g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d}`, tt+7, int64(16*GiB), int64(18*GiB), int64(17*GiB))
			} else {
				g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d}`, tt+7, int64(16*GiB), int64(18*GiB))
			}
		}
		rep := analyzeJSONL(t, g.String())["r"]
		gr := rep.GPUs[0]
		var step *Peak
		for i, p := range gr.Peaks {
			if p.What == "step_peak" {
				step = &gr.Peaks[i]
			}
		}
		switch {
		case withPeak && (step == nil || step.Bytes != int64(17*GiB) || step.TNS < rep.StartNS || gr.PeakStepBytes == nil):
			t.Errorf("with peaks: step peak %+v, PeakStepBytes %v; want 17 GiB within the run", step, gr.PeakStepBytes)
		case !withPeak && (step != nil || gr.PeakStepBytes != nil):
			t.Errorf("without peaks: step peak %+v, PeakStepBytes %v; want neither", step, analysistest.Deref(gr.PeakStepBytes))
		}
	}
}
