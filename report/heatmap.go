package report

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/palette/moreland"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/units"
)

// Many GPUs (a merged multi-node run, or more than manyGPUs) are drawn
// together as a heat map, one row per GPU, rather than as a line each: 32
// lines on one chart cannot be told apart, and 32 stacked charts do not
// fit a screen. Charts of their own are drawn only for the GPUs with a
// finding.
const manyGPUs = 8

// many says whether rep is drawn the many-GPU way.
func many(rep *analysis.Report) bool { return len(rep.Hosts) > 0 || len(rep.GPUs) > manyGPUs }

// notable says whether a GPU of a many-GPU report gets its own charts:
// its memory grows (a leak, the cache, unseen memory), it ran out of
// memory, had allocations retried, or is the worst.
func notable(rep *analysis.Report, g analysis.GPUReport) bool {
	return g.Leak.Judgement().Grows() || len(g.OOMs) > 0 || g.AllocRetries != nil && *g.AllocRetries > 0 ||
		rep.Worst != nil && rep.Worst.GPU == g.GPU
}

// maxSections bounds the GPUs of a many-GPU report that get charts and a
// section of their own, so that a run of a thousand GPUs that all leak
// still makes a report of bounded size; the others are in the heat map and
// the tables. maxHeatHeight bounds the heat map's height: its rows thin
// out past it.
const (
	maxSections   = 16
	maxHeatHeight = vg.Length(1200) // points
)

// sections is the set of GPUs of a many-GPU report drawn on their own: the
// worst first, then the notable ones in order, at most maxSections.
func sections(rep *analysis.Report) map[int]bool {
	out := map[int]bool{}
	if rep.Worst != nil {
		out[rep.Worst.GPU] = true
	}
	for _, g := range rep.GPUs {
		if len(out) >= maxSections {
			break
		}
		if notable(rep, g) {
			out[g.GPU] = true
		}
	}
	return out
}

// heatColumns is the number of time buckets of the heat map.
const heatColumns = 240

// usedGrid is device memory used: a row per GPU (first GPU at the top), a
// column per time bucket holding the highest sample in it (NaN where the
// GPU has none). lo and hi are the lowest and highest cell.
type usedGrid struct {
	rows   []string
	z      [][]float64 // [row][col], bytes
	x0, dx float64     // column centres, in the time axis' unit
	lo, hi float64
}

func newUsedGrid(rep *analysis.Report, ax timeAxis) *usedGrid {
	g := &usedGrid{x0: 0, dx: ax.x(rep.EndNS) / heatColumns, lo: math.Inf(1), hi: math.Inf(-1)}
	if g.dx <= 0 {
		g.dx = 1
	}
	for _, gr := range rep.GPUs {
		row := make([]float64, heatColumns)
		for i := range row {
			row[i] = math.NaN()
		}
		s := gr.Timeline.Used
		for i, t := range s.T {
			c := int(ax.x(t) / g.dx)
			if c < 0 || c >= heatColumns {
				continue
			}
			if v := float64(s.V[i]); math.IsNaN(row[c]) || v > row[c] {
				row[c] = v
			}
		}
		for _, v := range row {
			if !math.IsNaN(v) {
				g.lo, g.hi = math.Min(g.lo, v), math.Max(g.hi, v)
			}
		}
		g.rows = append(g.rows, gr.Label())
		g.z = append(g.z, row)
	}
	return g
}

// Dims, Z, X and Y make usedGrid a plotter.GridXYZ. Row r of the plot (y
// = r) is GPU n−1−r, so the first GPU is drawn at the top.
func (g *usedGrid) Dims() (c, r int) { return heatColumns, len(g.rows) }
func (g *usedGrid) Z(c, r int) float64 {
	return g.z[len(g.rows)-1-r][c]
}
func (g *usedGrid) X(c int) float64 { return g.x0 + (float64(c)+0.5)*g.dx }
func (g *usedGrid) Y(r int) float64 { return float64(r) }

// gpuTicks labels the heat map's rows with the GPUs' labels, every one
// while they fit, else every k-th.
type gpuTicks struct{ labels []string }

