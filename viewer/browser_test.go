package viewer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/cdp"
)

// viewProbe is added to the page by the browser test. It waits for the
// first data, drags across the first chart's middle third as a user
// would, zooms to one second around the event, hovers at the event's
// time, zooms back to the whole run, and writes what it saw at each step
// (the x range, the points drawn and the bucket size of every line, the
// hover's answers, the mark labels drawn) and every error into <body
// data-probe>.
const viewProbe = `<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  var ce = console.error;
  console.error = function () { errors.push(Array.prototype.join.call(arguments, " ")); ce.apply(console, arguments); };
  var out = { steps: [] }, b = document.body;
  function sites() {
    var el = document.getElementById("sites-gpu0");
    return { exists: !!el, others: document.querySelectorAll(".chart.sites").length,
      legend: el ? [].map.call(el.querySelectorAll(".u-legend .u-series .u-label"), function (x) { return x.textContent; }) : [] };
  }
  function finish(why) { out.sites = sites(); out.errors = errors; out.why = why || ""; b.setAttribute("data-probe", JSON.stringify(out)); }
  function until(cond, then) {
    var t0 = Date.now();
    (function poll() { if (cond()) then(); else if (Date.now() - t0 > 30000) finish("timed out"); else setTimeout(poll, 20); })();
  }
  function seq() { return Number(b.getAttribute("data-seq")) || 0; }
  function snap(name) { var v = window.memrecView; out.steps.push({ name: name, x: v.x.slice(), drawn: Object.assign({}, v.drawn), every: Object.assign({}, v.every) }); }
  window.addEventListener("load", function () {
    until(function () { return b.hasAttribute("data-charts-ready") && seq() > 0; }, function () {
      var v = window.memrecView, u = v.charts[0].u, whole = v.x.slice();
      out.firstPaintMs = v.firstPaintMs;
      snap("whole");
      var r = u.over.getBoundingClientRect(), y = r.top + r.height / 2, x0 = r.left + r.width * 0.3, x1 = r.left + r.width * 0.6, last = x0;
      function mouse(type, x, target) {
        target.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, movementX: x - last, bubbles: true, cancelable: true, button: 0, buttons: type === "mouseup" ? 0 : 1, view: window }));
        last = x;
      }
      var s0 = seq();
      mouse("mouseenter", x0, u.over); mouse("mousedown", x0, u.over); mouse("mousemove", (x0 + x1) / 2, u.over); mouse("mousemove", x1, u.over); mouse("mouseup", x1, document);
      until(function () { return seq() > s0; }, function () {
        snap("drag");
        var s1 = seq();
        v.zoom(61, 62);
        until(function () { return seq() > s1; }, function () {
          snap("1s");
          var ch = v.charts[0];
          // Hover at 61.5 s; a layout change while the page settles (the
          // sites chart drawn below) can move the cursor again before the
          // answer comes, so the hover is asked for until it is there.
          function hover() {
            var rr = u.over.getBoundingClientRect();
            ch.hoverRaw = null;
            u.over.dispatchEvent(new MouseEvent("mousemove", { clientX: rr.left + u.valToPos(61.5, "x"), clientY: rr.top + rr.height / 2, bubbles: true, view: window }));
          }
          var tries = 0;
          hover();
          until(function () {
            if (ch.hoverRaw == null) return false;
            if (Math.abs(ch.hoverX - 61.5) < 0.01 || ++tries > 20) return true;
            hover();
            return false;
          }, function () {
            out.hover = { x: ch.hoverX, lines: ch.hoverRaw[0].lines, marks: ch.hoverRaw[0].marks, rows: ch.hoverRows };
            out.labels = ch.drawnLabels;
            var sc = v.charts.filter(function (c) { return c.sites; })[0];
            out.sitesHover = sc ? sc.hoverRows : null;
            var s2 = seq();
            v.zoom(whole[0], whole[1]);
            until(function () { return seq() > s2; }, function () {
              snap("back");
              // The x axis in steps: the page maps its window through the
              // run's step table and asks for the same data.
              var s3 = seq(), m = document.getElementById("mode");
              m.value = "step"; m.onchange();
              until(function () { return seq() > s3; }, function () { snap("step"); out.maxStep = v.runs[0].steps[v.runs[0].steps.length - 1][1]; finish(); });
            });
          });
        });
      });
    });
  });
})();
</script>
`

type probeStep struct {
	Name  string           `json:"name"`
	X     [2]float64       `json:"x"`
	Drawn map[string]int   `json:"drawn"`
	Every map[string]int64 `json:"every"`
}

