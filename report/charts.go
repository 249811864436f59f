package report

import (
	"bytes"
	"fmt"
	"image/color"
	"image/png"
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/storage/wire"
)

// Chart colours: one per series, the same in every chart.
var (
	colUsed      = color.RGBA{R: 31, G: 119, B: 180, A: 255}
	colAllocated = color.RGBA{R: 44, G: 160, B: 44, A: 255}
	colReserved  = color.RGBA{R: 255, G: 127, B: 14, A: 255}
	colTotal     = color.RGBA{R: 90, G: 90, B: 90, A: 255}
	colOOM       = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	colMark      = color.NRGBA{R: 148, G: 103, B: 189, A: 200}
	colEpoch     = color.NRGBA{R: 120, G: 120, B: 200, A: 30}
	colFit       = color.RGBA{R: 214, G: 39, B: 40, A: 255}
	colStuck     = color.RGBA{R: 140, G: 86, B: 75, A: 255}
	palette      = []color.RGBA{colUsed, colAllocated, colReserved, {R: 148, G: 103, B: 189, A: 255}, colStuck,
		{R: 227, G: 119, B: 194, A: 255}, {R: 127, G: 127, B: 127, A: 255}, {R: 188, G: 189, B: 34, A: 255}, {R: 23, G: 190, B: 207, A: 255}}
)

// runColours tell runs apart in a chart of several (compare's overlays,
// memrec view): Tableau 10, whose colours stay apart for most readers.
// view.js lists the same.
var runColours = []color.RGBA{
	{R: 31, G: 119, B: 180, A: 255}, {R: 255, G: 127, B: 14, A: 255}, {R: 44, G: 160, B: 44, A: 255},
	{R: 214, G: 39, B: 40, A: 255}, {R: 148, G: 103, B: 189, A: 255}, {R: 140, G: 86, B: 75, A: 255},
	{R: 227, G: 119, B: 194, A: 255}, {R: 127, G: 127, B: 127, A: 255}, {R: 188, G: 189, B: 34, A: 255},
	{R: 23, G: 190, B: 207, A: 255},
}

// lineSwatch is a legend entry drawn as a short line of one colour.
type lineSwatch struct{ c color.Color }

// Thumbnail implements plot.Thumbnailer.
func (l lineSwatch) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(draw.LineStyle{Color: l.c, Width: vg.Points(2.5)}, c.Min.X, y, c.Max.X, y)
}

// byteUnit picks GiB or MiB for values up to max.
func byteUnit(max float64) (float64, string) {
	if max >= 2<<30 {
		return 1 << 30, "GiB"
	}
	if max >= 2<<20 {
		return 1 << 20, "MiB"
	}
	return 1 << 10, "KiB"
}

// timeAxis maps Unix ns to the run's time unit since its start.
type timeAxis struct {
	start int64
	div   float64
	label string
}

func newTimeAxis(rep *analysis.Report) timeAxis {
	u := TimeUnitFor(rep.DurationS)
	return timeAxis{rep.StartNS, u.Seconds * 1e9, u.Label()}
}

func (a timeAxis) x(t int64) float64 { return float64(t-a.start) / a.div }

func newPlot(title, xlabel, ylabel string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Y.Tick.Marker = unitTicks{}
	p.Add(plotter.NewGrid())
	return p
}

func line(xy plotter.XYs, c color.Color, width vg.Length) *plotter.Line {
	l, _ := plotter.NewLine(xy)
	l.Color = c
	l.Width = width
	return l
}

// legendPlotter is a plotter with a legend entry.
type legendPlotter interface {
	plot.Plotter
	plot.Thumbnailer
}

// envelopeColumns is the number of columns a dense series is reduced to.
const envelopeColumns = 700

