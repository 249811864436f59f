// Package report draws an analysed run: PNG charts (gonum/plot) and one
// self-contained HTML page with the analysis, the verdicts in plain words and
// the charts embedded. It takes analysis results, never the database.
package report

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"math"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/series"
)

// Options size the charts and choose the output.
type Options struct {
	Width, Height int  // chart size in pixels; 0: 1200×500
	PNGOnly       bool // no index.html
	// Lines, when set, are the run's lines at every zoom (the viewer's
	// index): the page's timeline then embeds a pyramid of levels, each
	// four times finer than the one before, within PageBytes; without it
	// the page holds the analysis' timeline only.
	Lines *series.Index
	// Raw reads a line's samples, for the levels finer than the index's
	// buckets; nil: the finest level is the index's buckets.
	Raw func(series.Key) series.RawReader
	// PageBytes bounds the page (0: 5 MB): the timeline's finer levels
	// are added while the page, its charts and tables included, stays
	// within it. A page whose charts, tables and coarsest timeline alone
	// pass it is written whole.
	PageBytes int
	// Context stops Write and WriteCompare once done (the first Ctrl-C):
	// no chart is begun after it, and the folder is left as it was, what
	// was written beside it removed. nil: never stopped.
	Context context.Context
}

// contextOf is opts' Context, or one never done.
func contextOf(opts Options) context.Context {
	if opts.Context == nil {
		return context.Background()
	}
	return opts.Context
}

// Chart is one PNG of the report.
type Chart struct {
	File  string // name in the report folder
	Title string
	GPU   int // -1 for the multi-GPU overview or heat map, -2 for the peaks per GPU
	PNG   []byte
}

// Charts draws every chart of the report, in parallel (one per core).
func Charts(rep *analysis.Report, opts Options) ([]Chart, error) {
	w, h := size(opts)
	type job struct {
		Chart
		draw func() ([]byte, error)
	}
	var jobs []job
	add := func(file, title string, gpu int, mk func() *plot.Plot) {
		jobs = append(jobs, job{Chart{File: file, Title: title, GPU: gpu}, func() ([]byte, error) { return render(mk(), w, h) }})
	}
	switch {
	case many(rep):
		jobs = append(jobs, job{Chart{File: "heatmap.png", Title: "Every GPU over time", GPU: -1},
			func() ([]byte, error) { return heatmapChart(rep, w, vg.Points(12)) }},
			job{Chart{File: "peaks.png", Title: "Peak per GPU", GPU: -2},
				func() ([]byte, error) { return peaksChart(rep, w, h) }})
	case len(rep.GPUs) > 1:
		jobs = append(jobs, job{Chart{File: "overview.png", Title: "All GPUs on one scale", GPU: -1},
			func() ([]byte, error) { return overview(rep, w, h*3/5) }})
	}
	sec := sections(rep)
	for _, g := range rep.GPUs {
		if many(rep) && !sec[g.GPU] {
			continue // in the heat map only
		}
		pre := fmt.Sprintf("gpu%d-", g.GPU)
		add(timelineFile(g.GPU), "Memory over time", g.GPU, func() *plot.Plot {
			return timelineChart(rep, g, fmt.Sprintf("%s: memory over time", g.Label()), 0)
		})
		if len(g.Epochs)+len(g.Intervals) > 0 {
			add(pre+"epochs.png", "Memory added per epoch", g.GPU, func() *plot.Plot { return epochChart(g) })
		}
		if len(g.Floors) > 0 {
			add(pre+"leak.png", "Leak: steady-state floor and fit", g.GPU, func() *plot.Plot { return floorChart(rep, g) })
		}
		if len(g.StepPeaks) > 0 {
			add(pre+"steppeak.png", "Peak allocated per step", g.GPU, func() *plot.Plot { return stepPeakChart(g) })
		}
		if g.Budget != nil {
			jobs = append(jobs, job{Chart{File: pre + "budget.png", Title: "Budget at the peak", GPU: g.GPU}, func() ([]byte, error) {
				bh := budgetHeight(h, 1, budgetParts([]*budget.Budget{g.Budget}))
				return render(gpuBudgetChart(g, bh), w, bh)
			}})
		}
		if len(g.FragSeries) > 0 {
			add(pre+"fragmentation.png", "Fragmentation", g.GPU, func() *plot.Plot { return fragChart(rep, g) })
		}
		if len(g.Timeline.Procs) > 0 {
			add(pre+"processes.png", "Memory per process", g.GPU, func() *plot.Plot { return procChart(rep, g) })
		}
		if g.Where != nil && len(g.Where.Series) > 0 && len(g.Where.Series[0].TNS) > 0 {
			jobs = append(jobs, job{Chart{File: pre + "sites.png", Title: "Live memory by allocation site", GPU: g.GPU}, func() ([]byte, error) {
				p, legend := siteChart(rep, g)
				return renderLegendBelow(p, legend, w, h)
			}})
		}
	}
	out := make([]Chart, len(jobs))
	errs := make([]error, len(jobs))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for i, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			out[i] = j.Chart
			if err := contextOf(opts).Err(); err != nil {
				errs[i] = err
				return
			}
			out[i].PNG, errs[i] = j.draw()
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%s: %w", j.File, errs[i])
			}
		}()
	}
	wg.Wait()
	chartImages.drop()
	if err := contextOf(opts).Err(); err != nil {
		return nil, err
	}
	return out, errors.Join(errs...)
}