type probeOut struct {
	Steps        []probeStep `json:"steps"`
	Errors       []string    `json:"errors"`
	Why          string      `json:"why"`
	FirstPaintMs float64     `json:"firstPaintMs"`
	Hover        struct {
		X     float64      `json:"x"`
		Lines []atLineJSON `json:"lines"`
		Marks []markJSON   `json:"marks"`
	} `json:"hover"`
	Labels  []string `json:"labels"`
	MaxStep int      `json:"maxStep"`
	Sites   struct {
		Exists bool     `json:"exists"`
		Others int      `json:"others"` // sites charts on the page
		Legend []string `json:"legend"`
	} `json:"sites"`
	SitesHover [][]string `json:"sitesHover"` // [colour, site, bytes], the top band first
}

// TestViewInBrowser loads the viewer's page in headless Chromium (network
// off but for the test server) over a 15-minute run of 2 GPUs at 100 Hz:
// the whole run is drawn from buckets, at most four points per pixel; a
// drag zooms to the dragged third; a one-second window draws exactly the
// stored samples in it; hover shows each line's last stored sample before
// the cursor; the event's label is drawn; zooming back draws the whole
// run as before; GPU 0, which has site snapshots, has a sites chart (GPU
// 1 none) whose legend names the growing site first and whose hover, at
// the event, says what it held at the snapshot before; no error anywhere.
func TestViewInBrowser(t *testing.T) {
	t.Parallel()
	browser := cdp.Need(t)
	path, run := testDBOf(t, 900)
	src := NewDBSource(path)
	defer src.Close()
	api := Handler(src, Options{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(strings.Replace(page, "</body>", viewProbe+"</body>", 1)))
			return
		}
		api.ServeHTTP(w, r)
	}))
	defer srv.Close()
	// Chromium driven over the DevTools protocol, in real time: the page
	// loads, the probe zooms and hovers, and its answer is read back.
	br, err := cdp.Start(browser, filepath.Join(t.TempDir(), "profile"), "--window-size=1280,1600",
		"--proxy-bypass-list=<-loopback>", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	tab, err := br.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Navigate(srv.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if err := tab.WaitFor(`document.body && document.body.hasAttribute("data-probe")`, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := tab.Eval(`document.body.getAttribute("data-probe")`, &raw); err != nil {
		t.Fatal(err)
	}
	var out probeOut
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("probe: %v\n%s", err, raw)
	}
	if out.Why != "" || len(out.Errors) > 0 {
		t.Errorf("probe: %q, errors in the page: %v", out.Why, out.Errors)
	}
	if errs := tab.Errors(); len(errs) > 0 {
		t.Errorf("the page threw or logged errors: %v", errs)
	}
	if len(out.Steps) != 5 {
		t.Fatalf("probe got through %d steps of 5: %+v", len(out.Steps), out.Steps)
	}
	if st := out.Steps[4]; st.X[0] > 1 || st.X[1] < float64(out.MaxStep) || st.Drawn["gen/gpu0.used"] != out.Steps[0].Drawn["gen/gpu0.used"] {
		t.Errorf("x in steps: %v (last step %d), %d points drawn (in seconds: %d)", st.X, out.MaxStep, st.Drawn["gen/gpu0.used"], out.Steps[0].Drawn["gen/gpu0.used"])
	}
	// The stored samples, to count each window's and to check the hover.
	db, err := storage.Open(path, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var used []storage.DeviceSample
	it := db.DeviceSamples(run, 0, storage.MinTime, storage.MaxTime)
	for it.Next() {
		used = append(used, it.At())
	}
	var alloc []storage.TorchSample
	ti := db.TorchSamples(run, 0, 4100, storage.MinTime, storage.MaxTime)
	for ti.Next() {
		alloc = append(alloc, ti.At())
	}
	db.Close()
	inWindow := func(x [2]float64) int {
		n := 0
		for _, s := range used {
			if s.T >= run.StartNS+int64(math.Round(x[0]*1e9)) && s.T < run.StartNS+int64(math.Round(x[1]*1e9)) {
				n++
			}
		}
		return n
	}
	const line = "gen/gpu0.used"
	whole, drag, second, back := out.Steps[0], out.Steps[1], out.Steps[2], out.Steps[3]
	t.Logf("first paint %.0f ms after navigation", out.FirstPaintMs)
	for _, s := range out.Steps[:4] {
		t.Logf("%-5s x %.3f..%.3f s: %d samples, %d points drawn, each of %d", s.Name, s.X[0], s.X[1], inWindow(s.X), s.Drawn[line], s.Every[line])
	}
	// The whole run: 90 000 samples over about 600 pixels, so buckets,
	// and at most four points a pixel.
	if whole.Every[line] < 128 || whole.Drawn[line] > 4*1280 || whole.Drawn[line] < 600 {
		t.Errorf("whole run: %d points from units of %d samples", whole.Drawn[line], whole.Every[line])
	}
	w := whole.X[1] - whole.X[0]
	if d := w / 100; math.Abs(drag.X[0]-(whole.X[0]+0.3*w)) > d || math.Abs(drag.X[1]-(whole.X[0]+0.6*w)) > d {
		t.Errorf("x range %v after the drag, want about the middle third of %v", drag.X, whole.X)
	}
	if n := inWindow(second.X); second.Every[line] != 1 || second.Drawn[line] != n || n < 90 {
		t.Errorf("1 s window %v: %d points from units of %d, %d samples stored", second.X, second.Drawn[line], second.Every[line], n)
	}
	if back.Drawn[line] != whole.Drawn[line] || back.Every[line] != whole.Every[line] {
		t.Errorf("back to the whole run: %d points of %d, first %d of %d", back.Drawn[line], back.Every[line], whole.Drawn[line], whole.Every[line])
	}
	// Hover: each line's value is its last stored sample at or before the
	// cursor's time.
	tq := run.StartNS + int64(math.Round(out.Hover.X*1e9))
	if math.Abs(out.Hover.X-61.5) > 0.01 {
		t.Errorf("hovered at %.3f s, want 61.5", out.Hover.X)
	}
	checked := 0
	for _, l := range out.Hover.Lines {
		var wantT, wantV int64 = -1, 0
		switch l.Key {
		case "gpu0.used":
			for _, s := range used {
				if s.T <= tq {
					wantT, wantV = s.T, s.Used
				}
			}
		case "gpu0.allocated.4100":
			for _, s := range alloc {
				if s.T <= tq {
					wantT, wantV = s.T, s.Allocated
				}
			}
		default:
			continue
		}
		checked++
		// The page sends t to the µs: the sample found may be the one
		// before when the cursor falls within a µs of a sample.
		if !l.Has || l.V != wantV || math.Abs(float64(l.T-(wantT-run.StartNS)/1000)) > 1 {
			t.Errorf("hover %s: %+v, want %d B at %d µs", l.Key, l, wantV, (wantT-run.StartNS)/1000)
		}
	}
	if checked != 2 {
		t.Errorf("hover answered %d of the 2 lines checked: %+v", checked, out.Hover.Lines)
	}
	if len(out.Hover.Marks) != 1 || out.Hover.Marks[0].Text != "eval begins" {
		t.Errorf("hover's marks: %+v, want the event", out.Hover.Marks)
	}
	if !strings.Contains(strings.Join(out.Labels, "|"), "eval begins") {
		t.Errorf("labels drawn at the event: %q", out.Labels)
	}
	// The sites: the fixture's one growing site is ranked first; at
	// 61.5 s the snapshot in force is the one at 60 s (the second).
	if !out.Sites.Exists || out.Sites.Others != 1 || len(out.Sites.Legend) == 0 || out.Sites.Legend[0] != "train.py:52 keep (grows)" {
		t.Errorf("sites chart %+v, want one, its first band train.py:52 keep (grows)", out.Sites)
	}
	wantHeld := fmt.Sprintf("%d MiB", siteFixture(1)["/w/train.py:52"]>>20)
	found := false
	for _, r := range out.SitesHover {
		found = found || len(r) == 3 && strings.HasPrefix(r[1], "train.py:52 keep") && r[2] == wantHeld
	}
	if !found {
		t.Errorf("sites hover at 61.5 s: %q, want train.py:52 keep at %s", out.SitesHover, wantHeld)
	}
}

// severalProbe waits for the first data of a page of two runs, hovers at
// 150 s into the first chart, and writes the grouped legend's entries,
// whether uPlot's own legend is shown, the hover's time, the series'
// strokes and any error into <body data-probe>.
const severalProbe = `<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  var b = document.body;
  function until(cond, then) {
    var t0 = Date.now();
    (function poll() { if (cond()) then(); else if (Date.now() - t0 > 30000) b.setAttribute("data-probe", JSON.stringify({ why: "timed out", errors: errors })); else setTimeout(poll, 20); })();
  }
  window.addEventListener("load", function () {
    until(function () { return b.hasAttribute("data-charts-ready") && Number(b.getAttribute("data-seq")) > 0; }, function () {
      var ch = window.memrecView.charts[0], u = ch.u;
      function hover() {
        var r = u.over.getBoundingClientRect();
        ch.hoverRaw = null;
        u.over.dispatchEvent(new MouseEvent("mousemove", { clientX: r.left + u.valToPos(150, "x"), clientY: r.top + r.height / 2, bubbles: true, view: window }));
      }
      var tries = 0;
      hover();
      until(function () {
        if (ch.hoverRaw == null) return false;
        if (Math.abs(ch.hoverX - 150) < 1 || ++tries > 20) return true;
        hover();
        return false;
      }, function () {
        b.setAttribute("data-probe", JSON.stringify({
          legend: [].map.call(ch.el.querySelectorAll(".glegend .gl"), function (e) { return e.textContent; }),
          uplotLegend: ch.el.querySelectorAll(".u-legend .u-series").length,
          at: ch.hover.querySelector("b").textContent, x: ch.hoverX,
          rows: ch.hoverRows.map(function (r) { return r[0] + " " + r[1]; }),
          errors: errors, why: ""
        }));
      });
    });
  });
})();
</script>
`

// TestViewSeveralRunsInBrowser: two runs of five minutes in one chart.
// The legend has an entry per run and one per kind of line, not one per
// line of each run; the hover writes its time in the axis' unit (minutes,
// report.TimeUnitFor of five minutes) and each row in its run's colour.
func TestViewSeveralRunsInBrowser(t *testing.T) {
	t.Parallel()
	browser := cdp.Need(t)
	path := filepath.Join(t.TempDir(), "two.db")
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		c := tracegen.Default()
		c.Name, c.GPUs, c.Duration, c.Interval, c.Procs = name, 1, 5*time.Minute, 100*time.Millisecond, false
		var buf bytes.Buffer
		if _, err := tracegen.Write(&buf, c); err != nil {
			t.Fatal(err)
		}
		if _, err := jsonl.Import(db, []jsonl.Source{{Name: name, R: &buf}}, jsonl.ImportOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	src := NewDBSource(path)
	defer src.Close()
	api := Handler(src, Options{Runs: []string{"a", "b"}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			w.Write([]byte(strings.Replace(page, "</body>", severalProbe+"</body>", 1)))
			return
		}
		api.ServeHTTP(w, r)
	}))
	defer srv.Close()
	br, err := cdp.Start(browser, filepath.Join(t.TempDir(), "profile"), "--window-size=1280,1200",
		"--proxy-bypass-list=<-loopback>", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	tab, err := br.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Navigate(srv.URL + "/"); err != nil {
		t.Fatal(err)
	}
	if err := tab.WaitFor(`document.body && document.body.hasAttribute("data-probe")`, 90*time.Second); err != nil {
		t.Fatal(err)
	}
	var raw string
	if err := tab.Eval(`document.body.getAttribute("data-probe")`, &raw); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Legend      []string `json:"legend"`
		UPlotLegend int      `json:"uplotLegend"`
		At          string   `json:"at"`
		X           float64  `json:"x"` // seconds since the start
		Rows        []string `json:"rows"`
		Errors      []string `json:"errors"`
		Why         string   `json:"why"`
	}
	if err := json.Unmarshal([]byte(raw), &out); err != nil {
		t.Fatalf("probe: %v\n%s", err, raw)
	}
	if out.Why != "" || len(out.Errors) > 0 {
		t.Fatalf("probe: %q, errors in the page: %v", out.Why, out.Errors)
	}
	// Entries: the two runs, then each kind of line once.
	kinds := map[string]bool{}
	for _, e := range out.Legend[min(2, len(out.Legend)):] {
		kinds[e] = true
	}
	if len(out.Legend) < 4 || out.Legend[0] != "a" || out.Legend[1] != "b" || len(kinds) != len(out.Legend)-2 || out.UPlotLegend != 0 {
		t.Errorf("legend %q (and %d entries of uPlot's), want a, b, then each kind once", out.Legend, out.UPlotLegend)
	}
	// About 150 s, to a pixel: 2.5 min, written to three decimals.
	if want := fmt.Sprintf("%.3f min since start", out.X/60); out.At != want || math.Abs(out.X-150) > 2 {
		t.Errorf("hover at %q (%.3f s), want %q", out.At, out.X, want)
	}
	for _, r := range out.Rows {
		run := strings.Fields(r)[1]
		want := map[string]string{"a:": "#1f77b4", "b:": "#ff7f0e"}[run]
		if f := strings.Fields(r)[0]; f != want && !strings.Contains(r, "(stacked)") {
			t.Errorf("hover row %q: colour %s, want its run's %s", r, f, want)
		}
	}
	t.Logf("legend %q; hover at %q: %q", out.Legend, out.At, out.Rows)
}
