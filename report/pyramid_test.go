package report

import (
	"bytes"
	"html"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
)

// pyramidRun is a generated 20-minute run of one GPU at 100 Hz (120 000
// samples), analysed, with its lines indexed and read back as they are
// stored. It is built once per test binary (most of its tests' time); each
// caller gets its own Options to change.
func pyramidRun(t *testing.T) (*analysis.Report, *Options, []storage.DeviceSample) {
	t.Helper()
	pyramid.once.Do(func() { pyramid.rep, pyramid.opts, pyramid.stored, pyramid.err = buildPyramidRun() })
	if pyramid.err != nil {
		t.Fatal(pyramid.err)
	}
	opts := *pyramid.opts
	return pyramid.rep, &opts, pyramid.stored
}

var pyramid struct {
	once   sync.Once
	rep    *analysis.Report
	opts   *Options
	stored []storage.DeviceSample
	err    error
}

func buildPyramidRun() (*analysis.Report, *Options, []storage.DeviceSample, error) {
	c := tracegen.Default()
	c.GPUs, c.Duration = 1, 20*time.Minute
	var buf bytes.Buffer
	if _, err := tracegen.Write(&buf, c); err != nil {
		return nil, nil, nil, err
	}
	dir, err := os.MkdirTemp("", "memrec-pyramid-")
	if err != nil {
		return nil, nil, nil, err
	}
	defer os.RemoveAll(dir)
	db, err := storage.Open(filepath.Join(dir, "p.db"), storage.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	defer db.Close()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "p", R: &buf}}, jsonl.ImportOptions{})
	if err != nil {
		return nil, nil, nil, err
	}
	run := runs[0]
	rep, err := analysis.Analyze(db, run, analysis.Options{})
	if err != nil {
		return nil, nil, nil, err
	}
	x := series.NewIndex(0)
	var stored []storage.DeviceSample
	it := db.DeviceSamples(run, 0, storage.MinTime, storage.MaxTime)
	for it.Next() {
		stored = append(stored, it.At())
	}
	if err := it.Err(); err != nil {
		return nil, nil, nil, err
	}
	for _, s := range stored {
		x.AddDevice(s)
	}
	raw := func(k series.Key) series.RawReader {
		return func(from, to int64, add func(t, v int64)) error {
			for _, s := range stored {
				if s.T >= from && s.T < to {
					if k.Field == series.Used {
						add(s.T, s.Used)
					} else {
						add(s.T, s.Reserved)
					}
				}
			}
			return nil
		}
	}
	return rep, &Options{Lines: x, Raw: raw}, stored, nil
}

// TestPagePyramid: the page's levels are each four times finer, within the
// budget; with room, the finest holds every stored sample exactly (in
// KiB); with less room, fewer levels, never past the budget.
func TestPagePyramid(t *testing.T) {
	rep, opts, stored := pyramidRun(t)
	all := func(int) bool { return true }
	d := pyramidOf(rep, all, opts, DefaultPageBytes)
	s := d.GPUs[0].Series[0]
	if s.Name != "device used" {
		t.Fatalf("first series %q", s.Name)
	}
	if d.Bytes > d.Budget || d.Budget+d.epochBytes() != DefaultPageBytes {
		t.Errorf("levels take %d B of a %d B budget (and the epochs %d B)", d.Bytes, d.Budget, d.epochBytes())
	}
	if len(s.Levels) == 0 || !s.finest() {
		t.Fatalf("%d levels, the finest of units of %d samples: 120 000 samples fit in 5 MB", len(s.Levels), s.lastEvery())
	}
	prev := s.Every
	for j, l := range s.Levels {
		if l.Every > prev || len(l.DT) != len(l.DV) {
			t.Errorf("level %d: units of %d samples after %d", j+1, l.Every, prev)
		}
		prev = l.Every
	}
	fin := s.Levels[len(s.Levels)-1]
	var tt, v int64
	if len(fin.DT) != len(stored) {
		t.Fatalf("finest level: %d points, %d samples stored", len(fin.DT), len(stored))
	}
	for i := range fin.DT {
		tt, v = tt+fin.DT[i], v+fin.DV[i]
		if want := (stored[i].T - rep.StartNS) / 1000; tt != want || v != stored[i].Used>>10 {
			t.Fatalf("finest level, point %d: %d µs %d KiB, stored %d µs %d KiB", i, tt, v, want, stored[i].Used>>10)
		}
	}
	opts.PageBytes = 200 << 10
	small := pyramidOf(rep, all, opts, opts.PageBytes)
	ss := small.GPUs[0].Series[0]
	if small.Bytes > 200<<10 || len(ss.Levels) >= len(s.Levels) || ss.finest() {
		t.Errorf("with 200 KiB: %d B in %d levels, finest of %d samples", small.Bytes, len(ss.Levels), ss.lastEvery())
	}
	t.Logf("5 MB: %d levels, %d B; 200 KiB: %d levels, %d B, finest of %d samples", len(s.Levels), d.Bytes, len(ss.Levels), small.Bytes, ss.lastEvery())
}

