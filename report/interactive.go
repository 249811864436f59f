package report

import (
	_ "embed"
	"encoding/json"
	"html/template"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/internal/uplot"
	"github.com/memrec/memrec/storage"
)

// The interactive timeline: uPlot (internal/uplot, MIT) draws each GPU's
// memory from arrays embedded in the page, so the page stays one file that
// works offline. Drag to zoom, double-click to zoom out, hover for values,
// click a legend entry to hide its series; the GPUs' charts zoom together.

var (
	//go:embed timeline.js
	timelineJS string
)

// PageBuckets is the number of time buckets of each series the page holds
// (M4: at most four points per bucket, every peak kept).
const PageBuckets = 800

// timelineData is the page's data, kept small: times in µs since the run's
// start and values in KiB, both as differences from the previous point
// (the first from zero).
type timelineData struct {
	GPUs []gpuTimeline `json:"gpus"`
}

type gpuTimeline struct {
	GPU    int              `json:"gpu"`
	Label  string           `json:"-"`
	Total  int64            `json:"total_bytes,omitempty"`
	Series []seriesTimeline `json:"series"`
	Epochs [][2]int64       `json:"epochs,omitempty"` // [start, end] µs since start
	Marks  []markTimeline   `json:"marks,omitempty"`
}

type seriesTimeline struct {
	Name string  `json:"name"`
	DT   []int64 `json:"dt_us"`
	DV   []int64 `json:"dv_kib"`
}

type markTimeline struct {
	T    int64  `json:"t_us"`
	Kind string `json:"kind"`
	Text string `json:"text,omitempty"`
}

// timelineOf builds the page's data from the report's timelines of the
// GPUs shown, downsampled again with M4 to PageBuckets buckets.
func timelineOf(rep *analysis.Report, shown func(gpu int) bool) timelineData {
	us := func(t int64) int64 { return (t - rep.StartNS) / 1000 }
	var d timelineData
	for _, g := range rep.GPUs {
		if !shown(g.GPU) {
			continue
		}
		gt := gpuTimeline{GPU: g.GPU, Label: g.Label(), Total: g.TotalBytes, Series: []seriesTimeline{}}
		for _, s := range []analysis.Series{g.Timeline.Used, g.Timeline.DriverReserved, g.Timeline.Allocated, g.Timeline.Reserved} {
			if len(s.T) == 0 {
				continue
			}
			s = analysis.Downsample(s.Name, s.T, s.V, PageBuckets)
			st := seriesTimeline{Name: s.Name, DT: make([]int64, len(s.T)), DV: make([]int64, len(s.T))}
			var lastT, lastV int64
			for i := range s.T {
				t, v := us(s.T[i]), s.V[i]>>10
				st.DT[i], st.DV[i] = t-lastT, v-lastV
				lastT, lastV = t, v
			}
			gt.Series = append(gt.Series, st)
		}
		for _, e := range g.Epochs {
			gt.Epochs = append(gt.Epochs, [2]int64{us(e.StartNS), us(e.EndNS)})
		}
		for _, m := range rep.Events {
			if m.Kind == storage.MarkOOM && m.GPU >= 0 && m.GPU != g.GPU {
				continue
			}
			text := m.Text
			if len(text) > 200 {
				text = text[:200] + "…"
			}
			gt.Marks = append(gt.Marks, markTimeline{T: us(m.T), Kind: m.Kind.String(), Text: text})
		}
		d.GPUs = append(d.GPUs, gt)
	}
	return d
}

// interactiveView is what the page's template needs for the timeline.
type interactiveView struct {
	HasData bool        // some GPU has a series to draw
	Data    template.JS // JSON; encoding/json escapes <, > and &
	UPlot   template.JS
	Script  template.JS
	CSS     template.CSS
	License string
}

func newInteractiveView(rep *analysis.Report, shown func(gpu int) bool) (interactiveView, error) {
	d := timelineOf(rep, shown)
	has := false
	for _, g := range d.GPUs {
		has = has || len(g.Series) > 0
	}
	b, err := json.Marshal(d)
	if err != nil {
		return interactiveView{}, err
	}
	return interactiveView{HasData: has, Data: template.JS(b), UPlot: template.JS(uplot.JS), Script: template.JS(timelineJS),
		CSS: template.CSS(uplot.CSS), License: uplot.License}, nil
}

// interactiveTmpl is the timeline's section and its scripts. The page puts
// both near the top, before the PNGs, so that the charts are drawn before
// the browser has parsed megabytes of embedded images.
const interactiveTmpl = `{{define "timeline"}}{{with .Interactive}}<section id="timeline">
<h2>Timeline</h2>
<p class="hint">Drag across a chart to zoom in, double-click to zoom out; the GPUs zoom together. Hover for values; click a legend entry to hide or show its series. Shaded: every other epoch; dashed lines: events, red: OOM. The same charts are in this folder as PNG files (gpuN-timeline.png).</p>
{{range $.GPUs}}<div class="tl" id="timeline-gpu{{.GPU}}"><h3>{{.Label}}</h3></div>
{{end}}</section>{{end}}{{end}}
{{define "timeline-scripts"}}{{with .Interactive}}<style>{{.CSS}}
.tl { margin: .5em 0 1.5em; } .hint { color: #555; font-size: .9em; }
</style>
<script type="application/json" id="memrec-timeline-data">{{.Data}}</script>
<script>/*! uPlot, embedded unchanged. {{.License}} */
{{.UPlot}}</script>
<script>{{.Script}}</script>{{end}}{{end}}`