// timelineFile is the name of a GPU's timeline PNG.
func timelineFile(gpu int) string { return fmt.Sprintf("gpu%d-timeline.png", gpu) }

func size(o Options) (vg.Length, vg.Length) {
	w, h := o.Width, o.Height
	if w <= 0 {
		w = 1200
	}
	if h <= 0 {
		h = 500
	}
	// vgimg draws at 96 dpi by default: points = pixels × 72/96.
	return vg.Length(w) * 72 / 96, vg.Length(h) * 72 / 96
}

// Write writes the report into dir: the PNGs and index.html (unless
// PNGOnly). It builds the report beside dir and swaps it in at the end, so
// an existing report is replaced only as a whole. dir must be new, empty,
// or a report memrec wrote (it holds MarkerFile): anything else is refused
// with ErrNotReport or ErrNotFolder before anything is written. It returns
// the page's path (or the folder's, with PNGOnly).
func Write(dir string, rep *analysis.Report, opts Options) (string, error) {
	if _, err := checkFolder(filepath.Clean(dir)); err != nil {
		return "", err
	}
	charts, err := Charts(rep, opts)
	if err != nil {
		return "", err
	}
	var page []byte
	if !opts.PNGOnly {
		if page, err = pageOf(rep, charts, &opts); err != nil {
			return "", err
		}
	}
	if err := stopped(contextOf(opts), dir); err != nil {
		return "", err
	}
	return writeFolder(contextOf(opts), dir, charts, page)
}

// chartView is a chart as a page shows it: embedded as a data URI.
type chartView struct {
	Title, File string
	Src         template.URL
}

func chartViews(charts []Chart) []chartView {
	out := make([]chartView, len(charts))
	for i, c := range charts {
		out[i] = chartView{Title: c.Title, File: c.File, Src: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(c.PNG))}
	}
	return out
}

// Page renders the self-contained HTML page: charts embedded as data URIs,
// no script or style from anywhere else.
func Page(rep *analysis.Report, charts []Chart) ([]byte, error) {
	return pageOf(rep, charts, &Options{})
}

func pageOf(rep *analysis.Report, charts []Chart, opts *Options) ([]byte, error) {
	view := pageView{R: rep, Start: time.Unix(0, rep.StartNS).UTC().Format("2006-01-02 15:04:05 UTC")}
	sec := sections(rep)
	shown := func(gpu int) bool { return !many(rep) || sec[gpu] }
	for k, v := range rep.Tags {
		view.Tags = append(view.Tags, k+"="+v)
	}
	sort.Strings(view.Tags)
	// Whether the page has a timeline (its budget is known once the rest
	// of the page is).
	hasTimeline, err := timelineShown(rep, shown, opts)
	if err != nil {
		return nil, err
	}
	byGPU := view.placeCharts(charts, hasTimeline)
	view.addGPUs(rep, shown, byGPU)
	bound := opts.PageBytes
	if bound <= 0 {
		bound = DefaultPageBytes
	}
	if hasTimeline {
		return view.fitTimeline(rep, shown, opts, bound)
	}
	page, err := view.execute()
	return []byte(page), err
}

// pageView is what the page's template reads.
type pageView struct {
	R        *analysis.Report
	Start    string
	Tags     []string
	Overview *chartView
	Together []chartView // many GPUs: peaks per GPU
	Quiet    string      // many GPUs: what the GPUs without a section showed
	GPUs     []gpuView
	Verdicts []string
	// Interactive is the timeline's data and scripts; nil without samples.
	Interactive *interactiveView
}