// TestPageWithinBound: PageBytes bounds the whole page, not only its
// timeline data. The bound is set halfway between the page with the
// timeline's base level only and the page with every level that fits
// in 64 MiB, so levels must be dropped, and some kept.
func TestPageWithinBound(t *testing.T) {
	rep, opts, _ := pyramidRun(t)
	base, err := pageOf(rep, nil, &Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts.PageBytes = 64 << 20
	full, err := pageOf(rep, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(full) <= len(base) {
		t.Fatalf("the levels add nothing: %d B with them, %d B without", len(full), len(base))
	}
	opts.PageBytes = (len(full) + len(base)) / 2
	page, err := pageOf(rep, nil, opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(page) > opts.PageBytes || len(page) <= len(base) {
		t.Errorf("page %d B, want at most the bound %d B and more than the base page's %d B", len(page), opts.PageBytes, len(base))
	}
}

// TestVerdictsBeforeCharts: the page opens with the verdicts in words and
// the worst GPU, before any chart or the timeline.
func TestVerdictsBeforeCharts(t *testing.T) {
	rep, opts, _ := pyramidRun(t)
	charts, err := Charts(rep, Options{Width: 400, Height: 200})
	if err != nil {
		t.Fatal(err)
	}
	page, err := pageOf(rep, charts, opts)
	if err != nil {
		t.Fatal(err)
	}
	s := string(page)
	summary := strings.Index(s, `<section id="verdicts">`)
	verdict := strings.Index(s, `<div class="verdict`)
	first := len(s)
	for _, mark := range []string{"<img ", `<section id="timeline">`, "<canvas"} {
		if i := strings.Index(s, mark); i >= 0 {
			first = min(first, i)
		}
	}
	if summary < 0 || verdict < summary || verdict > first {
		t.Errorf("summary at %d, first verdict at %d, first chart at %d: the verdicts do not come first", summary, verdict, first)
	}
	want := html.EscapeString(rep.GPUs[0].Leak.SentenceFor(rep.GPUs[0].Label()))
	if i := strings.Index(s, want); i < 0 || i > first {
		t.Errorf("the verdict %q is not said before the charts", want)
	}
}

// TestTimelineShown: whether the page has a timeline, from the index's
// keys, is what drawing its coarsest data says, for an index with the
// run's lines, with a budget's lines only, with lines of a GPU the run
// lacks, for a GPU not shown, and with no index.
func TestTimelineShown(t *testing.T) {
	rep, opts, stored := pyramidRun(t)
	budgetsOnly := series.NewIndex(0)
	budgetsOnly.AddBudget(storage.BudgetSample{T: stored[0].T, GPU: 0, PID: 7, Params: 1 << 20})
	otherGPU := series.NewIndex(0)
	other := stored[0]
	other.GPU = 5
	otherGPU.AddDevice(other)
	all := func(int) bool { return true }
	for _, c := range []struct {
		name  string
		lines *series.Index
		shown func(int) bool
		want  bool
	}{
		{"the run's lines", opts.Lines, all, true},
		{"a budget's lines only", budgetsOnly, all, false},
		{"lines of another GPU", otherGPU, all, false},
		{"its GPU not shown", opts.Lines, func(gpu int) bool { return gpu != 0 }, false},
		{"no index", nil, all, true},
	} {
		o := *opts
		o.Lines = c.lines
		got, err := timelineShown(rep, c.shown, &o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		drawn, err := newInteractiveView(rep, c.shown, &o, 0)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got != c.want || got != drawn.HasData {
			t.Errorf("%s: timelineShown %v, want %v; the drawn view's HasData %v", c.name, got, c.want, drawn.HasData)
		}
	}
}

// TestPageSlotInTags: the page is the same whether its rest is written
// once with the timeline's data spliced in, or, where a tag holds the
// slot that stands for the data, written whole each time: two runs whose
// tags differ only there, at a bound that drops levels, give pages that
// differ only there.
func TestPageSlotInTags(t *testing.T) {
	rep, opts, _ := pyramidRun(t)
	other := strings.Replace(timelineSlot, "data", "dat4", 1)
	if len(other) != len(timelineSlot) || other == timelineSlot {
		t.Fatalf("%q is not another text of the slot's length", other)
	}
	pageWith := func(tag string, bound int) string {
		t.Helper()
		r := *rep
		r.Tags = map[string]string{"note": tag}
		o := *opts
		o.PageBytes = bound
		page, err := pageOf(&r, nil, &o)
		if err != nil {
			t.Fatal(err)
		}
		return string(page)
	}
	full := pageWith(other, 64<<20)
	base := pageWith(other, 1)
	bound := (len(full) + len(base)) / 2
	spliced, whole := pageWith(other, bound), pageWith(timelineSlot, bound)
	if len(spliced) <= len(base) || len(spliced) >= len(full) {
		t.Fatalf("page %d B at the bound %d B: no level dropped, or none kept (base %d B, every level %d B)", len(spliced), bound, len(base), len(full))
	}
	if got := strings.Replace(spliced, other, timelineSlot, 1); got != whole {
		t.Errorf("the page written whole (%d B) is not the page spliced (%d B)", len(whole), len(spliced))
	}
}
