package report

import (
	"fmt"
	"html/template"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/analysis/units"
)

// alignX maps a time of a run to the compared x axis: steps, epochs or
// seconds since the run's start. It reports false where the run has no
// marks for that alignment (the caller falls back to time).
func alignX(rep *analysis.Report, gpu analysis.GPUReport, align compare.Align) (func(int64) float64, bool) {
	seconds := func(t int64) float64 { return float64(t-rep.StartNS) / 1e9 }
	switch align {
	case compare.AlignStep:
		if gpu.Leak.Per != "step" || len(gpu.Floors) < 2 {
			return seconds, false
		}
		fl := gpu.Floors
		return func(t int64) float64 { // interpolate between step marks
			i := sort.Search(len(fl), func(i int) bool { return fl[i].TNS >= t })
			switch {
			case i == 0:
				return fl[0].X
			case i >= len(fl):
				return fl[len(fl)-1].X
			}
			a, b := fl[i-1], fl[i]
			return a.X + (b.X-a.X)*float64(t-a.TNS)/float64(b.TNS-a.TNS)
		}, true
	case compare.AlignEpoch:
		ep := gpu.Epochs
		if len(ep) == 0 {
			return seconds, false
		}
		return func(t int64) float64 {
			for _, e := range ep {
				if t >= e.StartNS && t <= e.EndNS && e.EndNS > e.StartNS {
					return float64(e.Epoch) + float64(t-e.StartNS)/float64(e.EndNS-e.StartNS)
				}
			}
			if t < ep[0].StartNS {
				return float64(ep[0].Epoch)
			}
			return float64(ep[len(ep)-1].Epoch + 1)
		}, true
	}
	return seconds, true
}

// overlayChart draws one series of every run's worst GPU on one axis.
func overlayChart(c *compare.Comparison, what string) *plot.Plot {
	top := 1.0
	pick := func(g analysis.GPUReport) analysis.Series {
		if what == "allocated" {
			return g.Timeline.Allocated
		}
		return g.Timeline.Used
	}
	for i, r := range c.Reports {
		g := worstGPU(r, c.Runs[i].WorstGPU)
		top = math.Max(top, maxOf(pick(g)))
	}
	unit, uname := byteUnit(top)
	longest := 0.0
	for _, r := range c.Reports {
		longest = math.Max(longest, r.DurationS)
	}
	tu := TimeUnitFor(longest)
	xlabel := map[compare.Align]string{compare.AlignStep: "step", compare.AlignEpoch: "epoch", compare.AlignTime: tu.Label()}[c.Align]
	p := newPlot(fmt.Sprintf("%s of each run's worst GPU, aligned by %s", map[string]string{"used": "Device used", "allocated": "Allocated"}[what], c.Align), xlabel, uname)
	for i, r := range c.Reports {
		g := worstGPU(r, c.Runs[i].WorstGPU)
		s := pick(g)
		if len(s.T) == 0 {
			continue
		}
		x, aligned := alignX(r, g, c.Align)
		div := 1.0
		if c.Align == compare.AlignTime || !aligned {
			div = tu.Seconds
		}
		xy := make(plotter.XYs, len(s.T))
		for k := range s.T {
			xy[k].X, xy[k].Y = x(s.T[k])/div, float64(s.V[k])/unit
		}
		sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
		col := runColours[i%len(runColours)]
		if e := envelope(xy, col, top/unit*0.006); e != nil {
			p.Add(e)
			// Every run's swatch is a line, whether it is drawn as a
			// line or as a band.
			p.Legend.Add(r.Run, lineSwatch{col})
		}
	}
	p.Y.Min = 0
	return p
}

func worstGPU(r *analysis.Report, idx int) analysis.GPUReport {
	for _, g := range r.GPUs {
		if g.GPU == idx {
			return g
		}
	}
	if len(r.GPUs) > 0 {
		return r.GPUs[0]
	}
	return analysis.GPUReport{}
}