// gpuView is one GPU's section of the page.
type gpuView struct {
	analysis.GPUReport
	Label    string
	Sentence string
	Charts   []chartView
	Open     bool // the worst GPU's section is open, the others closed
	Verdict  string
}

// placeCharts puts the run-wide charts in the view and returns the
// others by GPU; a GPU's timeline PNG is left out where the page has the
// interactive timeline.
func (view *pageView) placeCharts(charts []Chart, timeline bool) map[int][]chartView {
	byGPU := map[int][]chartView{}
	for i, cv := range chartViews(charts) {
		switch {
		case charts[i].GPU == -1:
			view.Overview = &cv
		case charts[i].GPU < 0:
			view.Together = append(view.Together, cv)
		case timeline && charts[i].File == timelineFile(charts[i].GPU):
			// the interactive timeline shows it; the PNG stays in the folder
		default:
			byGPU[charts[i].GPU] = append(byGPU[charts[i].GPU], cv)
		}
	}
	return byGPU
}

// addGPUs gives each shown GPU its section and verdict, and says in Quiet
// what the others showed.
func (view *pageView) addGPUs(rep *analysis.Report, shown func(int) bool, byGPU map[int][]chartView) {
	quiet, unshown := 0, 0
	for _, g := range rep.GPUs {
		if !shown(g.GPU) {
			if notable(rep, g) {
				unshown++
			} else {
				quiet++
			}
			continue
		}
		s := g.Leak.SentenceFor(g.Label())
		view.Verdicts = append(view.Verdicts, s)
		view.GPUs = append(view.GPUs, gpuView{GPUReport: g, Label: g.Label(), Sentence: s, Charts: byGPU[g.GPU],
			Open: g.GPU == worstOf(rep), Verdict: verdictText(g.Leak.Judgement())})
	}
	switch {
	case unshown > 0:
		view.Quiet = fmt.Sprintf("The other %d GPUs, %d of them with a finding (sections are drawn for at most %d): they are in the heat map and in the table below.",
			quiet+unshown, unshown, maxSections)
	case quiet > 0:
		view.Quiet = fmt.Sprintf("The other %d GPUs: no leak, no OOM, no allocation retried; they are drawn in the heat map and in the table below.", quiet)
	}
}

// fitTimeline gives the timeline's data what the rest of the page leaves
// of bound, and writes the page, dropping the timeline's finest levels
// until it fits bound or none is left to drop.
//
// The rest of the page is written once: the timeline's data is a
// template.JS, which the template writes as it is, so the page with any
// data is the page written with timelineSlot in its place, the slot
// replaced: the embedded charts, most of the page, are escaped once, not
// at each writing.
func (view *pageView) fitTimeline(rep *analysis.Report, shown func(int) bool, opts *Options, bound int) ([]byte, error) {
	shell := interactiveShell()
	shell.Data = timelineSlot
	view.Interactive = &shell
	page, err := view.execute()
	if err != nil {
		return nil, err
	}
	before, after, ok := strings.Cut(page, timelineSlot)
	write := func() (string, error) { return before + string(view.Interactive.Data) + after, nil }
	if !ok || strings.Contains(after, timelineSlot) {
		// The page's text holds the slot too (a tag does): the page is
		// written whole each time.
		write = view.execute
	}
	// The rest is the page with no data, "{}".
	shell.Data = "{}"
	rest, err := write()
	if err != nil {
		return nil, err
	}
	iv, err := newInteractiveView(rep, shown, opts, max(0, bound-len(rest)))
	if err != nil {
		return nil, err
	}
	view.Interactive = &iv
	for {
		page, err := write()
		if err != nil {
			return nil, err
		}
		if len(page) <= bound {
			return []byte(page), nil
		}
		// Over the bound: the timeline's finest level goes first.
		if more, err := iv.dropFinest(); err != nil {
			return nil, err
		} else if !more {
			return []byte(page), nil
		}
	}
}

// timelineSlot stands for the timeline's data while the rest of the page
// is written (fitTimeline): a JavaScript comment, which encoding/json
// does not write.
const timelineSlot = "/*memrec:timeline-data*/"

// execute writes the page.
func (view *pageView) execute() (string, error) {
	var b strings.Builder
	err := pageTmpl.Execute(&b, view)
	return b.String(), err
}

// shownRemedies is how many remedies a GPU's section lists before the
// rest, which a click unfolds.
const shownRemedies = 3

