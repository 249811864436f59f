package report

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/storage/wire"
)

// addEpochsAndMarks shades epochs and draws event, OOM and exit marks as
// vertical lines between y0 and y1.
func addEpochsAndMarks(p *plot.Plot, rep *analysis.Report, g analysis.GPUReport, ax timeAxis, y0, y1 float64) {
	epochs := g.Epochs
	if len(epochs) == 0 {
		epochs = g.InferredEpochs
	}
	for i, e := range epochs {
		if i%2 == 1 {
			continue
		}
		poly, err := plotter.NewPolygon(plotter.XYs{{X: ax.x(e.StartNS), Y: y0}, {X: ax.x(e.EndNS), Y: y0}, {X: ax.x(e.EndNS), Y: y1}, {X: ax.x(e.StartNS), Y: y1}})
		if err == nil {
			poly.Color = colEpoch
			poly.LineStyle.Width = 0
			p.Add(poly)
		}
	}
	// Epoch numbers along the top while they fit (a label per 40 px of a
	// 1200 px chart), events and OOMs labelled with their text below them.
	var labels plotter.XYLabels
	if len(epochs) <= 30 {
		for _, e := range epochs {
			labels.XYs = append(labels.XYs, plotter.XY{X: ax.x(e.StartNS), Y: y1})
			labels.Labels = append(labels.Labels, " e"+strconv.Itoa(e.Epoch))
		}
	}
	marks := 0
	var ev, oom *plotter.Line
	for _, m := range rep.Events {
		if m.Kind == wire.MarkOOM && m.GPU >= 0 && m.GPU != g.GPU {
			continue
		}
		var c color.Color = colMark
		w := vg.Points(0.8)
		if m.Kind == wire.MarkOOM {
			c, w = colOOM, vg.Points(2)
		}
		l := line(plotter.XYs{{X: ax.x(m.T), Y: y0}, {X: ax.x(m.T), Y: y1}}, c, w)
		l.Dashes = []vg.Length{vg.Points(3), vg.Points(2)}
		p.Add(l)
		if m.Kind == wire.MarkOOM {
			oom = l
		} else {
			ev = l
		}
		if marks < 8 {
			text := m.Text
			if m.Kind == wire.MarkOOM {
				text = "OOM " + text
			}
			if r := []rune(text); len(r) > 32 {
				text = string(r[:31]) + "…"
			}
			labels.XYs = append(labels.XYs, plotter.XY{X: ax.x(m.T), Y: y0 + (y1-y0)*(0.93-0.06*float64(marks%4))})
			labels.Labels = append(labels.Labels, " "+text)
			marks++
		}
	}
	if len(labels.Labels) > 0 {
		if lab, err := plotter.NewLabels(labels); err == nil {
			for i := range lab.TextStyle {
				lab.TextStyle[i].Font.Size = vg.Points(8)
				lab.TextStyle[i].Color = color.RGBA{R: 70, G: 50, B: 120, A: 255}
			}
			p.Add(lab)
		}
	}
	if ev != nil {
		p.Legend.Add("events", ev)
	}
	if oom != nil {
		p.Legend.Add("OOM", oom)
	}
}

// timelineChart: device used, allocated and reserved over time, the GPU's
// total, epochs shaded, marks drawn.
func timelineChart(rep *analysis.Report, g analysis.GPUReport, title string, yMax float64) *plot.Plot {
	ax := newTimeAxis(rep)
	tl := g.Timeline
	top := math.Max(maxOf(tl.Used), math.Max(maxOf(tl.Allocated), maxOf(tl.Reserved)))
	showTotal := g.TotalBytes > 0 && top > 0.5*float64(g.TotalBytes)
	if showTotal {
		top = float64(g.TotalBytes)
	}
	if yMax > 0 {
		top = yMax
	}
	unit, uname := byteUnit(top)
	p := newPlot(title, ax.label, uname)
	p.Y.Min, p.Y.Max = 0, top/unit*1.05
	p.X.Min, p.X.Max = 0, math.Max(ax.x(tl.EndNS), 1e-9)
	addEpochsAndMarks(p, rep, g, ax, 0, p.Y.Max)
	// The legend lists the lines as they lie, top down: the GPU's total,
	// device used (which holds reserved), reserved (which holds
	// allocated), allocated; the lines are drawn the other way round, so
	// device used is on top where they meet.
	var entries []legendEntry
	if showTotal || (yMax > 0 && g.TotalBytes > 0 && float64(g.TotalBytes) <= yMax) {
		t := line(plotter.XYs{{X: 0, Y: float64(g.TotalBytes) / unit}, {X: p.X.Max, Y: float64(g.TotalBytes) / unit}}, colTotal, vg.Points(1))
		t.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		entries = append(entries, legendEntry{"GPU total", t})
	}
	for _, s := range []struct {
		s analysis.Series
		c color.Color
	}{{tl.Used, colUsed}, {tl.Reserved, colReserved}, {tl.Allocated, colAllocated}} {
		if len(s.s.T) == 0 {
			continue
		}
		if e := envelope(seriesXY(s.s, ax, unit), s.c, p.Y.Max*0.006); e != nil {
			entries = append(entries, legendEntry{s.s.Name, e})
		}
	}
	for i := len(entries) - 1; i >= 0; i-- {
		p.Add(entries[i].thumb.(plot.Plotter))
	}
	for _, e := range entries {
		p.Legend.Add(e.name, e.thumb)
	}
	return p
}