// byTagChart: peak device memory against the tag, the fit, and the budget.
func byTagChart(b *compare.ByTag) *plot.Plot {
	top := float64(b.TotalBytes)
	for _, p := range b.Points {
		top = math.Max(top, float64(p.PeakUsedBytes))
	}
	unit, uname := byteUnit(top)
	p := newPlot(fmt.Sprintf("Peak device memory by %s", b.Tag), b.Tag, uname)
	var pts plotter.XYs
	xmax := 0.0
	for _, q := range b.Points {
		pts = append(pts, plotter.XY{X: q.Value, Y: float64(q.PeakUsedBytes) / unit})
		xmax = math.Max(xmax, q.Value)
	}
	if b.MaxFittingValue != nil {
		xmax = math.Max(xmax, *b.MaxFittingValue)
	}
	sc, _ := plotter.NewScatter(pts)
	sc.Color = colUsed
	sc.GlyphStyle.Radius = vg.Points(4)
	p.Add(sc)
	p.Legend.Add("runs", sc)
	f := b.Fit
	fit := line(plotter.XYs{{X: 0, Y: f.InterceptBytes / unit}, {X: xmax * 1.05, Y: (f.InterceptBytes + f.SlopeBytesPerUnit*xmax*1.05) / unit}}, colFit, vg.Points(1.5))
	p.Add(fit)
	p.Legend.Add(fmt.Sprintf("fit: %s per unit + %s", units.FormatBytes(int64(f.SlopeBytesPerUnit)), units.FormatBytes(int64(f.InterceptBytes))), fit)
	if b.TotalBytes > 0 {
		budget := float64(b.TotalBytes) * (1 - b.Headroom) / unit
		bl := line(plotter.XYs{{X: 0, Y: budget}, {X: xmax * 1.05, Y: budget}}, colTotal, vg.Points(1))
		bl.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
		p.Add(bl)
		p.Legend.Add(fmt.Sprintf("GPU total less %g %% headroom", 100*b.Headroom), bl)
	}
	p.X.Min, p.Y.Min = 0, 0
	return p
}

// CompareCharts draws the comparison's charts.
func CompareCharts(c *compare.Comparison, opts Options) ([]Chart, error) {
	w, h := size(opts)
	var out []Chart
	add := func(file, title string, p *plot.Plot) error {
		b, err := render(p, w, h)
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		out = append(out, Chart{File: file, Title: title, GPU: -1, PNG: b})
		return nil
	}
	if err := add("overlay-used.png", "Device used, runs overlaid", overlayChart(c, "used")); err != nil {
		return nil, err
	}
	hasAlloc := false
	for _, r := range c.Runs {
		hasAlloc = hasAlloc || r.PeakAllocatedBytes != nil
	}
	if hasAlloc {
		if err := add("overlay-allocated.png", "Allocated, runs overlaid", overlayChart(c, "allocated")); err != nil {
			return nil, err
		}
	}
	var names []string
	var budgets []*budget.Budget
	for _, r := range c.Runs {
		if r.Budget != nil {
			names, budgets = append(names, r.Run), append(budgets, r.Budget)
		}
	}
	if len(budgets) > 0 {
		bh := budgetHeight(h, len(budgets), budgetParts(budgets))
		b, err := render(budgetChart("Budget at the peak of each run's worst GPU", names, budgets, bh), w, bh)
		if err != nil {
			return nil, fmt.Errorf("budgets.png: %w", err)
		}
		out = append(out, Chart{File: "budgets.png", Title: "Budget at the peak, runs side by side", GPU: -1, PNG: b})
	}
	if c.By != nil {
		if err := add("by-"+c.By.Tag+".png", "Peak memory by "+c.By.Tag, byTagChart(c.By)); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// WriteCompare writes the comparison's charts and page into dir, replacing
// an existing report as a whole (see Write).
func WriteCompare(dir string, c *compare.Comparison, opts Options) (string, error) {
	if _, err := checkFolder(filepath.Clean(dir)); err != nil {
		return "", err
	}
	charts, err := CompareCharts(c, opts)
	if err != nil {
		return "", err
	}
	var page []byte
	if !opts.PNGOnly {
		if page, err = ComparePage(c, charts); err != nil {
			return "", err
		}
	}
	return writeFolder(contextOf(opts), dir, charts, page)
}

// ComparePage renders the comparison as one self-contained page.
func ComparePage(c *compare.Comparison, charts []Chart) ([]byte, error) {
	view := struct {
		C      *compare.Comparison
		Charts []chartView
	}{C: c, Charts: chartViews(charts)}
	var b strings.Builder
	if err := compareTmpl.Execute(&b, view); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

var compareFuncs = template.FuncMap{
	"bytes": units.FormatBytesPtr,
	"ratio": func(r *float64) string {
		if r == nil {
			return "–"
		}
		return fmt.Sprintf("×%.2f", *r)
	},
	"pctp": funcs["pctp"],
	"slope": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return units.FormatBytes(int64(*v))
	},
	"ms": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%.1f ms", *v*1000)
	},
	"tags": func(m map[string]string) string {
		var s []string
		for k, v := range m {
			s = append(s, k+"="+v)
		}
		sort.Strings(s)
		return strings.Join(s, " ")
	},
	"num": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprintf("%g", *v)
	},
	"bytesf": func(v float64) string { return units.FormatBytes(int64(v)) },
	"num0":   func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) },
	"bytesv": units.FormatBytes,
}