// envelope draws points as the band between their lowest and highest value
// in each of envelopeColumns columns of x: every peak stays visible, and a
// dense sawtooth costs two edges per column instead of thousands of strokes.
//
// A band is at least minBand high (in y units), so a flat series still shows
// as a line.
//
// Series with fewer points than columns are drawn as a plain line.
func envelope(xy plotter.XYs, c color.Color, minBand float64) legendPlotter {
	if len(xy) == 0 {
		return nil
	}
	if len(xy) <= envelopeColumns {
		return line(xy, c, vg.Points(1.2))
	}
	x0, x1 := xy[0].X, xy[len(xy)-1].X
	for _, p := range xy {
		x0, x1 = math.Min(x0, p.X), math.Max(x1, p.X)
	}
	w := (x1 - x0) / envelopeColumns
	if w <= 0 {
		w = 1
	}
	var cols []envColumn
	for _, p := range xy {
		b := math.Floor((p.X - x0) / w)
		if len(cols) > 0 && cols[len(cols)-1].x == x0+b*w {
			c := &cols[len(cols)-1]
			c.lo, c.hi = math.Min(c.lo, p.Y), math.Max(c.hi, p.Y)
			continue
		}
		cols = append(cols, envColumn{x: x0 + b*w, lo: p.Y, hi: p.Y})
	}
	for i := range cols {
		if d := minBand - (cols[i].hi - cols[i].lo); d > 0 {
			cols[i].hi += d / 2
			cols[i].lo -= d / 2
		}
	}
	r, g, b, _ := c.RGBA()
	return &envelopeBars{cols: cols, w: w, color: color.NRGBA{R: uint8(r >> 8), G: uint8(g >> 8), B: uint8(b >> 8), A: 140}}
}

// envColumn is one column of an envelope: its left x and its band.
type envColumn struct{ x, lo, hi float64 }

// envelopeBars draws an envelope as one filled bar per column. A single
// polygon around the band is the same picture where columns overlap, but
// where they do not (a series sampled at random points of a sawtooth, a
// few points a column) its edges zig-zag across the whole chart, and the
// rasterizer's time grows with the square of the crossings per row, which
// made one chart cost seconds of CPU. Bars are four edges each.
type envelopeBars struct {
	cols  []envColumn
	w     float64
	color color.Color
}

// Plot implements plot.Plotter.
func (e *envelopeBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	for i, col := range e.cols {
		// A bar reaches the next column present: a sparse series holds its
		// value across empty columns, as a line would, instead of breaking.
		// Where the next column is adjacent, the bar reaches to its band,
		// so a jump stays joined as the polygon around the band joined it.
		next, lo, hi := col.x+e.w, col.lo, col.hi
		if i+1 < len(e.cols) {
			n := e.cols[i+1]
			next = n.x
			if n.x-col.x < 1.5*e.w {
				lo, hi = math.Min(lo, n.hi), math.Max(hi, n.lo)
			}
		}
		x0, x1 := trX(col.x), trX(next)
		if x1-x0 < vg.Points(0.5) { // at least half a point wide, or it vanishes
			x1 = x0 + vg.Points(0.5)
		}
		y0, y1 := trY(lo), trY(hi)
		c.FillPolygon(e.color, c.ClipPolygonXY([]vg.Point{{X: x0, Y: y0}, {X: x1, Y: y0}, {X: x1, Y: y1}, {X: x0, Y: y1}}))
	}
}

// DataRange implements plot.DataRanger.
func (e *envelopeBars) DataRange() (xmin, xmax, ymin, ymax float64) {
	xmin, ymin = math.Inf(1), math.Inf(1)
	xmax, ymax = math.Inf(-1), math.Inf(-1)
	for _, col := range e.cols {
		xmin, xmax = math.Min(xmin, col.x), math.Max(xmax, col.x+e.w)
		ymin, ymax = math.Min(ymin, col.lo), math.Max(ymax, col.hi)
	}
	return
}

// Thumbnail implements plot.Thumbnailer: a filled square for the legend.
func (e *envelopeBars) Thumbnail(c *draw.Canvas) {
	pts := []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}}
	c.FillPolygon(e.color, c.ClipPolygonY(pts))
}

func seriesXY(s analysis.Series, ax timeAxis, unit float64) plotter.XYs {
	xy := make(plotter.XYs, len(s.T))
	for i := range s.T {
		xy[i].X, xy[i].Y = ax.x(s.T[i]), float64(s.V[i])/unit
	}
	return xy
}

