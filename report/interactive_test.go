package report

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/testsupport/cdp"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// TestTimelineData: the page's arrays decode to real points of the run,
// at most four per bucket, and the peak the analysis found among all
// samples survives the downsampling.
func TestTimelineData(t *testing.T) {
	rep := realReport(t, fixtures.LeakRun)
	d := timelineOf(rep, func(int) bool { return true }, PageBuckets)
	if len(d.GPUs) != 1 {
		t.Fatalf("%d GPUs", len(d.GPUs))
	}
	g := d.GPUs[0]
	peaks := map[string]int64{"device used": *rep.GPUs[0].PeakUsedBytes, "allocated": *rep.GPUs[0].PeakAllocatedBytes, "reserved": *rep.GPUs[0].PeakReservedBytes}
	for _, s := range g.Series {
		if len(s.DT) == 0 || len(s.DT) > 4*PageBuckets || len(s.DT) != len(s.DV) {
			t.Errorf("%s: %d times, %d values", s.Name, len(s.DT), len(s.DV))
		}
		var tt, v, top int64
		for i := range s.DT {
			tt += s.DT[i]
			v += s.DV[i]
			top = max(top, v)
			if s.DT[i] < 0 && i > 0 {
				t.Fatalf("%s: time goes back at point %d", s.Name, i)
			}
		}
		if want, ok := peaks[s.Name]; ok && top != want>>10 {
			t.Errorf("%s: highest point %d KiB, the run's peak is %d KiB", s.Name, top, want>>10)
		}
		if end := (rep.EndNS - rep.StartNS) / 1000; tt > end {
			t.Errorf("%s: last point at %d µs, after the run's end at %d", s.Name, tt, end)
		}
		delete(peaks, s.Name)
	}
	if len(peaks) > 0 {
		t.Errorf("series missing from the page: %v", peaks)
	}
	if len(g.Epochs) != len(rep.GPUs[0].Epochs) {
		t.Errorf("%d epochs on the page, %d in the run", len(g.Epochs), len(rep.GPUs[0].Epochs))
	}
}

// zoomProbe is added to a copy of the page by the browser test: it counts
// the first chart's drawn pixels, drags across its middle third as a user
// would, and writes what it saw, and any error, into <body> attributes.
const zoomProbe = `<script>
(function () {
  var errors = [];
  window.addEventListener("error", function (e) { errors.push(String(e.message)); });
  var ce = console.error;
  console.error = function () { errors.push(Array.prototype.join.call(arguments, " ")); ce.apply(console, arguments); };
  window.addEventListener("load", function () {
    var b = document.body, charts = window.memrecCharts || [];
    b.setAttribute("data-probe-charts", String(charts.length));
    if (charts.length === 0) { b.setAttribute("data-probe-errors", errors.join(" | ")); return; }
    var u = charts[0], cv = u.ctx.canvas;
    var px = u.ctx.getImageData(0, 0, cv.width, cv.height).data, ink = 0;
    for (var i = 3; i < px.length; i += 4) if (px[i] > 0) ink++;
    var before = [u.scales.x.min, u.scales.x.max];
    var r = u.over.getBoundingClientRect(), y = r.top + r.height / 2;
    var x0 = r.left + r.width * 0.3, x1 = r.left + r.width * 0.6;
    var lastX = x0;
    function mouse(type, x, target) {
      // movementX too: uPlot ignores a drag's moves that did not move.
      target.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, movementX: x - lastX, bubbles: true, cancelable: true, button: 0, buttons: type === "mouseup" ? 0 : 1, view: window }));
      lastX = x;
    }
    mouse("mouseenter", x0, u.over);
    mouse("mousedown", x0, u.over);
    mouse("mousemove", (x0 + x1) / 2, u.over);
    mouse("mousemove", x1, u.over);
    mouse("mouseup", x1, document);
    setTimeout(function () { // uPlot applies a new scale in a microtask
      var after = [u.scales.x.min, u.scales.x.max];
      b.setAttribute("data-probe-ink", String(ink));
      b.setAttribute("data-probe-before", before.join(","));
      b.setAttribute("data-probe-after", after.join(","));
      b.setAttribute("data-probe-ready-ms", String(window.memrecReadyMs));
      b.setAttribute("data-probe-errors", errors.join(" | "));
    }, 50);
  });
})();
</script>
`

// TestTimelineInBrowser loads the page from disk in headless Chromium with
// the network off: the chart's canvas is drawn, a drag across it zooms the
// x range to the dragged third, and there is no error in the page or in
// Chromium's console log.
func TestTimelineInBrowser(t *testing.T) {
	t.Parallel()
	browser := cdp.Need(t)
	rep := realReport(t, fixtures.LeakRun)
	dir := t.TempDir()
	path, err := Write(filepath.Join(dir, "rep"), rep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Offline: nothing is loaded from anywhere else.
	if m := regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?(https?:|//)`).Find(page); m != nil {
		t.Errorf("the page loads %s", m)
	}
	probe := filepath.Join(filepath.Dir(path), "probe.html")
	withProbe := strings.Replace(string(page), "</body>", zoomProbe+"</body>", 1)
	if err := os.WriteFile(probe, []byte(withProbe), 0o644); err != nil {
		t.Fatal(err)
	}
	// Chromium over the DevTools protocol, with no network: the probe
	// zooms the chart and writes what it saw into <body>'s attributes.
	br, err := cdp.Start(browser, filepath.Join(dir, "profile"), "--window-size=1280,2000",
		"--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND")
	if err != nil {
		t.Fatal(err)
	}
	defer br.Close()
	tab, err := br.NewPage()
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.Navigate("file://" + probe); err != nil {
		t.Fatal(err)
	}
	if err := tab.WaitFor(`document.body && document.body.hasAttribute("data-probe-errors")`, time.Minute); err != nil {
		t.Fatal(err)
	}
	attr := func(name string) string {
		var v *string
		if err := tab.Eval(`document.body.getAttribute(`+strconv.Quote(name)+`)`, &v); err != nil || v == nil {
			t.Fatalf("no %s in the page after load (%v); the page said: %v", name, err, tab.Errors())
		}
		return *v
	}
	if errs := tab.Errors(); len(errs) > 0 {
		t.Errorf("the page threw or logged errors: %v", errs)
	}
	if n := attr("data-charts-ready"); n != "1" {
		t.Errorf("%s charts ready, want 1", n)
	}
	if e := attr("data-probe-errors"); e != "" {
		t.Errorf("errors in the page: %s", e)
	}
	if ink, _ := strconv.Atoi(attr("data-probe-ink")); ink < 5000 {
		t.Errorf("the chart's canvas has %d drawn pixels", ink)
	}
	nums := func(s string) []float64 {
		var out []float64
		if err := json.Unmarshal([]byte("["+s+"]"), &out); err != nil || len(out) != 2 {
			t.Fatalf("x range %q", s)
		}
		return out
	}
	before, after := nums(attr("data-probe-before")), nums(attr("data-probe-after"))
	// The drag covered 30 % to 60 % of the width: the new range is that
	// third of the old one (to a pixel or two).
	w := before[1] - before[0]
	wantLo, wantHi := before[0]+0.3*w, before[0]+0.6*w
	if d := w / 100; after[0] < wantLo-d || after[0] > wantLo+d || after[1] < wantHi-d || after[1] > wantHi+d {
		t.Errorf("x range %v after the drag, want about [%.2f %.2f] (it was %v)", after, wantLo, wantHi, before)
	}
	t.Logf("charts interactive %s ms after navigation; x range %v → %v", attr("data-probe-ready-ms"), before, after)
}
