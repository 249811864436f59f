package report

import (
	"bytes"
	"encoding/json"
	"image/png"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/growth"
)

// TestManyGPUsBoundedReport: a run of 1000 GPUs that all leak (what an
// import of hostile input can hold) makes a report of bounded size: charts
// of their own for at most 16 GPUs, a heat map no taller than
// maxHeatHeight, the rest in the tables.
func TestManyGPUsBoundedReport(t *testing.T) {
	if testing.Short() {
		t.Skip("charts 1000 GPUs")
	}
	const n = 1000
	rep := &analysis.Report{Run: "many", StartNS: 1e18, EndNS: 1e18 + 60e9}
	for i := range n {
		used := int64(1e9 + i)
		g := analysis.GPUReport{GPU: i, PeakUsedBytes: &used, Leak: growth.Leak{Verdict: growth.VerdictLeak}}
		g.Timeline.Used = analysis.Series{T: []int64{1e18, 1e18 + 30e9, 1e18 + 60e9}, V: []int64{used, used + 1e6, used + 2e6}}
		rep.GPUs = append(rep.GPUs, g)
	}
	charts, err := Charts(rep, Options{Width: 600, Height: 300})
	if err != nil {
		t.Fatal(err)
	}
	gpus := map[int]bool{}
	for _, c := range charts {
		if c.GPU >= 0 {
			gpus[c.GPU] = true
		}
		if c.File == "heatmap.png" {
			cfg, err := png.DecodeConfig(bytes.NewReader(c.PNG))
			if err != nil {
				t.Fatal(err)
			}
			// pixels = points × 96/72, plus the title and axis (90 pt)
			if max := int((maxHeatHeight + 90) * 96 / 72); cfg.Height > max+2 {
				t.Errorf("heat map is %d px tall, bound %d", cfg.Height, max)
			}
		}
	}
	if len(gpus) != maxSections {
		t.Errorf("%d GPUs with charts of their own, want %d", len(gpus), maxSections)
	}
	page, err := Page(rep, charts)
	if err != nil {
		t.Fatal(err)
	}
	if want := "The other 984 GPUs, 984 of them with a finding"; !strings.Contains(string(page), want) {
		t.Errorf("page lacks %q", want)
	}
	// The interactive timeline holds the GPUs with a section, no more.
	_, data, ok := strings.Cut(string(page), `id="memrec-timeline-data">`)
	data, _, _ = strings.Cut(data, "</script>")
	var d timelineData
	if err := json.Unmarshal([]byte(data), &d); !ok || err != nil || len(d.GPUs) != maxSections {
		t.Errorf("timeline data: %v, %d GPUs, want %d", err, len(d.GPUs), maxSections)
	}
}
