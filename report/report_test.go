package report

import (
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"html/template"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/cdp"
	"github.com/memrec/memrec/testsupport/fixtures"
)

var update = flag.Bool("update", false, "rewrite the golden images in testdata/")

// realReport analyses a real H200 run (the planted leak).
func realReport(t testing.TB, name string) *analysis.Report {
	t.Helper()
	return analyzeOne(t, name, fixtures.Read(t, name))
}

// analyzeOne imports JSON Lines holding one run into a fresh database and
// analyses it.
func analyzeOne(t testing.TB, name string, data []byte) *analysis.Report {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: name, R: bytes.NewReader(data)}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analysis.Analyze(db, runs[0], analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// distinctColors counts the colours of an image (up to limit).
func distinctColors(img image.Image, limit int) int {
	seen := map[[4]uint32]bool{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y += 2 {
		for x := b.Min.X; x < b.Max.X; x += 2 {
			r, g, bl, a := img.At(x, y).RGBA()
			seen[[4]uint32{r, g, bl, a}] = true
			if len(seen) >= limit {
				return limit
			}
		}
	}
	return len(seen)
}

func TestChartsStructure(t *testing.T) {
	rep := realReport(t, fixtures.LeakRun)
	charts, err := Charts(rep, Options{Width: 900, Height: 400})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"gpu0-timeline.png", "gpu0-epochs.png", "gpu0-leak.png", "gpu0-steppeak.png", "gpu0-fragmentation.png", "gpu0-processes.png"}
	got := map[string]Chart{}
	for _, c := range charts {
		got[c.File] = c
	}
	for _, f := range want {
		c, ok := got[f]
		if !ok {
			t.Errorf("missing chart %s", f)
			continue
		}
		img, err := png.Decode(bytes.NewReader(c.PNG))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if b := img.Bounds(); b.Dx() != 900 || b.Dy() != 400 {
			t.Errorf("%s: %v, want 900x400", f, b)
		}
		if n := distinctColors(img, 20); n < 10 {
			t.Errorf("%s looks blank (%d colours)", f, n)
		}
	}
}

func TestPageSectionsAndImages(t *testing.T) {
	rep := realReport(t, fixtures.LeakRun)
	charts, err := Charts(rep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	page, err := Page(rep, charts)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	var imgs []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			for _, a := range n.Attr {
				if a.Key == "id" {
					ids[a.Val] = true
				}
				if n.Data == "img" && a.Key == "src" {
					imgs = append(imgs, a.Val)
				}
				if (n.Data == "script" || n.Data == "link") && (a.Key == "src" || a.Key == "href") {
					t.Errorf("page loads %s from elsewhere", a.Val)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	for _, id := range []string{"run", "verdicts", "gpu0", "timeline", "timeline-gpu0"} {
		if !ids[id] {
			t.Errorf("no section %q", id)
		}
	}
	// Every chart but the timelines, which the interactive charts show.
	if want := len(charts) - len(rep.GPUs); len(imgs) != want {
		t.Fatalf("%d images, want %d of the %d charts", len(imgs), want, len(charts))
	}
	for _, src := range imgs {
		b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(src, "data:image/png;base64,"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := png.Decode(bytes.NewReader(b)); err != nil {
			t.Fatal(err)
		}
	}
	text := string(page)
	for _, want := range []string{"GPU 0 grows 250.0 KiB per step", "full in about", "cached and free", "Memory PyTorch does not see", "batch_size=64", "No OOM"} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

func TestWriteReplacesWhole(t *testing.T) {
	rep := realReport(t, fixtures.CleanRun)
	dir := filepath.Join(t.TempDir(), "deep", "rep")
	if _, err := Write(dir, rep, Options{Width: 400, Height: 200}); err != nil {
		t.Fatal(err)
	}
	// A file memrec did not write there stops the replacement, and stays.
	os.WriteFile(filepath.Join(dir, "stale.png"), []byte("x"), 0o644)
	if _, err := Write(dir, rep, Options{Width: 400, Height: 200}); !errors.Is(err, ErrOtherFiles) {
		t.Fatalf("a report with a file of the user's replaced: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "stale.png")); err != nil || string(b) != "x" {
		t.Fatalf("the user's file changed: %v", err)
	}
	os.Remove(filepath.Join(dir, "stale.png"))
	path, err := Write(dir, rep, Options{Width: 400, Height: 200})
	if err != nil || filepath.Base(path) != "index.html" {
		t.Fatal(path, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(dir))
	if len(entries) != 1 {
		t.Errorf("leftovers beside the report: %v", entries)
	}
	if _, err := Write(dir, rep, Options{PNGOnly: true, Width: 400, Height: 200}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "index.html")); !os.IsNotExist(err) {
		t.Error("--png-only wrote index.html")
	}
}

func TestReportOfRunWithoutProbeOrMarks(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	in := `{"type":"run","name":"bare","start_ns":1000000000}
{"type":"gpu","gpu":0,"total_bytes":1000000000}
{"type":"sample","t_ns":1000000000,"gpu":0,"used_bytes":500}
{"type":"sample","t_ns":2000000000,"gpu":0,"used_bytes":600}
{"type":"run","name":"empty","start_ns":1000000000}
{"type":"gpu","gpu":0}
`
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "x", R: strings.NewReader(in)}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		rep, err := analysis.Analyze(db, r, analysis.Options{})
		if err != nil {
			t.Fatal(err)
		}
		charts, err := Charts(rep, Options{Width: 300, Height: 200})
		if err != nil {
			t.Fatal(err)
		}
		page, err := Page(rep, charts)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"no allocator samples", "fragmentation is unknown", "not enough data"} {
			if !strings.Contains(string(page), want) {
				t.Errorf("%s: page lacks %q", r.Name, want)
			}
		}
	}
}

// TestPageInBrowser opens the report and the comparison page in headless
// Chromium from disk, in one browser session (both in frames of one page,
// which is also screenshot): every image of each must load, and the
// screenshot must not be blank. CI installs Chromium (.ci/run); elsewhere
// the test is skipped without it.
func TestPageInBrowser(t *testing.T) {
	t.Parallel()
	browser := cdp.Need(t)
	rep := realReport(t, fixtures.LeakRun)
	dir := t.TempDir()
	repPath, err := Write(filepath.Join(dir, "rep"), rep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := compare.Compare([]*analysis.Report{rep, realReport(t, fixtures.CleanRun)}, "", "epoch")
	if err != nil {
		t.Fatal(err)
	}
	if err := compare.FitByTag(c, "batch_size", 0.05); err != nil {
		t.Fatal(err)
	}
	cmpPath, err := WriteCompare(filepath.Join(dir, "cmp"), c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	browserCheck(t, browser, dir, map[string]string{"rep": repPath, "cmp": cmpPath})
}

// framesPage shows pages side by side in frames and copies each frame's
// data-images-loaded into its own <body> as data-NAME once it is final
// ("loaded/total"), polling until every frame's is.
const framesPage = `<!doctype html><html><body style="margin:0">{{range $k, $v := .}}<iframe id="{{$k}}" src="{{$v}}" width="1280" height="2400"></iframe>{{end}}
<script>
(function poll() {
  var ids = [{{range $k, $v := .}}"{{$k}}",{{end}}], done = 0;
  ids.forEach(function (id) {
    var v = "";
    try { v = document.getElementById(id).contentDocument.body.getAttribute("data-images-loaded") || ""; } catch (e) {}
    if (/^[0-9]+[/][0-9]+$/.test(v)) { document.body.setAttribute("data-" + id, v); done++; }
  });
  if (done < ids.length) setTimeout(poll, 50);
})();
</script></body></html>`

// browserCheck loads pages from disk in one headless Chromium: every image
// of each must load, and a screenshot of the first must not be blank.
func browserCheck(t *testing.T, browser, dir string, pages map[string]string) {
	t.Helper()
	frames := map[string]string{}
	for name, path := range pages {
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			t.Fatal(err)
		}
		frames[name] = filepath.ToSlash(rel)
	}
	var b strings.Builder
	if err := template.Must(template.New("frames").Parse(framesPage)).Execute(&b, frames); err != nil {
		t.Fatal(err)
	}
	outer := filepath.Join(dir, "frames.html")
	if err := os.WriteFile(outer, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	png1 := filepath.Join(dir, "shot.png")
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--user-data-dir=" + filepath.Join(dir, "profile"),
		"--allow-file-access-from-files", "--virtual-time-budget=5000", "--window-size=1280,2400",
		"--screenshot=" + png1, "--dump-dom", "file://" + outer}
	out, err := exec.Command(browser, args...).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	for name := range pages {
		m := regexp.MustCompile(`data-` + name + `="(\d+)/(\d+)"`).FindStringSubmatch(string(out))
		if m == nil || m[1] != m[2] || m[2] == "0" {
			t.Fatalf("%s: images loaded in the browser: %v\n%.600s", pages[name], m, out)
		}
		t.Logf("%s: browser loaded %s/%s images", name, m[1], m[2])
	}
	f, err := os.Open(png1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if n := distinctColors(img, 50); n < 20 {
		t.Fatalf("screenshot looks blank: %d colours", n)
	}
}

// TestProcBucketsHoldLastValue: process samples come only when memory
// moves, so empty buckets between a process's first and last sample hold
// its last value, and buckets outside them are empty.
func TestProcBucketsHoldLastValue(t *testing.T) {
	s := analysis.Series{T: []int64{20, 25, 61, 95}, V: []int64{5, 7, 3, 9}}
	got := procBuckets(s, 0, 10, 12)
	want := []float64{0, 0, 7, 7, 7, 7, 3, 3, 3, 9, 0, 0, 0}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

// TestOOMPostMortemPage renders the real run that ran out of memory: the
// figures at the OOM say how close in time their samples had to be, and
// what was left out is said with its reason.
func TestOOMPostMortemPage(t *testing.T) {
	rep := realReport(t, fixtures.H200OOM)
	g := &rep.GPUs[0]
	fatal := &g.OOMs[len(g.OOMs)-1]
	page, err := Page(rep, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"At the OOM (samples at most 20 ms from it): device used 138.76 GiB, allocated 137.28 GiB, reserved 138.15 GiB",
		"not seen by PyTorch 630.8 MiB", "Batch size at most 7626: an upper bound, not a batch known to fit."} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// With steps completed, the batch is an estimate.
	fatal.FitKind, fatal.FitBasis = analysis.FitEstimate, "step_peak"
	if page, err = Page(rep, nil); err != nil || !strings.Contains(string(page), "Batch size that would fit: 7626, from this run's per-step peak.") {
		t.Errorf("page of an estimate (%v) lacks its sentence", err)
	}
	fatal.UsedBytes, fatal.UnseenBytes = nil, nil
	fatal.LeftOut = []string{"device used: the nearest device sample is 500.0 ms from the OOM, more than the 20.0 ms tolerance"}
	if page, err = Page(rep, nil); err != nil {
		t.Fatal(err)
	}
	if want := "Left out: device used: the nearest device sample is 500.0 ms from the OOM"; !strings.Contains(string(page), want) {
		t.Errorf("page lacks %q", want)
	}
}