// floorChart: the leak series (floors) with the fitted line.
func floorChart(rep *analysis.Report, g analysis.GPUReport) *plot.Plot {
	l := g.Leak
	xlabel := "step"
	xdiv := 1.0
	if l.Per == "time" {
		u := TimeUnitFor(rep.DurationS)
		xlabel, xdiv = u.Label(), u.Seconds
	}
	top := 1.0
	for _, f := range g.Floors {
		top = math.Max(top, float64(f.Bytes))
	}
	unit, uname := byteUnit(top)
	// The floors drawn are those of the first series judged; the verdict
	// may rest on another (reserved for cache growth), whose fit is not
	// drawn on them.
	drawn := l.Basis
	if len(l.Growth) > 0 {
		drawn = l.Growth[0].Quantity
	}
	p := newPlot(fmt.Sprintf("%s: steady-state floor (%s): %s", g.Label(), drawn, verdictText(l.Judgement())), xlabel, uname)
	if len(g.Floors) == 0 {
		return p
	}
	if l.Per == "step" {
		p.X.Tick.Marker = intTicks{}
	}
	xy := make(plotter.XYs, len(g.Floors))
	for i, f := range g.Floors {
		xy[i].X, xy[i].Y = f.X/xdiv, float64(f.Bytes)/unit
	}
	slope := 0.0
	if l.Per == "step" && l.SlopeBytesPerStep != nil {
		slope = *l.SlopeBytesPerStep
	} else if l.SlopeBytesPerHour != nil {
		slope = *l.SlopeBytesPerHour / 3600
	}
	if e := envelope(xy, colAllocated, bandOf(xy)); e != nil {
		p.Add(e)
		p.Legend.Add("floor per "+map[string]string{"step": "step", "time": "time slice"}[l.Per], e)
	}
	// The fit is drawn over the floors, dashed with gaps and wider than
	// them, each dash on a white halo a point longer at both ends, so that
	// both show where they coincide (a clean leak): the dashes stand apart
	// from the floor, which shows in the gaps.
	if drawn == l.Basis && l.SlopeBytesPerHour != nil && g.SteadyFloorBytes != nil {
		first := g.FitFromX
		last := g.Floors[len(g.Floors)-1].X
		xy := plotter.XYs{
			{X: first / xdiv, Y: (l.FitIntercept + slope*first) / unit},
			{X: last / xdiv, Y: (l.FitIntercept + slope*last) / unit}}
		halo := line(xy, color.White, vg.Points(4.5))
		halo.Dashes, halo.DashOffs = []vg.Length{vg.Points(10), vg.Points(3)}, vg.Points(1)
		fit := line(xy, colFit, vg.Points(2.5))
		fit.Dashes = []vg.Length{vg.Points(8), vg.Points(5)}
		p.Add(halo, fit)
		p.Legend.Add("Theil–Sen fit", fit)
	}
	return p
}

// stepPeakChart: the probe's true per-step peak.
func stepPeakChart(g analysis.GPUReport) *plot.Plot {
	top := 1.0
	for _, f := range g.StepPeaks {
		top = math.Max(top, float64(f.Bytes))
	}
	unit, uname := byteUnit(top)
	p := newPlot(fmt.Sprintf("%s: peak allocated in each step", g.Label()), "step", uname)
	p.X.Tick.Marker = intTicks{}
	xy := make(plotter.XYs, len(g.StepPeaks))
	for i, f := range g.StepPeaks {
		xy[i].X, xy[i].Y = f.X, float64(f.Bytes)/unit
	}
	if e := envelope(xy, colAllocated, bandOf(xy)); e != nil {
		p.Add(e)
		p.Legend.Add("per-step peak", e)
	}
	p.Y.Min = 0
	return p
}