func maxOf(s analysis.Series) float64 {
	m := 0.0
	for _, v := range s.V {
		m = math.Max(m, float64(v))
	}
	return m
}

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

// epochChart: Δ device used and Δ allocated per epoch (or time slice).
func epochChart(g analysis.GPUReport) *plot.Plot {
	rows, what := g.Epochs, "epoch"
	switch {
	case len(rows) > 0:
	case len(g.InferredEpochs) > 0:
		rows, what = g.InferredEpochs, "inferred epoch"
	default:
		rows, what = g.Intervals, "time slice"
	}
	var used, alloc []float64
	var names, open []string
	for _, e := range rows {
		if e.Open {
			// The run ended inside it: its change is not growth, and is
			// left out rather than drawn as a bar.
			open = append(open, strconv.Itoa(e.Epoch))
			continue
		}
		u, a := 0.0, 0.0
		if e.DeltaUsedBytes != nil {
			u = float64(*e.DeltaUsedBytes)
		}
		if e.DeltaAllocatedBytes != nil {
			a = float64(*e.DeltaAllocatedBytes)
		}
		used, alloc = append(used, u), append(alloc, a)
		names = append(names, strconv.Itoa(e.Epoch))
	}
	// Many epochs are summed in groups, so that every bar can be read.
	per := niceCeil((len(used) + maxEpochBars - 1) / maxEpochBars)
	if per > 1 {
		var gu, ga []float64
		var gn []string
		for i := 0; i < len(used); i += per {
			j := min(i+per, len(used))
			su, sa := 0.0, 0.0
			for k := i; k < j; k++ {
				su, sa = su+used[k], sa+alloc[k]
			}
			gu, ga, gn = append(gu, su), append(ga, sa), append(gn, names[i]+"–"+names[j-1])
		}
		used, alloc, names = gu, ga, gn
		what = fmt.Sprintf("%d %ss", per, what)
	}
	// The first bar is often the whole model arriving: when it is more
	// than five times the largest of the others, the axis is set by the
	// others and the first bar is cut at the top with its value written.
	top, rest := 1.0, 0.0
	for i := range used {
		m := math.Max(math.Abs(used[i]), math.Abs(alloc[i]))
		top = math.Max(top, m)
		if i > 0 {
			rest = math.Max(rest, m)
		}
	}
	apart := len(used) >= 3 && rest > 0 && top > 5*rest
	if apart {
		top = rest
	}
	unit, uname := byteUnit(top)
	title := fmt.Sprintf("%s: memory added per %s", g.Label(), what)
	xlabel := what
	if len(open) > 0 {
		xlabel = fmt.Sprintf("%s (open, left out: %s %s, the run ended inside it)", what, what, strings.Join(open, ", "))
	}
	p := newPlot(title, xlabel, uname)
	if len(used) == 0 {
		return p
	}
	first := [2]float64{used[0], alloc[0]}
	bu, ba := make(plotter.Values, len(used)), make(plotter.Values, len(used))
	for i := range used {
		bu[i], ba[i] = used[i]/unit, alloc[i]/unit
	}
	// Room above and below the bars, so that none is cut by the frame.
	hi, lo := 0.0, 0.0
	for i := range bu {
		hi, lo = math.Max(hi, math.Max(bu[i], ba[i])), math.Min(lo, math.Min(bu[i], ba[i]))
	}
	p.Y.Max, p.Y.Min = 1.08*hi+0.02*(hi-lo), 1.08*lo-0.02*(hi-lo)
	if apart {
		lim := 1.25 * top / unit
		bu[0], ba[0] = math.Max(-lim, math.Min(lim, bu[0])), math.Max(-lim, math.Min(lim, ba[0]))
		p.Y.Max, p.Y.Min = 1.45*top/unit, math.Min(0, -1.45*top/unit*boolf(minOf(used[1:], alloc[1:]) < 0))
	}
	w := vg.Points(math.Min(10, 180/float64(len(used))))
	b1, _ := plotter.NewBarChart(bu, w)
	b1.Color, b1.Offset, b1.LineStyle.Width = colUsed, -w/2, 0
	b2, _ := plotter.NewBarChart(ba, w)
	b2.Color, b2.Offset, b2.LineStyle.Width = colAllocated, w/2, 0
	p.Add(b1, b2)
	p.Legend.Add("Δ device used", b1)
	p.Legend.Add("Δ allocated", b2)
	if apart {
		u0, n0 := byteUnit(math.Max(math.Abs(first[0]), math.Abs(first[1])))
		lab, err := plotter.NewLabels(plotter.XYLabels{
			XYs:    []plotter.XY{{X: 0, Y: 1.28 * top / unit}},
			Labels: []string{fmt.Sprintf("%s %s: %+.2f / %+.2f %s (cut)", what, names[0], first[0]/u0, first[1]/u0, n0)},
		})
		if err == nil {
			p.Add(lab)
		}
	}
	// Bars stand clear of the axes; names are written every few bars when
	// there are too many to read.
	p.X.Min, p.X.Max = -0.9, float64(len(used))-0.1
	step := (len(names) + maxEpochLabels - 1) / maxEpochLabels
	p.X.Tick.Marker = nominalTicks{names, step}
	return p
}