// worstOf is the GPU whose section the page opens: the one the analysis
// names worst, else the first of the most severe verdict.
func worstOf(rep *analysis.Report) int {
	if rep.Worst != nil {
		return rep.Worst.GPU
	}
	best, sev := -1, -1
	for _, g := range rep.GPUs {
		if s := g.Leak.Judgement().Severity(); s > sev {
			best, sev = g.GPU, s
		}
	}
	return best
}

var funcs = template.FuncMap{
	"epochTable":    epochTableOf,
	"firstRemedies": func(rs []budget.Remedy) []budget.Remedy { return rs[:min(len(rs), shownRemedies)] },
	"moreRemedies": func(rs []budget.Remedy) []budget.Remedy {
		if len(rs) <= shownRemedies {
			return nil
		}
		return rs[shownRemedies:]
	},
	"bytes":  units.FormatBytesPtr,
	"bytesv": units.FormatBytes,
	"dur":    units.FormatDuration,
	"secs":   func(ns int64) float64 { return float64(ns) / 1e9 },
	"ms":     func(ns int64) string { return fmt.Sprintf("%.0f ms", float64(ns)/1e6) },
	"num":    func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) },
	"pct":    func(f float64) string { return fmt.Sprintf("%.1f %%", 100*f) },
	"pctp": func(f *float64) string {
		if f == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.1f %%", 100**f)
	},
	"since": func(start, t int64) string { return units.FormatSince(float64(t-start) / 1e9) },
	"opt": func(v *int) string {
		if v == nil {
			return "–"
		}
		return fmt.Sprint(*v)
	},
	"hz": func(f float64) string { return fmt.Sprintf("%.1f", f) },
	// The template hands pointers to funcs that take values (it indirects
	// them), never to printf, which would print the pointer.
	"g3":      func(f float64) string { return fmt.Sprintf("%.3g", f) },
	"f1":      func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"mul1000": func(f float64) float64 { return f * 1000 },
	"pos":     func(v *int64) bool { return v != nil && *v > 0 },
	"deref":   func(v *int64) int64 { return *v },
	"join":    func(s []string) string { return strings.Join(s, " ← ") },
	"fbytes": func(f *float64) string {
		if f == nil {
			return "–"
		}
		return units.FormatBytes(int64(math.Round(*f)))
	},
}

// shared is the style and the image check both pages use: the script marks
// <body data-images-loaded="N/M"> once the page has loaded, for browser tests.
const shared = `{{define "style"}}<style>
body { font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1250px; padding: 0 1em; color: #222; }
h1 { margin-bottom: .2em; } h2 { border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0; } td, th { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th { background: #f4f4f8; } td.l, th.l { text-align: left; }
.verdict { font-size: 1.1em; padding: .5em .8em; border-radius: 6px; margin: .4em 0; }
.leak { background: #fde8e8; border: 1px solid #e99; } .no_leak { background: #e8f6e8; border: 1px solid #9c9; } .insufficient_data, .startup { background: #f4f4f4; border: 1px solid #ccc; }
.cache_growth, .unseen_growth { background: #fff3e0; border: 1px solid #e9b26b; }
.note { color: #8a5a00; } .oom { background: #fff0f0; border-left: 4px solid #d62728; padding: .5em 1em; margin: 1em 0; }
pre { background: #f7f7f7; padding: .6em; overflow-x: auto; font-size: 12px; }
img { max-width: 100%; border: 1px solid #eee; margin: .5em 0; } .meta td { text-align: left; }
details.gpu { margin-top: 1.5em; border-top: 1px solid #ddd; } details.gpu > summary { cursor: pointer; padding: .4em 0; }
details.gpu > summary h2 { display: inline; border: 0; margin: 0; font-size: 1.3em; } details.gpu > summary .verdict { margin: .4em 0 0 1.2em; }
tr.open td { color: #777; background: repeating-linear-gradient(135deg, #fff, #fff 4px, #f0f0f0 4px, #f0f0f0 8px); }
#verdicts .verdict { margin: .3em 0; } .worst { font-size: 1.05em; }
.base { background: #f6fbff; } .leak { color: #b00; font-weight: bold; } .statement { font-size: 1.15em; padding: .6em .9em; background: #eef6ee; border: 1px solid #9c9; border-radius: 6px; }
</style>{{end}}
{{define "imgcheck"}}<script>
window.addEventListener("load", function () {
  var imgs = document.images, ok = 0;
  for (var i = 0; i < imgs.length; i++) { if (imgs[i].complete && imgs[i].naturalWidth > 0) ok++; }
  document.body.setAttribute("data-images-loaded", ok + "/" + imgs.length);
});
</script>{{end}}`