// fragChart: fragmentation and the stuck part over time.
func fragChart(rep *analysis.Report, g analysis.GPUReport) *plot.Plot {
	ax := newTimeAxis(rep)
	p := newPlot(fmt.Sprintf("%s: allocator fragmentation", g.Label()), ax.label, "share of reserved (%)")
	var f, s plotter.XYs
	for _, pt := range g.FragSeries {
		f = append(f, plotter.XY{X: ax.x(pt.TNS), Y: 100 * pt.Frag})
		s = append(s, plotter.XY{X: ax.x(pt.TNS), Y: 100 * pt.Stuck})
	}
	if len(f) > 0 {
		if e := envelope(f, colReserved, 0.6); e != nil {
			p.Add(e)
			p.Legend.Add("(reserved − allocated) / reserved", e)
		}
		if e := envelope(s, colStuck, 0.6); e != nil {
			p.Add(e)
			p.Legend.Add("inactive split / reserved", e)
		}
	}
	p.Y.Min, p.Y.Max = 0, 100
	return p
}

// procBuckets is a process's memory in buckets of width w from start: the
// most in each. The recorder lists processes only when memory moves (and
// every --procs-every), so a bucket without a sample holds the last value,
// from the process's first sample to its last.
func procBuckets(s analysis.Series, start, w int64, buckets int) []float64 {
	vals := make([]float64, buckets+1)
	last := make([]float64, buckets+1)
	seen := make([]bool, buckets+1)
	lo, hi := buckets+1, -1
	for k := range s.T {
		b := int((s.T[k] - start) / w)
		if b >= 0 && b <= buckets {
			vals[b] = math.Max(vals[b], float64(s.V[k]))
			last[b], seen[b] = float64(s.V[k]), true
			lo, hi = min(lo, b), max(hi, b)
		}
	}
	for b := lo + 1; b <= hi; b++ {
		if !seen[b] {
			vals[b], last[b] = last[b-1], last[b-1]
		}
	}
	return vals
}

// procChart: per-process memory (NVML) stacked.
func procChart(rep *analysis.Report, g analysis.GPUReport) *plot.Plot {
	ax := newTimeAxis(rep)
	const buckets = 400
	start, end := g.Timeline.StartNS, g.Timeline.EndNS
	w := max((end-start)/buckets, 1)
	// Each process's last value in every bucket, carried forward.
	stack := make([][]float64, len(g.Timeline.Procs))
	top := 1.0
	for i, s := range g.Timeline.Procs {
		stack[i] = procBuckets(s, start, w, buckets)
	}
	cum := make([]float64, buckets+1)
	for _, vals := range stack {
		for b := range vals {
			cum[b] += vals[b]
		}
	}
	for _, v := range cum {
		top = math.Max(top, v)
	}
	unit, uname := byteUnit(top)
	p := newPlot(fmt.Sprintf("%s: memory per process (NVML), stacked", g.Label()), ax.label, uname)
	base := make([]float64, buckets+1)
	order := make([]int, len(stack))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return g.Timeline.Procs[order[a]].Name < g.Timeline.Procs[order[b]].Name })
	for n, i := range order {
		var poly plotter.XYs
		for b := 0; b <= buckets; b++ {
			poly = append(poly, plotter.XY{X: ax.x(start + int64(b)*w), Y: (base[b] + stack[i][b]) / unit})
		}
		for b := buckets; b >= 0; b-- {
			poly = append(poly, plotter.XY{X: ax.x(start + int64(b)*w), Y: base[b] / unit})
		}
		pg, err := plotter.NewPolygon(poly)
		if err != nil {
			continue
		}
		c := palette[n%len(palette)]
		pg.Color = color.NRGBA{R: c.R, G: c.G, B: c.B, A: 170}
		pg.LineStyle.Width = 0
		p.Add(pg)
		p.Legend.Add(g.Timeline.Procs[i].Name, pg)
		for b := range base {
			base[b] += stack[i][b]
		}
	}
	p.Y.Min = 0
	return p
}