func (t gpuTicks) Ticks(min, max float64) []plot.Tick {
	n := len(t.labels)
	every := 1 + n/48
	var out []plot.Tick
	for r := 0; r < n; r++ {
		gpu := n - 1 - r
		label := ""
		if gpu%every == 0 {
			label = t.labels[gpu]
		}
		out = append(out, plot.Tick{Value: float64(r), Label: label})
	}
	return out
}

// heatmapChart draws device memory used of every GPU over time.
func heatmapChart(rep *analysis.Report, w, rowH vg.Length) ([]byte, error) {
	ax := newTimeAxis(rep)
	grid := newUsedGrid(rep, ax)
	if n := vg.Length(len(grid.rows)); n > 0 && rowH*n > maxHeatHeight {
		rowH = maxHeatHeight / n
	}
	if grid.hi <= grid.lo { // one value, or no sample at all
		grid.lo, grid.hi = 0, math.Max(grid.hi, 1)
	}
	pal := moreland.SmoothBlueRed()
	pal.SetMin(grid.lo)
	pal.SetMax(grid.hi)
	hm := plotter.NewHeatMap(grid, pal.Palette(64))
	hm.Min, hm.Max = grid.lo, grid.hi
	hm.NaN = colTotal
	p := newPlot(fmt.Sprintf("Device memory used, every GPU: blue %s, red %s (the run's lowest and highest); grey: no sample",
		units.FormatBytes(int64(grid.lo)), units.FormatBytes(int64(grid.hi))), ax.label, "")
	p.Add(hm)
	p.Y.Tick.Marker = gpuTicks{grid.rows}
	p.Y.Min, p.Y.Max = -0.5, float64(len(grid.rows))-0.5
	p.X.Min, p.X.Max = 0, ax.x(rep.EndNS)
	p.Y.Tick.Label.Font.Size = vg.Points(math.Min(9, math.Max(5, float64(rowH)*0.8)))
	h := rowH*vg.Length(len(grid.rows)) + vg.Points(90)
	return render(p, w, h)
}

// peaksChart draws each GPU's peak as a bar, with the imbalance in the
// title: the ranks side by side.
func peaksChart(rep *analysis.Report, w, h vg.Length) ([]byte, error) {
	im := rep.Imbalance
	basis := "device_used"
	if im != nil {
		basis = im.Basis
	}
	get := func(g analysis.GPUReport) *int64 {
		switch basis {
		case "step_peak":
			return g.PeakStepBytes
		case "allocated":
			return g.PeakAllocatedBytes
		}
		return g.PeakUsedBytes
	}
	top := 0.0
	for _, g := range rep.GPUs {
		if v := get(g); v != nil {
			top = math.Max(top, float64(*v))
		}
	}
	unit, name := byteUnit(top)
	vals := make(plotter.Values, len(rep.GPUs))
	var labels []string
	for i, g := range rep.GPUs {
		if v := get(g); v != nil {
			vals[i] = float64(*v) / unit
		}
		labels = append(labels, g.Label())
	}
	title := fmt.Sprintf("Peak %s per GPU", basis)
	if im != nil {
		title += fmt.Sprintf(": max/min %.2f (max %s, min %s)", im.Ratio, im.MaxGPU, im.MinGPU)
	}
	p := newPlot(title, "", name)
	bars, err := plotter.NewBarChart(vals, vg.Points(math.Max(2, float64(w)*0.7/float64(len(vals)))))
	if err != nil {
		return nil, err
	}
	bars.Color = colUsed
	bars.LineStyle.Width = 0
	p.Add(bars)
	p.Y.Min, p.Y.Max = 0, math.Max(top/unit*1.05, 1e-9)
	p.NominalX(labels...)
	p.X.Tick.Label.Rotation = math.Pi / 2
	p.X.Tick.Label.XAlign = -1
	p.X.Tick.Label.YAlign = -0.5
	p.X.Tick.Label.Font.Size = vg.Points(7)
	return render(p, w, h)
}
