package report

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/internal/uplot"
	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage/wire"
)

// The interactive timeline: uPlot (internal/uplot, MIT) draws each GPU's
// memory from arrays embedded in the page, so the page stays one file that
// works offline. Drag to zoom, double-click to zoom out, hover for values,
// click a legend entry to hide its series; the GPUs' charts zoom together.

var (
	//go:embed timeline.js
	timelineJS string
)

// PageBuckets is the most time buckets of each series the page's first
// level holds (M4: at most four points per bucket, every peak kept).
const PageBuckets = 800

// pageChartPx is about the width of the page's timeline charts in pixels
// (the page's body, less its margins), and minPageBuckets the fewest
// buckets a first level holds: one per two pixels, so that a chart of the
// whole run still draws each pixel column's lowest and highest value from
// a bucket of its own or its neighbour's.
const (
	pageChartPx    = 1200
	minPageBuckets = pageChartPx / 2
)

// baseShare is the part of the timeline's budget the first level of every
// line may take together: a fifth leaves room for a level four times finer
// beside it.
const baseShare = 5

// timelineData is the page's data, kept small: times in µs since the run's
// start and values in KiB, both as differences from the previous point
// (the first from zero), packed (packPoints).
type timelineData struct {
	GPUs []gpuTimeline `json:"gpus"`
	// EpochSets are the GPUs' epochs, each list once however many GPUs
	// share it (ranks of one job mark the same epochs), packed as points
	// are: per epoch its start less the previous epoch's end and its
	// length, in µs.
	EpochSets []string `json:"epoch_sets,omitempty"`
	// Bytes is the size of the levels embedded, Budget the bound they
	// were kept within (0 without levels).
	Bytes   int `json:"bytes,omitempty"`
	Budget  int `json:"budget,omitempty"`
	Buckets int `json:"page_buckets"` // of the first level; level j has Buckets·4^j
	// TimeUnit is the run's (TimeUnitFor): the axis is written in it.
	TimeUnit TimeUnit `json:"time_unit"`
}

type gpuTimeline struct {
	GPU      int              `json:"gpu"`
	Label    string           `json:"-"`
	Total    int64            `json:"total_bytes,omitempty"`
	Series   []seriesTimeline `json:"series"`
	Epochs   [][2]int64       `json:"-"`         // [start, end] µs since start
	EpochSet int              `json:"epoch_set"` // its epochs: EpochSets[EpochSet], -1 none
	Marks    []markTimeline   `json:"marks,omitempty"`
}

type seriesTimeline struct {
	Name string  `json:"name"`
	DT   []int64 `json:"-"` // packed into "points"
	DV   []int64 `json:"-"`
	// Levels, when the report had the run's lines, are the same series
	// at finer resolutions: Levels[j] has Buckets·4^(j+1) buckets over
	// the run.
	Levels []levelTimeline `json:"levels,omitempty"`
	Every  int64           `json:"every,omitempty"` // samples per unit of the points above (1: samples)
	All    bool            `json:"all,omitempty"`   // the points above are every sample
}

// levelTimeline is one level of the page's pyramid.
type levelTimeline struct {
	Every int64   `json:"every"`         // samples per unit drawn: 1 = samples, M4 per bucket
	All   bool    `json:"all,omitempty"` // every sample of the series
	DT    []int64 `json:"-"`             // packed into "points"
	DV    []int64 `json:"-"`
}

// MarshalJSON writes the series with its points packed.
func (s seriesTimeline) MarshalJSON() ([]byte, error) {
	type plain seriesTimeline // without this method
	return json.Marshal(struct {
		plain
		Points string `json:"points"`
	}{plain(s), packPoints(s.DT, s.DV)})
}

// MarshalJSON writes the level with its points packed.
func (l levelTimeline) MarshalJSON() ([]byte, error) {
	type plain levelTimeline
	return json.Marshal(struct {
		plain
		Points string `json:"points"`
	}{plain(l), packPoints(l.DT, l.DV)})
}

// DefaultPageBytes bounds a page: its timeline's levels are added, and
// then dropped, finest first, until the whole page is within it.
const DefaultPageBytes = 5 << 20

type markTimeline struct {
	T    int64  `json:"t_us"`
	Kind string `json:"kind"`
	Text string `json:"text,omitempty"`
}