var compareTmpl = template.Must(template.Must(template.New("compare").Funcs(compareFuncs).Parse(shared)).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>memrec comparison</title>
{{template "style"}}
</head>
<body data-images-loaded="pending">
<h1>memrec comparison: {{len .C.Runs}} runs</h1>
<section id="runs">
<p>Baseline: <b>{{.C.Baseline}}</b>. Each run's figures are its worst GPU's; ratios are to the baseline.</p>
{{range .C.Notes}}<p class="note">Note: {{.}}</p>{{end}}
<table>
<tr><th class="l">run</th><th class="l">tags</th><th>GPUs</th><th>peak used</th><th></th><th>peak allocated</th><th></th><th>steady state</th><th></th><th>Δ per epoch</th><th class="l">leak</th><th>slope / step</th><th>cached and free</th><th></th><th>time / step</th><th></th></tr>
{{range .C.Runs}}<tr{{if eq .Run $.C.Baseline}} class="base"{{end}}><td class="l">{{.Run}}</td><td class="l">{{tags .Tags}}</td><td>{{.GPUs}}</td>
<td>{{bytes .PeakUsedBytes}}</td><td>{{ratio .PeakUsedRatio}}</td><td>{{bytes .PeakAllocatedBytes}}</td><td>{{ratio .PeakAllocatedRatio}}</td>
<td>{{bytes .SteadyBytes}}</td><td>{{ratio .SteadyRatio}}</td><td>{{bytes .EpochDeltaBytes}}</td>
<td class="l{{if .LeakKind.Grows}} leak{{end}}">{{.LeakKind}}</td><td>{{slope .SlopeBytesPerStep}}</td>
<td>{{pctp .FragmentationMean}}</td><td>{{ratio .FragmentationRatio}}</td><td>{{ms .StepTimeS}}</td><td>{{ratio .StepTimeRatio}}</td></tr>
{{end}}</table>
</section>
{{with .C.By}}<section id="by">
<h2>Peak memory by {{.Tag}}</h2>
<p class="statement">{{.Statement}}</p>
<p>Made from {{.BasisWords}}.{{with .IntervalWords}} {{.}}.{{else}}{{with .MaxFittingValueNoHeadroom}} Without headroom: up to {{num0 .}}.{{end}}{{end}}</p>
{{with .NeedFit}}<p>Per-step peak allocated: {{bytesf .SlopeBytesPerUnit}} per unit of {{$.C.By.Tag}} + {{bytesf .InterceptBytes}} (R² = {{printf "%.4f" .R2}}).</p>{{end}}
<p>Peak device memory, least-squares fit: {{bytesf .Fit.SlopeBytesPerUnit}} per unit of {{.Tag}} + {{bytesf .Fit.InterceptBytes}} (R² = {{printf "%.4f" .Fit.R2}}).</p>
<table><tr><th class="l">run</th><th>{{.Tag}}</th><th>peak used</th></tr>
{{range .Points}}<tr><td class="l">{{.Run}}</td><td>{{.Value}}</td><td>{{bytesv .PeakUsedBytes}}</td></tr>{{end}}</table>
</section>{{end}}
<section id="charts">
{{range .Charts}}<figure><img src="{{.Src}}" alt="{{.Title}}" data-file="{{.File}}"><figcaption>{{.Title}}</figcaption></figure>
{{end}}
</section>
{{template "imgcheck"}}
</body>
</html>
`))
