package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// epochChart: Δ device used and Δ allocated per epoch (or time slice).
func epochChart(g analysis.GPUReport) *plot.Plot {
	rows, what := epochRowsOf(g)
	bars, open := closedEpochBars(rows)
	// Many epochs are summed in groups, so that every bar can be read.
	if per := niceCeil((len(bars.used) + maxEpochBars - 1) / maxEpochBars); per > 1 {
		bars = bars.grouped(per)
		what = fmt.Sprintf("%d %ss", per, what)
	}
	top, apart := bars.scale()
	unit, uname := byteUnit(top)
	title := fmt.Sprintf("%s: memory added per %s", g.Label(), what)
	xlabel := what
	if len(open) > 0 {
		xlabel = fmt.Sprintf("%s (open, left out: %s %s, the run ended inside it)", what, what, strings.Join(open, ", "))
	}
	p := newPlot(title, xlabel, uname)
	if len(bars.used) == 0 {
		return p
	}
	bars.draw(p, top, unit, apart, what)
	return p
}

// epochRowsOf picks what an epoch chart counts in: the run's epochs, else
// the epochs inferred from its memory, else its time slices.
func epochRowsOf(g analysis.GPUReport) ([]analysis.EpochDelta, string) {
	switch {
	case len(g.Epochs) > 0:
		return g.Epochs, "epoch"
	case len(g.InferredEpochs) > 0:
		return g.InferredEpochs, "inferred epoch"
	default:
		return g.Intervals, "time slice"
	}
}

// epochBars are an epoch chart's bar pairs: bytes added to device used
// and to allocated, and the name under each pair.
type epochBars struct {
	used, alloc []float64
	names       []string
}

// closedEpochBars is a bar pair per closed row, and the names of the open
// ones.
func closedEpochBars(rows []analysis.EpochDelta) (b epochBars, open []string) {
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
		b.used, b.alloc = append(b.used, u), append(b.alloc, a)
		b.names = append(b.names, strconv.Itoa(e.Epoch))
	}
	return b, open
}

// grouped sums every per bars into one, named first–last.
func (b epochBars) grouped(per int) epochBars {
	var g epochBars
	for i := 0; i < len(b.used); i += per {
		j := min(i+per, len(b.used))
		su, sa := 0.0, 0.0
		for k := i; k < j; k++ {
			su, sa = su+b.used[k], sa+b.alloc[k]
		}
		g.used, g.alloc, g.names = append(g.used, su), append(g.alloc, sa), append(g.names, b.names[i]+"–"+b.names[j-1])
	}
	return g
}

// scale is the largest bar the axis must hold, and whether the first bar
// stands apart. The first bar is often the whole model arriving: when it
// is more than five times the largest of the others, the axis is set by
// the others and the first bar is cut at the top with its value written.
func (b epochBars) scale() (top float64, apart bool) {
	top, rest := 1.0, 0.0
	for i := range b.used {
		m := math.Max(math.Abs(b.used[i]), math.Abs(b.alloc[i]))
		top = math.Max(top, m)
		if i > 0 {
			rest = math.Max(rest, m)
		}
	}
	apart = len(b.used) >= 3 && rest > 0 && top > 5*rest
	if apart {
		top = rest
	}
	return top, apart
}

// draw adds the bars to p in unit, with the axes' range, the first bar cut
// and labelled when it stands apart, and the names under them.
func (b epochBars) draw(p *plot.Plot, top, unit float64, apart bool, what string) {
	used, alloc, names := b.used, b.alloc, b.names
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