// timelineOf builds the page's data from the report's timelines of the
// GPUs shown, downsampled again with M4 to buckets buckets.
func timelineOf(rep *analysis.Report, shown func(gpu int) bool, buckets int) timelineData {
	return timelineWith(rep, shown, buckets, true)
}

// timelineWith is timelineOf, its GPUs with no series unless lines is
// set (a page that draws its lines from an index: pyramidFrom).
func timelineWith(rep *analysis.Report, shown func(gpu int) bool, buckets int, lines bool) timelineData {
	us := func(t int64) int64 { return (t - rep.StartNS) / 1000 }
	d := timelineData{Buckets: buckets}
	for _, g := range rep.GPUs {
		if !shown(g.GPU) {
			continue
		}
		gt := gpuTimeline{GPU: g.GPU, Label: g.Label(), Total: g.TotalBytes, Series: []seriesTimeline{}}
		for _, s := range []analysis.Series{g.Timeline.Used, g.Timeline.DriverReserved, g.Timeline.Allocated, g.Timeline.Reserved} {
			if len(s.T) == 0 || !lines {
				continue
			}
			s = analysis.Downsample(s.Name, s.T, s.V, buckets)
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
			if m.Kind == wire.MarkOOM && m.GPU >= 0 && m.GPU != g.GPU {
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
	d.shareEpochs()
	return d
}

// shareEpochs packs the GPUs' epochs into EpochSets, a list once.
func (d *timelineData) shareEpochs() {
	index := map[string]int{}
	for i := range d.GPUs {
		g := &d.GPUs[i]
		g.EpochSet = -1
		if len(g.Epochs) == 0 {
			continue
		}
		gap, length := make([]int64, len(g.Epochs)), make([]int64, len(g.Epochs))
		var end int64
		for j, e := range g.Epochs {
			gap[j], length[j], end = e[0]-end, e[1]-e[0], e[1]
		}
		p := packPoints(gap, length)
		k, ok := index[p]
		if !ok {
			k = len(d.EpochSets)
			index[p] = k
			d.EpochSets = append(d.EpochSets, p)
		}
		g.EpochSet = k
	}
}

// epochBytes is what the epoch sets take in the page.
func (d *timelineData) epochBytes() int {
	n := 0
	for _, e := range d.EpochSets {
		n += len(e)
	}
	return n
}

// deltas turns points into the page's form: µs since start and KiB, each
// a difference from the previous point.
func deltas(start int64, t, v []int64) (dt, dv []int64) {
	dt, dv = make([]int64, len(t)), make([]int64, len(t))
	var lastT, lastV int64
	for i := range t {
		tt, vv := (t[i]-start)/1000, v[i]>>10
		dt[i], dv[i] = tt-lastT, vv-lastV
		lastT, lastV = tt, vv
	}
	return dt, dv
}

// size is what the series' points of the first level take in the page.
func (d *timelineData) size() int {
	n := 0
	for _, g := range d.GPUs {
		for _, s := range g.Series {
			n += packedSize(s.DT, s.DV)
		}
	}
	return n
}

// baseBuckets is the first level's buckets per line when n buckets took
// size bytes for every line together: as many as fit in the budget's
// share (baseShare), at most PageBuckets and at least minPageBuckets.
func baseBuckets(n, size, budget int) int {
	share := budget / baseShare
	if size <= share || size == 0 {
		return n
	}
	return max(minPageBuckets, min(n, int(int64(n)*int64(share)/int64(size))))
}

// timelineWithin is timelineOf with its buckets from the budget.
func timelineWithin(rep *analysis.Report, shown func(gpu int) bool, budget int) timelineData {
	d := timelineOf(rep, shown, PageBuckets)
	budget = max(0, budget-d.epochBytes())
	if b := baseBuckets(PageBuckets, d.size(), budget); b != PageBuckets {
		d = timelineOf(rep, shown, b)
	}
	return d
}

// pyramidOf builds the page's data from the run's lines within budget
// bytes: per line a base level (what the page draws at first) of the
// buckets the budget's share gives every line (baseBuckets), then levels
// each four times finer, added for every line together while the whole
// stays within the budget, and none past the one that holds every sample.
func pyramidOf(rep *analysis.Report, shown func(gpu int) bool, opts *Options, budget int) timelineData {
	first := pyramidFrom(rep, shown, opts, budget, PageBuckets, 0)
	budget = max(0, budget-first.epochBytes()) // the epochs are drawn at every zoom
	return pyramidFrom(rep, shown, opts, budget, baseBuckets(PageBuckets, first.size(), budget), maxLevels)
}

// pyramidFrom is pyramidOf with a base level of first buckets and at most
// levels levels past it.
func pyramidFrom(rep *analysis.Report, shown func(gpu int) bool, opts *Options, budget, first, levels int) timelineData {
	from, to := rep.StartNS, rep.EndNS+1
	base := timelineWith(rep, shown, first, false) // epochs and marks as before; the lines are the index's
	type ref struct {
		g, s int
		k    series.Key
	}
	d := timelineData{Buckets: first, EpochSets: base.EpochSets}
	var refs []ref
	keys := opts.Lines.Keys()
	for _, g := range base.GPUs {
		gt := g
		gt.Series = []seriesTimeline{}
		pids := map[int]bool{}
		for _, k := range keys {
			if k.GPU == g.GPU && k.PID != 0 {
				pids[k.PID] = true
			}
		}
		for _, k := range keys {
			if k.GPU != g.GPU || k.Field.Budget() {
				continue // the budget has its own chart
			}
			name := k.Field.Label()
			if len(pids) > 1 && k.PID != 0 {
				name += fmt.Sprintf(" (pid %d)", k.PID)
			}
			refs = append(refs, ref{len(d.GPUs), len(gt.Series), k})
			gt.Series = append(gt.Series, seriesTimeline{Name: name})
		}
		d.GPUs = append(d.GPUs, gt)
	}
	raw := func(k series.Key) series.RawReader {
		if opts.Raw == nil {
			return nil
		}
		return opts.Raw(k)
	}
	// Level by level, line by line in the order they are drawn (a GPU's
	// device memory first), while the budget lasts: the levels past the
	// base are dropped for the lines that no longer fit, and no finer
	// level is made once one line did not fit.
	used := 0
	for level, buckets := 0, first; level <= levels; level, buckets = level+1, buckets*4 {
		added, full := false, false
		for _, r := range refs {
			s := &d.GPUs[r.g].Series[r.s]
			if level > 0 && (s.finest() || len(s.Levels) < level-1) {
				continue // holds every sample already, or stopped before
			}
			res, err := opts.Lines.Window(r.k, from, to, buckets, raw(r.k))
			if err != nil {
				continue
			}
			dt, dv := deltas(rep.StartNS, res.T, res.V)
			n := packedSize(dt, dv)
			if level > 0 && used+n > budget {
				full = true
				break
			}
			used, added = used+n, true
			// Every sample is held once the points are the samples, or a
			// finer level of them adds no point (equal neighbours are
			// drawn once).
			all := res.Every == 1 && (int64(len(res.T)) == res.Samples || (level > 0 && len(dt) == s.lastLen()))
			if level == 0 {
				s.DT, s.DV, s.Every, s.All = dt, dv, res.Every, all
				if s.DT == nil {
					s.DT, s.DV = []int64{}, []int64{}
				}
				continue
			}
			s.Levels = append(s.Levels, levelTimeline{Every: res.Every, All: all, DT: dt, DV: dv})
		}
		if !added || full {
			break
		}
	}
	d.Bytes, d.Budget = used, budget
	return d
}

// lastEvery is the samples per unit of the series' finest level.
func (s *seriesTimeline) lastEvery() int64 {
	if n := len(s.Levels); n > 0 {
		return s.Levels[n-1].Every
	}
	return s.Every
}

// lastLen is the number of points of the series' finest level.
func (s *seriesTimeline) lastLen() int {
	if n := len(s.Levels); n > 0 {
		return len(s.Levels[n-1].DT)
	}
	return len(s.DT)
}

// maxLevels bounds the levels past the base: PageBuckets·4^12 buckets are
// 13 G, finer than any run's samples (and minPageBuckets·4^12 10 G).
const maxLevels = 12

// finest says whether the series' finest level holds every sample.
func (s *seriesTimeline) finest() bool {
	if n := len(s.Levels); n > 0 {
		return s.Levels[n-1].All
	}
	return s.All
}

// interactiveView is what the page's template needs for the timeline.
type interactiveView struct {
	HasData bool        // some GPU has a series to draw
	Data    template.JS // JSON; encoding/json escapes <, > and &
	UPlot   template.JS
	Script  template.JS
	CSS     template.CSS
	License string
	data    timelineData
}

// dropFinest drops the finest level held by any series of the view's
// data and encodes it again; false when no series has a level past its
// base left to drop.
func (iv *interactiveView) dropFinest() (bool, error) {
	deepest := 0
	for _, g := range iv.data.GPUs {
		for _, s := range g.Series {
			deepest = max(deepest, len(s.Levels))
		}
	}
	if deepest == 0 {
		return false, nil
	}
	for gi := range iv.data.GPUs {
		for si := range iv.data.GPUs[gi].Series {
			s := &iv.data.GPUs[gi].Series[si]
			if len(s.Levels) == deepest {
				last := s.Levels[deepest-1]
				iv.data.Bytes -= packedSize(last.DT, last.DV)
				s.Levels = s.Levels[:deepest-1]
			}
		}
	}
	b, err := json.Marshal(iv.data)
	if err != nil {
		return false, err
	}
	iv.Data = template.JS(b)
	return true, nil
}

// timelineShown is newInteractiveView's HasData: whether a GPU the page
// shows has a line to draw. From an index, its keys say so, with no level
// made and encoded to learn it.
func timelineShown(rep *analysis.Report, shown func(gpu int) bool, opts *Options) (bool, error) {
	if opts.Lines == nil {
		iv, err := newInteractiveView(rep, shown, opts, 0)
		return iv.HasData, err
	}
	keys := opts.Lines.Keys()
	for _, g := range rep.GPUs {
		if !shown(g.GPU) {
			continue
		}
		for _, k := range keys {
			if k.GPU == g.GPU && !k.Field.Budget() { // as pyramidFrom lists them
				return true, nil
			}
		}
	}
	return false, nil
}

// newInteractiveView builds the timeline's data within budget bytes.
func newInteractiveView(rep *analysis.Report, shown func(gpu int) bool, opts *Options, budget int) (interactiveView, error) {
	var d timelineData
	if opts.Lines != nil {
		d = pyramidOf(rep, shown, opts, budget)
	} else {
		d = timelineWithin(rep, shown, budget)
	}
	d.TimeUnit = TimeUnitFor(rep.DurationS)
	has := false
	for _, g := range d.GPUs {
		has = has || len(g.Series) > 0
	}
	b, err := json.Marshal(d)
	if err != nil {
		return interactiveView{}, err
	}
	iv := interactiveShell()
	iv.HasData, iv.Data, iv.data = has, template.JS(b), d
	return iv, nil
}

// interactiveShell is the timeline's section and scripts with no data: the
// page written with it is the page less its timeline's data.
func interactiveShell() interactiveView {
	return interactiveView{HasData: true, Data: "{}", UPlot: template.JS(uplot.JS), Script: template.JS(timelineJS),
		CSS: template.CSS(uplot.CSS), License: uplot.License}
}

// interactiveTmpl is the timeline's section and its scripts. The page puts
// both near the top, before the PNGs, so that the charts are drawn before
// the browser has parsed megabytes of embedded images.
const interactiveTmpl = `{{define "timeline"}}{{with .Interactive}}<section id="timeline">
<h2>Timeline</h2>
<p class="hint">Drag across a chart to zoom in, double-click to zoom out; the GPUs zoom together. The y axis fits what is in view (<label><input type="checkbox" id="memrec-zero"> y from 0</label>). Hover for values; click a legend entry to hide or show its series. Shaded: every other epoch; dashed lines: events, red: OOM. Under each chart: the resolution it shows. The same charts are in this folder as PNG files (gpuN-timeline.png).</p>
{{range $.GPUs}}<div class="tl" id="timeline-gpu{{.GPU}}"><h3>{{.Label}}</h3></div>
{{end}}</section>{{end}}{{end}}
{{define "timeline-scripts"}}{{with .Interactive}}<style>{{.CSS}}
.tl { margin: .5em 0 1.5em; } .hint { color: #555; font-size: .9em; } .tl .res { color: #555; font-size: .85em; }
</style>
<script type="application/json" id="memrec-timeline-data">{{.Data}}</script>
<script>/*! uPlot, embedded unchanged. {{.License}} */
{{.UPlot}}</script>
<script>{{.Script}}</script>{{end}}{{end}}`