var pageTmpl = template.Must(template.Must(template.Must(template.New("page").Funcs(funcs).Parse(shared)).Parse(interactiveTmpl)).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>memrec report: {{.R.Run}}</title>
{{template "style"}}
</head>
<body data-images-loaded="pending">
<h1>memrec report: {{.R.Run}}</h1>
<section id="verdicts">
{{with .R.Worst}}<p class="worst"><b>Worst GPU: {{.Label}}</b>: {{.Reason}}</p>{{end}}
{{range .GPUs}}<div class="verdict {{.Leak.Judgement}}">{{.Sentence}}</div>
{{end}}{{with .Quiet}}<p>{{.}}</p>{{end}}
{{with .R.Imbalance}}<p>Imbalance: peak {{.Basis}} across ranks, max/min {{printf "%.2f" .Ratio}} (max {{bytesv .MaxBytes}} on {{.MaxGPU}}, min {{bytesv .MinBytes}} on {{.MinGPU}})</p>{{end}}
<p>OOMs: {{.R.Marks.OOMs}}. Each GPU's section below opens with a click{{if gt (len .GPUs) 1}}; the worst is open{{end}}.</p>
</section>
<section id="run">
<table class="meta">
<tr><th class="l">run</th><td>{{.R.Run}} (id {{.R.RunID}}){{if not .R.Complete}} — <b>incomplete</b>: the recorder did not finish{{end}}</td></tr>
<tr><th class="l">host</th><td>{{if .R.Hosts}}{{len .R.Hosts}} hosts:{{range .R.Hosts}} {{.Host}}{{end}}{{else}}{{.R.Host}}{{end}}</td></tr>
{{with .R.Job}}<tr><th class="l">job</th><td>{{.}}</td></tr>{{end}}
<tr><th class="l">start</th><td>{{.Start}}</td></tr>
<tr><th class="l">duration</th><td>{{dur .R.DurationS}}</td></tr>
<tr><th class="l">GPUs</th><td>{{len .R.GPUs}}</td></tr>
<tr><th class="l">tags</th><td>{{range .Tags}}<code>{{.}}</code> {{else}}none{{end}}</td></tr>
<tr><th class="l">marks</th><td>{{.R.Marks.Epochs}} epochs, {{.R.Marks.Steps}} steps, {{.R.Marks.Events}} events, {{.R.Marks.OOMs}} OOMs{{with .R.StepTimeS}}; {{f1 (mul1000 .)}} ms per step{{end}}</td></tr>
{{with .R.Recorder}}{{if .Ticks}}<tr><th class="l">recorder</th><td>source {{.Source}}{{if .Driver}}, driver {{.Driver}}{{end}}; {{.Ticks}} ticks at {{hz .AchievedHz}} Hz, {{.MissedTicks}} missed; {{.Dropped}} probe messages dropped; {{.Invalid}} invalid readings</td></tr>{{end}}{{end}}
</table>
{{range .R.Notes}}<p class="note">Note: {{.}}</p>{{end}}
</section>
{{template "timeline" .}}
{{template "timeline-scripts" .}}
{{with .Overview}}<section id="overview"><h2>{{.Title}}</h2><img src="{{.Src}}" alt="{{.Title}}" data-file="{{.File}}"></section>{{end}}
{{range .Together}}<section><h2>{{.Title}}</h2><img src="{{.Src}}" alt="{{.Title}}" data-file="{{.File}}"></section>{{end}}
{{if .R.Hosts}}<section id="hosts"><h2>Hosts</h2>
<table><tr><th class="l">host</th><th>GPUs</th><th>clock offset</th><th>peak used</th><th class="l">on</th><th>peak allocated</th><th>leaking GPUs</th><th>OOMs</th></tr>
{{range .R.Hosts}}<tr><td class="l">{{.Host}}</td><td>{{.GPUs}}</td><td>{{if .Aligned}}{{printf "%+.3f s" (secs .OffsetNS)}}{{else}}not aligned{{end}}</td><td>{{bytes .PeakUsedBytes}}</td><td class="l">{{.PeakUsedGPU}}</td><td>{{bytes .PeakAllocatedBytes}}</td><td>{{.Leaks}}</td><td>{{.OOMs}}</td></tr>
{{end}}</table>
<table><tr><th class="l">GPU</th><th>peak used</th><th>peak allocated</th><th>step peak</th><th class="l">leak</th></tr>
{{range .R.GPUs}}<tr><td class="l">{{.Label}}</td><td>{{bytes .PeakUsedBytes}}</td><td>{{bytes .PeakAllocatedBytes}}</td><td>{{bytes .PeakStepBytes}}</td><td class="l">{{.Leak.Judgement}}</td></tr>
{{end}}</table></section>{{end}}
{{range .GPUs}}{{$g := .}}
<details id="gpu{{.GPU}}" class="gpu"{{if or .Open (eq (len $.GPUs) 1)}} open{{end}}>
<summary><h2>{{.Label}}{{if .Name}} — {{.Name}}{{end}}{{if .TotalBytes}}, {{bytesv .TotalBytes}}{{end}}: {{.Verdict}}</h2></summary>
<h3>Peaks</h3>
<table><tr><th class="l">what</th><th>bytes</th><th>when</th><th>epoch</th><th>step</th><th class="l">nearest mark</th></tr>
{{range .Peaks}}<tr><td class="l">{{.What}}</td><td>{{bytesv .Bytes}}</td><td>{{since $.R.StartNS .TNS}}</td><td>{{opt .Epoch}}</td><td>{{opt .Step}}</td><td class="l">{{.NearMark}}</td></tr>
{{else}}<tr><td class="l" colspan="6">no samples</td></tr>{{end}}</table>
<h3>Per epoch</h3>
{{if .Epochs}}{{template "epochtable" (epochTable .Epochs)}}
{{else if .InferredEpochs}}<p class="note">No epoch marks: epochs inferred from device memory. {{.InferredEpochBasis}}.</p>
{{template "epochtable" (epochTable .InferredEpochs)}}
{{else if .Intervals}}<p class="note">No epoch marks: deltas over ten equal slices of the run instead.{{with .EpochsNotInferred}} No epochs inferred: {{.}}.{{end}}</p>
<table class="epochs"><tr><th>slice</th><th>used at start</th><th>used at end</th><th>Δ used</th><th>peak used</th><th>Δ allocated</th></tr>
{{range .Intervals}}<tr><td>{{.Epoch}}</td><td>{{bytes .UsedStartBytes}}</td><td>{{bytes .UsedEndBytes}}</td><td>{{bytes .DeltaUsedBytes}}</td><td>{{bytes .PeakUsedBytes}}</td><td>{{bytes .DeltaAllocatedBytes}}</td></tr>
{{end}}</table>{{else}}<p class="note">No epochs and no samples to slice.</p>{{end}}
<h3>Leak</h3>
<div class="verdict {{.Leak.Judgement}}">{{.Sentence}}</div>
<p>Fitted on {{.Leak.Points}} floors of {{.Leak.Basis}} per {{.Leak.Per}} after {{.Leak.SkippedWarmup}} warm-up points{{if .Leak.JumpsRemoved}}, {{.Leak.JumpsRemoved}} one-off jump(s) set aside{{end}}. {{.Leak.Reason}}.
{{with .Leak.PValue}}Mann–Kendall p = {{g3 .}}.{{end}}</p>
<h3>Allocator memory (fragmentation)</h3>
{{with .Fragmentation}}<table><tr><th class="l"></th><th>mean</th><th>p95</th><th>max</th><th>final</th></tr>
<tr><td class="l">cached and free: (reserved − allocated) / reserved, what empty_cache() would return (mostly the cache at work, not waste)</td><td>{{pct .Mean}}</td><td>{{pct .P95}}</td><td>{{pct .Max}}</td><td>{{pct .Final}}</td></tr>
{{if .PeakWasteMean}}<tr><td class="l">never used even at the step's peak: 1 − peak allocated / reserved</td><td>{{pctp .PeakWasteMean}}</td><td></td><td>{{pctp .PeakWasteMax}}</td><td></td></tr>{{end}}
<tr><td class="l">in inactive split blocks: inactive split / reserved</td><td>{{pct .StuckMean}}</td><td></td><td>{{pct .StuckMax}}</td><td></td></tr></table>
{{else}}<p class="note">No allocator samples: fragmentation is unknown (run the job with the probe, or memrec record --torch).</p>{{end}}
{{with .JobSpan}}<p>Job: {{since $.R.StartNS .FromNS}} to {{since $.R.StartNS .ToNS}} ({{if eq .Basis "processes"}}where its processes hold memory{{else}}from the first sustained rise of device memory to its final fall{{end}}); start-up and teardown are left out of the leak fit.</p>{{end}}
{{with .Unseen}}<p>Memory PyTorch does not see (CUDA context, libraries, other processes): median {{bytesv .MedianBytes}}, max {{bytesv .MaxBytes}}.</p>{{end}}
{{with .LargestSegmentBytes}}<p>Largest allocator segment with room free: {{bytes .}}, the largest request that comes and goes: what the allocator may strand at the limit, two of which compare --by adds.</p>{{end}}
{{if pos .AllocRetries}}<p class="note">The allocator retried {{deref .AllocRetries}} allocations after freeing its cache: memory was tight.</p>{{end}}
{{with .Budget}}<h3>Budget at the peak</h3>
<p>At {{since $.R.StartNS .TNS}} (step {{opt .Step}}): step peak allocated {{bytesv .PeakAllocatedBytes}}, {{.TotalWords}} {{bytesv .TotalBytes}}.{{if .Watched}} Model: {{.ParamCount}} parameters, {{.DType}}, optimizer {{.Optimizer}}, autocast {{.Autocast}}, gradients at the peak: {{.GradsAtPeak}}.{{end}}</p>
<table><tr><th class="l">part</th><th>bytes</th><th>share</th><th class="l"></th></tr>
{{range .Parts}}<tr><td class="l">{{.Part.Words}}</td><td>{{bytesv .Bytes}}</td><td>{{pct .Share}}</td><td class="l">{{.Detail}}</td></tr>
{{end}}{{with .UnseenWhy}}<tr><td class="l">not seen by PyTorch</td><td>not known</td><td></td><td class="l">{{.}}</td></tr>
{{end}}{{if .LeftOverBytes}}<tr><td class="l">left over</td><td>{{bytesv .LeftOverBytes}}</td><td></td><td></td></tr>{{end}}</table>
<p class="note">{{.Basis}}.{{range .Notes}} {{.}}.{{end}}</p>
{{if .Help}}<h4>What would help, by what it frees at the peak</h4>
<table><tr><th class="l">remedy</th><th>frees</th><th>peak after</th><th>batch that fits</th><th class="l">basis and assumptions</th></tr>
{{range firstRemedies .Help}}{{template "remedy" .}}{{end}}</table>
{{with moreRemedies .Help}}<details><summary>{{len .}} more remedies</summary><table><tr><th class="l">remedy</th><th>frees</th><th>peak after</th><th>batch that fits</th><th class="l">basis and assumptions</th></tr>
{{range .}}{{template "remedy" .}}{{end}}</table></details>{{end}}{{end}}
{{range .Skipped}}<p class="note">Not applicable: {{.}}.</p>{{end}}
{{range .Missing}}<p class="note">Missing: {{.}}.</p>{{end}}
{{end}}
<h3>OOM post-mortem</h3>
{{range .OOMs}}<div class="oom"><b>OOM ({{.Outcome}}) at {{since $.R.StartNS .TNS}}</b> (epoch {{opt .Epoch}}, step {{opt .Step}}): {{.Message}}<br>
{{.OutcomeReason}}.<br>
At the OOM (samples at most {{ms .PairToleranceNS}} from it): device used {{bytes .UsedBytes}}, allocated {{bytes .AllocatedBytes}}, reserved {{bytes .ReservedBytes}}, cached and free {{pctp .Fragmentation}}{{with .UnseenBytes}}, not seen by PyTorch {{bytesv .}}{{end}}.
{{range .LeftOut}}<br>Left out: {{.}}.{{end}}
{{with .ShortBytes}}Short by {{bytesv .}}.{{end}}
{{with .CacheWouldHelp}}{{if .}}The allocator's cached free memory would have served it: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True or call torch.cuda.empty_cache().{{else}}expandable_segments or empty_cache() would not have made room.{{end}}{{end}}
{{if .FittingBatch}}{{if eq .FitKind.String "estimate"}}Batch size that would fit: {{num .FittingBatch}}, from this run's per-step peak.{{else}}Batch size at most {{num .FittingBatch}}: an upper bound, not a batch known to fit. No step completed, so the step's need is known only from below (allocated + the request); the batch that fits is smaller, by what the rest of the step would have allocated.{{end}}{{end}}
{{with .Budget}}{{.Words}}.<br>{{end}}
{{with .LargestGrowth}}Largest growth between steps before it: {{bytesv .}}.{{end}}
{{with .Holders}}<p>Largest holders at the OOM:</p>{{template "sitefigs" .}}{{end}}
{{with .Summary}}<pre>{{.}}</pre>{{end}}</div>
{{else}}<p>No OOM.</p>{{end}}
{{with .Where}}<h3>Where the memory is held</h3>
<p>{{.Snapshots}} allocation-site snapshots.{{if .Bad}} {{.Bad}} snapshot entries made no sense and were dropped.{{end}}</p>
{{if .Growing}}<h4>Growing sites: live bytes that rise from snapshot to snapshot</h4>
{{with (index .Growing 0).SampledEvery}}{{if gt . 1}}<p>Estimated: the probe kept stacks on one step in {{printf "%.3g" .}}, so each site's growth counts {{printf "%.3g" .}} times.</p>{{end}}{{end}}
<table class="growing"><tr><th class="l">site</th><th class="l">function</th><th>growth</th><th>per step</th><th>per epoch</th><th>share</th><th class="l">called from</th></tr>
{{range .Growing}}<tr><td class="l"><code>{{.Site}}</code></td><td class="l">{{.Func}}</td><td>{{bytesv .GrowthBytes}}</td><td>{{fbytes .BytesPerStep}}</td><td>{{fbytes .BytesPerEpoch}}</td><td>{{pct .Share}}</td><td class="l">{{join .Stack}}</td></tr>
{{end}}</table>{{else}}<p>No site grows.</p>{{end}}
{{with .AtEnd}}<h4>Biggest holders at the end ({{since $.R.StartNS .TNS}}, {{.Reason}}): {{bytesv .LiveBytes}} live, {{bytesv .UntrackedBytes}} without a Python stack</h4>{{template "sitefigs" .Top}}{{end}}
{{end}}
<h3>Charts</h3>
{{range .Charts}}<figure><img src="{{.Src}}" alt="{{.Title}}" data-file="{{.File}}"><figcaption>{{.Title}}</figcaption></figure>
{{end}}
</details>
{{end}}
{{define "remedy"}}<tr><td class="l">{{.Title}}</td><td>{{.SavedWords}}</td><td>{{if .LowersPeak}}{{bytesv .PeakAfterBytes}}{{else}}unchanged{{end}}</td><td>{{if .FitsBatch}}{{num .FitsBatch}}{{end}}</td><td class="l">{{.Basis}}.{{range .Assumptions}} Assumes {{.}}.{{end}}</td></tr>
{{end}}{{define "epochtable"}}{{if gt .Per 1}}<p>Epochs in buckets of {{.Per}}, each bucket's Δ the sum of its epochs'; the largest epoch: {{.Largest}}.</p>{{end}}
<table class="epochs">{{template "epochhead"}}
{{range .Rows}}<tr{{if .Open}} class="open"{{end}}><td>{{.Name}}{{if .Open}} (open){{end}}</td><td>{{bytes .UsedStart}}</td><td>{{bytes .UsedEnd}}</td><td>{{if .Open}}open{{else}}{{bytes .DeltaUsed}}{{end}}</td><td>{{bytes .PeakUsed}}</td><td>{{bytes .AllocStart}}</td><td>{{bytes .AllocEnd}}</td><td>{{if .Open}}open{{else}}{{bytes .DeltaAlloc}}{{end}}</td><td>{{bytes .PeakAlloc}}</td></tr>
{{end}}</table>{{range .Rows}}{{if .Open}}<p class="note">Epoch {{.Name}} is open: the run ended inside it, so its change is not compared with the others' and is not growth.</p>{{end}}{{end}}{{end}}
{{define "epochhead"}}<tr><th>epoch</th><th>used at start</th><th>used at end</th><th>Δ used</th><th>peak used</th><th>allocated at start</th><th>allocated at end</th><th>Δ allocated</th><th>peak allocated</th></tr>{{end}}{{define "sitefigs"}}<table class="sites"><tr><th class="l">site</th><th class="l">function</th><th>live</th><th>blocks</th><th>share</th><th class="l">called from</th></tr>
{{range .}}<tr><td class="l"><code>{{.Site}}</code></td><td class="l">{{.Func}}</td><td>{{bytesv .LiveBytes}}</td><td>{{.LiveBlocks}}</td><td>{{pct .Share}}</td><td class="l">{{join .Stack}}</td></tr>
{{end}}</table>{{end}}
<footer><p>Written by memrec. Every number above comes from the run's samples and marks; the charts are also in this folder as PNG files.</p></footer>
{{template "imgcheck"}}
</body>
</html>
`))
