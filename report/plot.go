package report

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math"
	"sync"

	"github.com/memrec/memrec/analysis"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
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

// drawOnWhite draws p on c, a part of a canvas that newCanvas painted
// white and nothing has drawn on yet: the plot's own white background,
// which the rasterizer paints pixel by pixel, would change no pixel.
func drawOnWhite(p *plot.Plot, c draw.Canvas) {
	if p.BackgroundColor != color.White {
		p.Draw(c)
		return
	}
	p.BackgroundColor = nil
	defer func() { p.BackgroundColor = color.White }()
	p.Draw(c)
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
//
// All bars are one fill (see barPath): the rasterizer's cost per fill, a
// pass over every row of the image, is paid once instead of once a bar, and
// bars that touch are one shape, so the pixels they share are painted once
// instead of twice at part coverage (a seam).
type envelopeBars struct {
	cols  []envColumn
	w     float64
	color color.Color
}

// Plot implements plot.Plotter.
func (e *envelopeBars) Plot(c draw.Canvas, p *plot.Plot) {
	trX, trY := p.Transforms(&c)
	bars := make([]bar, 0, len(e.cols))
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
		// Clipped to the canvas, a bar stays a rectangle.
		b := bar{max(x0, c.Min.X), min(x1, c.Max.X), max(trY(lo), c.Min.Y), min(trY(hi), c.Max.Y)}
		if b.x0 < b.x1 && b.y0 < b.y1 {
			bars = append(bars, b)
		}
	}
	if path := barPath(bars); len(path) > 0 {
		c.SetColor(e.color)
		c.Fill(path)
	}
}

// bar is a rectangle on the canvas.
type bar struct{ x0, x1, y0, y1 vg.Length }

// barOutline is the most bars one closed outline of barPath goes around.
const barOutline = 32

// barPath is the outline of bars, ordered by x, for one fill by the
// nonzero winding rule: bars that overlap or touch fill as their union.
//
// Where a bar ends at the next one's left edge and their spans of y meet
// (adjacent columns always do), one outline goes around both, stepping
// along their tops and bottoms: a bar's side costs the rasterizer a cell a
// row, and where outlines of rectangles would put two opposite sides on
// each row the bars share, a step puts only the rows where they differ.
//
// The rasterizer keeps a row's cells in a list by x that it searches from
// the left, so a cell left of all others costs one step and one right of
// n costs n. The outlines go right to left, each along its top right to
// left first; only its bottom, left to right, walks, and only over its
// own cells, as an outline goes around at most barOutline bars.
func barPath(bars []bar) vg.Path {
	path := make(vg.Path, 0, 4*len(bars)+8)
	for k := len(bars) - 1; k >= 0; {
		j := k
		for j > 0 && k-j+1 < barOutline && joined(bars[j-1], bars[j]) {
			j--
		}
		path.Move(vg.Point{X: bars[k].x1, Y: bars[k].y0})
		path.Line(vg.Point{X: bars[k].x1, Y: bars[k].y1})
		for m := k; m > j; m-- {
			path.Line(vg.Point{X: bars[m].x0, Y: bars[m].y1})
			path.Line(vg.Point{X: bars[m].x0, Y: bars[m-1].y1})
		}
		path.Line(vg.Point{X: bars[j].x0, Y: bars[j].y1})
		path.Line(vg.Point{X: bars[j].x0, Y: bars[j].y0})
		for m := j; m < k; m++ {
			path.Line(vg.Point{X: bars[m].x1, Y: bars[m].y0})
			path.Line(vg.Point{X: bars[m].x1, Y: bars[m+1].y0})
		}
		path.Close()
		k = j - 1
	}
	return path
}

// joined says whether b starts where a ends and their spans of y meet, so
// one outline goes around both.
func joined(a, b bar) bool {
	return a.x1 == b.x0 && b.y0 <= a.y1 && a.y0 <= b.y1
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

// render draws p into a PNG of w×h, its legend beside the plot
// (renderLegendRight).
func render(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	return renderLegendRight(p, w, h)
}

// pngEncoder writes the charts as PNG, favouring speed over the last few
// percent of size (charts are mostly flat colour and compress well
// anyway). Its pool hands each chart the row buffers and the compressor a
// previous chart left, reset, instead of allocating and zeroing them once
// a chart: the bytes written are the same.
var pngEncoder = png.Encoder{CompressionLevel: png.BestSpeed, BufferPool: &pngBuffers{}}

// pngBuffers is a png.EncoderBufferPool safe for the charts drawn at once.
type pngBuffers struct{ p sync.Pool }

func (b *pngBuffers) Get() *png.EncoderBuffer {
	e, _ := b.p.Get().(*png.EncoderBuffer)
	return e
}

func (b *pngBuffers) Put(e *png.EncoderBuffer) { b.p.Put(e) }

// encodePNG writes a canvas as PNG: pngEncoder's bytes, by rgbPNG where
// it can (a chart is opaque).
func encodePNG(c *vgimg.Canvas) ([]byte, error) {
	if img, ok := c.Image().(*image.RGBA); ok {
		if b, ok := rgbPNG(img); ok {
			return b, nil
		}
	}
	var buf bytes.Buffer
	if err := pngEncoder.Encode(&buf, c.Image()); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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
