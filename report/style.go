package report

import (
	"math"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The charts' look, shared by every PNG: one sans-serif face (the page's
// is sans-serif too; gonum/plot's default is a serif), integer ticks on
// axes that count (steps, epochs), and the legend beside the plot rather
// than over its data.

func init() {
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
	plotter.DefaultFont = plot.DefaultFont
}

// intTicks are gonum's default ticks kept at whole numbers and written
// without decimals (12 000, not 12000.00): for steps and epochs.
type intTicks struct{}

func (intTicks) Ticks(min, max float64) []plot.Tick {
	var out []plot.Tick
	for _, t := range (plot.DefaultTicks{}).Ticks(min, max) {
		if t.Value != math.Trunc(t.Value) {
			continue
		}
		if t.Label != "" {
			t.Label = groupDigits(int64(t.Value))
		}
		out = append(out, t)
	}
	if len(out) < 2 { // a range narrower than 1: one tick per whole number
		out = nil
		for v := math.Ceil(min); v <= max; v++ {
			out = append(out, plot.Tick{Value: v, Label: groupDigits(int64(v))})
		}
	}
	return out
}

// unitTicks are gonum's default ticks written without trailing zeros
// (2.5, not 2.50): for axes in a byte unit.
type unitTicks struct{}

func (unitTicks) Ticks(min, max float64) []plot.Tick {
	ts := (plot.DefaultTicks{}).Ticks(min, max)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
			if len(ts[i].Label) > 8 { // float noise: 0.30000000000000004
				ts[i].Label = strconv.FormatFloat(ts[i].Value, 'g', 4, 64)
			}
		}
	}
	return ts
}

// groupDigits writes n with a thin space between groups of three digits.
func groupDigits(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "\u2009" + s[i:]
	}
	if neg {
		s = "−" + s
	}
	return s
}

// legendGapRight is the space between the plot and a legend beside it,
// and between the legend and the chart's right edge.
const legendGapRight = vg.Length(10)

// titleTop is the space above a chart's title.
const titleTop = vg.Length(8)

// legendRowGap is the space between a legend's entries.
const legendRowGap = vg.Length(3)

// renderLegendRight draws p into a PNG of w×h with its legend to the right
// of the plot, outside the data: the plot is drawn in what is left of the
// width. A legend wider than a third of the chart stays inside.
func renderLegendRight(p *plot.Plot, w, h vg.Length) ([]byte, error) {
	c, release := newCanvas(w, h)
	defer release()
	dc := draw.Crop(draw.New(c), 0, 0, 0, -titleTop)
	leg := p.Legend
	leg.Padding = legendRowGap
	r := leg.Rectangle(dc)
	lw := r.Max.X - r.Min.X + vg.Points(4)
	if lw <= 0 || lw > w/3 {
		p.Legend = leg
		drawOnWhite(p, dc)
		return encodePNG(c)
	}
	p.Legend = plot.NewLegend()
	defer func() { p.Legend = leg }()
	plotArea := draw.Crop(dc, 0, -(lw + 2*legendGapRight), 0, 0)
	drawOnWhite(p, plotArea)
	// Level with the top of the data, under the title.
	strip := draw.Crop(dc, w-lw-legendGapRight, -legendGapRight, 0, -p.Title.TextStyle.Rectangle("M").Max.Y-p.Title.Padding-vg.Points(14))
	leg.Top, leg.Left, leg.XOffs, leg.YOffs = true, true, 0, 0
	leg.Draw(strip)
	return encodePNG(c)
}