// overview draws every GPU's timeline in one column on one scale, so an
// imbalanced rank stands out.
func overview(rep *analysis.Report, w, rowH vg.Length) ([]byte, error) {
	n := len(rep.GPUs)
	top := 0.0
	for _, g := range rep.GPUs {
		top = math.Max(top, math.Max(maxOf(g.Timeline.Used), math.Max(maxOf(g.Timeline.Reserved), maxOf(g.Timeline.Allocated))))
	}
	if top == 0 {
		top = 1
	}
	plots := make([][]*plot.Plot, n)
	var leg plot.Legend
	for i, g := range rep.GPUs {
		p := timelineChart(rep, g, g.Label(), top)
		if i == 0 {
			leg = p.Legend
		}
		p.Legend = plot.NewLegend()
		plots[i] = []*plot.Plot{p}
	}
	img, release := newCanvas(w, rowH*vg.Length(n))
	defer release()
	dc := draw.New(img)
	// The first row's legend (every row has the same lines) stands beside
	// it, right of the data, as in the charts of one GPU.
	leg.Padding = legendRowGap
	lw := leg.Rectangle(dc).Max.X - leg.Rectangle(dc).Min.X + vg.Points(4)
	tiles := draw.Tiles{Rows: n, Cols: 1, PadTop: titleTop, PadBottom: vg.Points(2), PadY: vg.Points(4) + titleTop}
	canvases := plot.Align(plots, tiles, draw.Crop(dc, 0, -(lw+2*legendGapRight), 0, 0))
	for i := range plots {
		drawOnWhite(plots[i][0], canvases[i][0])
	}
	first := canvases[0][0]
	strip := draw.Crop(dc, w-lw-legendGapRight, -legendGapRight, first.Min.Y, -(dc.Max.Y-first.Max.Y)-plots[0][0].Title.TextStyle.Rectangle("M").Max.Y-vg.Points(14))
	leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
	leg.Draw(strip)
	return encodePNG(img)
}

// siteChart stacks the live bytes of the largest allocation sites over
// the run's site snapshots (each value held until the next snapshot), with
// the rest as "other sites" and the blocks without a stack on top. Its
// legend is returned to be drawn under the plot (renderLegendBelow).
func siteChart(rep *analysis.Report, g analysis.GPUReport) (*plot.Plot, []legendEntry) {
	ax := newTimeAxis(rep)
	series := g.Where.Series
	n := len(series[0].TNS)
	top := 1.0
	for k := 0; k < n; k++ {
		var sum float64
		for _, s := range series {
			sum += float64(s.Bytes[k])
		}
		top = math.Max(top, sum)
	}
	unit, uname := byteUnit(top)
	p := newPlot(fmt.Sprintf("%s: live memory by allocation site, stacked", g.Label()), ax.label, uname)
	// Step-wise: each snapshot's value holds until the next one (the last
	// until the run's end).
	xs := make([]int64, 0, 2*n)
	for k := 0; k < n; k++ {
		xs = append(xs, series[0].TNS[k])
		next := g.Timeline.EndNS
		if k+1 < n {
			next = series[0].TNS[k+1]
		}
		xs = append(xs, max(next, series[0].TNS[k]))
	}
	base := make([]float64, len(xs))
	var legend []legendEntry
	for i, s := range series {
		var poly plotter.XYs
		for j, x := range xs {
			poly = append(poly, plotter.XY{X: ax.x(x), Y: (base[j] + float64(s.Bytes[j/2])) / unit})
		}
		for j := len(xs) - 1; j >= 0; j-- {
			poly = append(poly, plotter.XY{X: ax.x(xs[j]), Y: base[j] / unit})
		}
		pg, err := plotter.NewPolygon(poly)
		if err != nil {
			continue
		}
		c := palette[i%len(palette)]
		switch s.Band {
		case sites.BandOther:
			c = color.RGBA{R: 170, G: 170, B: 170, A: 255}
		case sites.BandUntracked:
			c = color.RGBA{R: 220, G: 220, B: 220, A: 255}
		}
		pg.Color = color.NRGBA{R: c.R, G: c.G, B: c.B, A: 190}
		pg.LineStyle.Width = 0
		p.Add(pg)
		name := s.Name
		if s.Growth {
			name += " (grows)"
		}
		legend = append(legend, legendEntry{name, pg})
		for j := range base {
			base[j] += float64(s.Bytes[j/2])
		}
	}
	p.Y.Min = 0
	return p, legend
}