// maxEpochBars is the most bars (pairs) an epoch chart draws; past it
// epochs are summed in groups. maxEpochLabels is the most names under them.
const (
	maxEpochBars   = 48
	maxEpochLabels = 8
)

// niceCeil is the least of 1, 2, 5, 10, 20, 50, … at or above n.
func niceCeil(n int) int {
	for m := 1; ; m *= 10 {
		for _, k := range []int{1, 2, 5} {
			if k*m >= n {
				return k * m
			}
		}
	}
}

// nominalTicks names every step-th of the bars at 0, 1, 2, …
type nominalTicks struct {
	names []string
	step  int
}

func (n nominalTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for i, name := range n.names {
		if i%n.step != 0 {
			name = ""
		}
		out = append(out, plot.Tick{Value: float64(i), Label: name})
	}
	return out
}

func minOf(a, b []float64) float64 {
	m := 0.0
	for i := range a {
		m = math.Min(m, math.Min(a[i], b[i]))
	}
	return m
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
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

// render draws p into a PNG of w×h, its legend beside the plot
// (renderLegendRight).
func render(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	return renderLegendRight(p, w, h)
}

// encodePNG writes a canvas as PNG, favouring speed over the last few
// percent of size (charts are mostly flat colour and compress well anyway).
func encodePNG(c *vgimg.Canvas) ([]byte, error) {
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, c.Image()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
	img := vgimg.New(w, rowH*vg.Length(n))
	dc := draw.New(img)
	// The first row's legend (every row has the same lines) stands beside
	// it, right of the data, as in the charts of one GPU.
	leg.Padding = legendRowGap
	lw := leg.Rectangle(dc).Max.X - leg.Rectangle(dc).Min.X + vg.Points(4)
	tiles := draw.Tiles{Rows: n, Cols: 1, PadTop: titleTop, PadBottom: vg.Points(2), PadY: vg.Points(4) + titleTop}
	canvases := plot.Align(plots, tiles, draw.Crop(dc, 0, -(lw+2*legendGapRight), 0, 0))
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	first := canvases[0][0]
	strip := draw.Crop(dc, w-lw-legendGapRight, -legendGapRight, first.Min.Y, -(dc.Max.Y-first.Max.Y)-plots[0][0].Title.TextStyle.Rectangle("M").Max.Y-vg.Points(14))
	leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
	leg.Draw(strip)
	return encodePNG(img)
}

// bandOf is a minimum band height for points whose y axis is set by their
// own range: 0.6 % of it.
func bandOf(xy plotter.XYs) float64 {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, p := range xy {
		lo, hi = math.Min(lo, p.Y), math.Max(hi, p.Y)
	}
	if hi <= lo {
		return math.Max(math.Abs(hi)*0.006, 1e-9)
	}
	return (hi - lo) * 0.006
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
