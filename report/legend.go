package report

import (
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// legendEntry is one line of a legend drawn outside its plot.
type legendEntry struct {
	name  string
	thumb plot.Thumbnailer
}

// legendGap is the space between the plot and the legend under it, and
// between the legend's columns.
const legendGap = vg.Length(12)

// renderLegendBelow draws p into a PNG of w×h with the legend under the
// plot area instead of over it: a stacked chart fills its area up to the
// top, so a legend inside hides data, and allocation sites have long
// names. The entries keep their order, row by row, in as many columns as
// the widest entry allows; a name wider than the whole chart is shortened
// in the middle. The plot's own legend is not drawn.
func renderLegendBelow(p *plot.Plot, entries []legendEntry, w, h vg.Length) ([]byte, error) {
	c, release := newCanvas(w, h)
	defer release()
	dc := draw.Crop(draw.New(c), 0, 0, 0, -titleTop)
	leg := plot.NewLegend()
	leg.Top, leg.Left = true, true
	sty := leg.TextStyle
	// The room a name may take: the chart's width less the thumbnail,
	// the space after it and the margins.
	room := w - leg.ThumbnailWidth - sty.Rectangle(" ").Max.X - 2*legendGap
	names := make([]string, len(entries))
	var widest vg.Length
	for i, e := range entries {
		names[i] = fitText(e.name, room, func(s string) vg.Length { return sty.Rectangle(s).Max.X })
		widest = max(widest, sty.Rectangle(names[i]).Max.X)
	}
	colW := leg.ThumbnailWidth + sty.Rectangle(" ").Max.X + widest + legendGap
	cols := max(1, min(len(entries), int(math.Floor(float64((w-legendGap)/colW)))))
	rows := (len(entries) + cols - 1) / cols
	rowH := sty.Rectangle("Mg").Max.Y + vg.Points(3)
	legendH := vg.Length(rows)*rowH + legendGap
	if len(entries) == 0 || legendH > h/2 {
		legendH = 0 // nothing to list, or no room: the plot alone
	}
	p.Legend = plot.NewLegend()
	drawOnWhite(p, draw.Crop(dc, 0, 0, legendH, 0))
	if legendH == 0 {
		return encodePNG(c)
	}
	for i, e := range entries {
		row, col := i/cols, i%cols
		x := legendGap + vg.Length(col)*colW
		top := legendH - legendGap/2 - vg.Length(row)*rowH
		cell := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{
			Min: vg.Point{X: x, Y: top - rowH}, Max: vg.Point{X: x + colW, Y: top}}}
		one := leg
		one.Add(names[i], e.thumb)
		one.Draw(cell)
	}
	return encodePNG(c)
}

// fitText shortens s in the middle, with "…", until width says it fits
// in room; a name's start (the file) and end (line and function) stay.
func fitText(s string, room vg.Length, width func(string) vg.Length) string {
	if width(s) <= room {
		return s
	}
	r := []rune(s)
	for cut := 1; cut < len(r); cut++ {
		head := (len(r) - cut) / 2
		t := string(r[:head]) + "…" + string(r[head+cut:])
		if width(t) <= room {
			return t
		}
	}
	return "…"
}
