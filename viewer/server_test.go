package viewer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
)

// The test run: 2 GPUs at 100 Hz for 3 minutes with allocator samples,
// steps and epochs (tracegen), plus two events and an OOM at known times.
// The times are in the first 3 minutes, so that every test run has them.
const (
	testSeconds = 180
	eventAt     = 61.5 // s after the start
	oomAt       = 170.25
)

// testDB writes the test run into a new database file and returns its
// path and the run as stored.
// serveDB serves the database at path as memrec view does, until the test
// ends.
func serveDB(t testing.TB, path string) *httptest.Server {
	src := NewDBSource(path)
	t.Cleanup(func() { src.Close() })
	srv := httptest.NewServer(Handler(src, Options{}))
	t.Cleanup(srv.Close)
	return srv
}

func testDB(t testing.TB) (string, storage.Run) { return testDBOf(t, testSeconds) }

// testDBOf is testDB of a run that lasts seconds.
func testDBOf(t testing.TB, seconds int) (string, storage.Run) {
	t.Helper()
	c := tracegen.Default()
	c.GPUs, c.Duration, c.EpochSteps = 2, time.Duration(seconds)*time.Second, 120
	var buf bytes.Buffer
	if _, err := tracegen.Write(&buf, c); err != nil {
		t.Fatal(err)
	}
	start := c.Start.UnixNano()
	fmt.Fprintf(&buf, `{"type":"mark","t_ns":%d,"kind":"event","text":"eval begins"}`+"\n", start+int64(eventAt*1e9))
	fmt.Fprintf(&buf, `{"type":"mark","t_ns":%d,"kind":"oom","gpu":1,"text":"tried to allocate 2.00 GiB"}`+"\n", start+int64(oomAt*1e9))
	writeSites(&buf, start, seconds)
	path := filepath.Join(t.TempDir(), "view.db")
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "gen", R: &buf}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	return path, runs[0]
}

// The test run's site snapshots: on GPU 0 only (GPU 1 has none), one
// every sitesEvery seconds from sitesEvery on. train.py:52 keeps 8 MiB
// more at each; the weights (model.py:10, 2 GiB) are the largest steady
// site; data.py:7 goes up and down; ten small sites of 1 to 10 MiB; the
// untracked blocks 64 MiB; the probe's "other" 3 MiB.
const sitesEvery = 30

// siteFixture is site → live bytes at snapshot k (0-based).
func siteFixture(k int) map[string]int64 {
	m := map[string]int64{
		"/w/train.py:52": int64(k+1) * 8 << 20,
		"/w/model.py:10": 2 << 30,
		"/w/data.py:7":   256<<20 + int64(k%3)*16<<20,
	}
	for i := 1; i <= 10; i++ {
		m[fmt.Sprintf("/w/util.py:%d", 100+i)] = int64(i) << 20
	}
	return m
}

func writeSites(w io.Writer, start int64, seconds int) {
	funcs := map[string]string{"/w/train.py:52": "keep", "/w/model.py:10": "build", "/w/data.py:7": "load"}
	for k := 0; (k+1)*sitesEvery < seconds; k++ {
		var sites []string
		for key, b := range siteFixture(k) {
			file, line, _ := strings.Cut(key, ":")
			sites = append(sites, fmt.Sprintf(`{"file":%q,"line":%s,"func":%q,"live_bytes":%d,"live_blocks":1}`, file, line, funcs[key], b))
		}
		fmt.Fprintf(w, `{"type":"sites","t_ns":%d,"gpu":0,"pid":4100,"rank":0,"reason":"snapshot","untracked":{"live_bytes":%d,"live_blocks":2},"sites":[%s],"other":{"sites":4,"live_bytes":%d,"live_blocks":4}}`+"\n",
			start+int64((k+1)*sitesEvery)*1e9, 64<<20, strings.Join(sites, ","), 3<<20)
	}
}

func getJSON(t testing.TB, url string, into any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if into != nil && resp.StatusCode == 200 {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("%s: %v\n%s", url, err, b)
		}
	}
	return resp.StatusCode
}

// TestBadRequests: every endpoint with a bad parameter answers 4xx with a
// message that names what was wrong, never 5xx.
func TestBadRequests(t *testing.T) {
	path, _ := testDB(t)
	srv := serveDB(t, path)
	w := "/api/window?run=gen&line=gpu0.used&points=100"
	cases := []struct {
		url  string
		code int
		says string
	}{
		{w + "&from=0&to=10", 200, ""},
		{"/api/window?run=nope&line=gpu0.used&from=0&to=1", 404, "no such run"},
		{"/api/window?line=gpu0.used&from=0&to=1", 400, "run"},
		{"/api/window?run=gen&run=gen&line=gpu0.used&from=0&to=1", 400, "exactly one"},
		{"/api/window?run=gen&line=gpu9.used&from=0&to=1", 404, "no such line"},
		{"/api/window?run=gen&line=gpu0.bogus&from=0&to=1", 400, "want gpuN.used"},
		{"/api/window?run=gen&line=gpu0.allocated&from=0&to=1", 400, "want gpuN.used"},
		{"/api/window?run=gen&from=0&to=1", 400, "line"},
		{w + "&from=NaN&to=10", 400, "finite"},
		{w + "&from=0&to=Inf", 400, "finite"},
		{w + "&from=0&to=1e300", 400, "ten years"},
		{w + "&from=abc&to=10", 400, "from"},
		{w + "&to=10", 400, "from"},
		{w + "&from=10&to=5", 400, "after from"},
		{w + "&from=5000&to=6000", 400, "outside the run"},
		{w + "&from=-100&to=-50", 400, "outside the run"},
		{"/api/window?run=gen&line=gpu0.used&from=0&to=10&points=100000000", 400, "points"},
		{"/api/window?run=gen&line=gpu0.used&from=0&to=10&points=0", 400, "points"},
		{"/api/window?run=gen&line=gpu0.used&from=0&to=10&points=-3", 400, "points"},
		{"/api/window?run=gen&line=gpu0.used&from=0&to=10&points=2.5", 400, "points"},
		{"/api/window?run=gen&line=" + strings.Repeat("gpu0.used&line=", 80) + "gpu0.used&from=0&to=10", 400, "lines"},
		{"/api/at?run=gen&t=NaN", 400, "finite"},
		{"/api/at?run=gen", 400, "t"},
		{"/api/at?run=gen&t=5&near=-1", 400, "near"},
		{"/api/at?run=nope&t=5", 404, "no such run"},
		{"/api/marks?run=gen&from=0&to=10&limit=999999", 400, "limit"},
		{"/api/marks?run=gen&from=0", 400, "to"},
		{"/api/sites?run=gen&gpu=0", 200, ""},
		{"/api/sites?run=gen&gpu=0&from=0&to=50&top=50", 200, ""},
		{"/api/sites?run=nope&gpu=0", 404, "no such run"},
		{"/api/sites?gpu=0", 400, "run"},
		{"/api/sites?run=gen", 400, "gpu"},
		{"/api/sites?run=gen&gpu=7", 404, "no GPU 7"},
		{"/api/sites?run=gen&gpu=-1", 400, "gpu"},
		{"/api/sites?run=gen&gpu=x", 400, "gpu"},
		{"/api/sites?run=gen&gpu=0&gpu=1", 400, "gpu"},
		{"/api/sites?run=gen&gpu=0&from=5000&to=6000", 400, "outside the run"},
		{"/api/sites?run=gen&gpu=0&from=10", 400, "to"},
		{"/api/sites?run=gen&gpu=0&from=NaN&to=10", 400, "finite"},
		{"/api/sites?run=gen&gpu=0&from=20&to=10", 400, "after from"},
		{"/api/sites?run=gen&gpu=0&top=0", 400, "top"},
		{"/api/sites?run=gen&gpu=0&top=51", 400, "top"},
		{"/api/sites?run=gen&gpu=0&top=99999999999999999999", 400, "top"},
		{"/api/sites?run=gen&gpu=0&top=NaN", 400, "top"},
		{"/api/sites?run=gen&gpu=0&top=2&top=3", 400, "top"},
		{"/api/runs?run=nope", 404, "no such run"},
		{"/api/runs?run=", 400, "empty"},
		{"/api/nothing", 404, ""},
		{"/index.html", 404, ""},
		{"/../../etc/passwd", 404, ""},
		{"/api/window/", 404, ""},
		{"/uplot.js", 404, ""},
	}
	for _, c := range cases {
		resp, err := http.Get(srv.URL + c.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.code {
			t.Errorf("%s: %d, want %d: %s", c.url, resp.StatusCode, c.code, b)
			continue
		}
		if c.says != "" && !strings.Contains(string(b), c.says) {
			t.Errorf("%s: %d %s, want a message with %q", c.url, resp.StatusCode, b, c.says)
		}
		if c.code >= 400 && c.code < 500 && c.says != "" && !strings.Contains(string(b), `"error"`) {
			t.Errorf("%s: no error message: %s", c.url, b)
		}
	}
	// Only GET: nothing writes.
	for _, m := range []string{"POST", "PUT", "DELETE", "PATCH"} {
		req, _ := http.NewRequest(m, srv.URL+"/api/runs", strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Errorf("%s /api/runs: %d, want 405", m, resp.StatusCode)
		}
	}
}

// TestConcurrentRequests: 200 requests at once, windows of every width
// and hovers, all answered, each window's points within its range.
func TestConcurrentRequests(t *testing.T) {
	path, _ := testDB(t)
	srv := serveDB(t, path)
	var wg sync.WaitGroup
	errs := make(chan string, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := float64(testSeconds) / float64(int(1)<<(i%12))
			from := float64(i%7) * (testSeconds - w) / 7
			url := fmt.Sprintf("%s/api/window?run=gen&line=gpu%d.used&from=%g&to=%g&points=%d", srv.URL, i%2, from, from+w, 200+i)
			if i%5 == 0 {
				url = fmt.Sprintf("%s/api/at?run=gen&t=%g&near=1", srv.URL, from)
			}
			resp, err := http.Get(url)
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			var out struct {
				Lines []struct {
					T json.RawMessage `json:"t_us"`
					V json.RawMessage `json:"v"`
				} `json:"lines"`
			}
			if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
				errs <- fmt.Sprintf("%s: %d", url, resp.StatusCode)
				return
			}
			for _, l := range out.Lines {
				var ts, vs []int64
				if json.Unmarshal(l.T, &ts) != nil || json.Unmarshal(l.V, &vs) != nil {
					continue // a hover's single values
				}
				if len(ts) > 4*(200+i) || len(ts) != len(vs) {
					errs <- fmt.Sprintf("%s: %d points", url, len(ts))
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestWindowEveryLevel: zooming from the whole run to one second, each
// window's points come from samples once fewer than series.Base fall in a
// pixel, and then they are exactly the samples in the window; coarser
// windows are at most four points a pixel.
func TestWindowEveryLevel(t *testing.T) {
	path, run := testDB(t)
	srv := serveDB(t, path)
	db, err := storage.Open(path, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var ts, vs []int64
	it := db.DeviceSamples(run, 0, storage.MinTime, storage.MaxTime)
	for it.Next() {
		ts, vs = append(ts, it.At().T), append(vs, it.At().Used)
	}
	db.Close()
	const points = 40
	for w := float64(testSeconds); w >= 0.3; w /= 4 {
		from := 40.0
		if w > testSeconds-from {
			from = 0
		}
		var out windowJSON
		url := fmt.Sprintf("%s/api/window?run=gen&line=gpu0.used&from=%g&to=%g&points=%d", srv.URL, from, from+w, points)
		if code := getJSON(t, url, &out); code != 200 {
			t.Fatalf("%s: %d", url, code)
		}
		l := out.Lines[0]
		lo, hi := run.StartNS+int64(from*1e9), run.StartNS+int64((from+w)*1e9)
		var inWindow []int64
		for i, tt := range ts {
			if tt >= lo && tt < hi {
				inWindow = append(inWindow, vs[i])
			}
		}
		n := len(inWindow)
		if n/points < 128 {
			if l.Every != 1 || len(l.V) > n || len(l.V) < min(n, 2*points)/2 {
				t.Errorf("%g s window: %d samples, %d points from units of %d; want every sample's M4", w, n, len(l.V), l.Every)
			}
			if n <= points && !equalInts(l.V, inWindow) {
				t.Errorf("%g s window: %d samples in it, drawn points differ: %d points", w, n, len(l.V))
			}
		} else if l.Every < 128 || len(l.V) > 4*points {
			t.Errorf("%g s window: %d samples, %d points from units of %d", w, n, len(l.V), l.Every)
		}
		t.Logf("%7.2f s: %6d samples, %4d points, every %d", w, n, len(l.V), l.Every)
	}
}

func equalInts(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestAtAndMarks: hover answers each line's last stored sample at or
// before the time, with its age; the event and the OOM come back with
// their text near their times.
func TestAtAndMarks(t *testing.T) {
	path, run := testDB(t)
	srv := serveDB(t, path)
	db, err := storage.Open(path, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var torch []storage.TorchSample
	it := db.TorchSamples(run, 1, 4101, storage.MinTime, storage.MaxTime)
	for it.Next() {
		torch = append(torch, it.At())
	}
	db.Close()
	if len(torch) < 100 {
		t.Fatalf("%d allocator samples of gpu1/4101", len(torch))
	}
	for _, q := range []float64{0.05, 10.123, eventAt, 99.999, oomAt, testSeconds - 0.001} {
		tq := run.StartNS + int64(q*1e9)
		var want storage.TorchSample
		found := false
		for _, s := range torch {
			if s.T <= tq {
				want, found = s, true
			}
		}
		var out atJSON
		url := fmt.Sprintf("%s/api/at?run=gen&t=%g&near=0.5&line=gpu1.allocated.4101", srv.URL, q)
		if code := getJSON(t, url, &out); code != 200 {
			t.Fatalf("%s: %d", url, code)
		}
		l := out.Lines[0]
		wantUS := (want.T - run.StartNS) / 1000
		if !found {
			if l.Has {
				t.Errorf("at %g s, before the first allocator sample: %+v", q, l)
			}
		} else if !l.Has || l.V != want.Allocated || l.T != wantUS || l.Age != out.TUS-wantUS {
			t.Errorf("at %g s: %+v, want the sample at %d µs of %d B", q, l, wantUS, want.Allocated)
		}
		var labels []string
		for _, m := range out.Marks {
			labels = append(labels, m.Kind+":"+m.Text)
		}
		switch q {
		case eventAt:
			if len(labels) != 1 || labels[0] != "event:eval begins" {
				t.Errorf("at the event: marks %v", labels)
			}
		case oomAt:
			if len(labels) != 1 || labels[0] != "oom:tried to allocate 2.00 GiB" {
				t.Errorf("at the OOM: marks %v", labels)
			}
		}
	}
	var marks marksJSON
	getJSON(t, srv.URL+"/api/marks?run=gen&from=0&to=180", &marks)
	if len(marks.Marks) != 2 || marks.Marks[1].Kind != "oom" || *marks.Marks[1].GPU != 1 {
		t.Errorf("marks of the whole run: %+v", marks.Marks)
	}
	var runs runsJSON
	getJSON(t, srv.URL+"/api/runs", &runs)
	if len(runs.Shown) != 1 || len(runs.Shown[0].Epochs) == 0 || len(runs.Shown[0].Steps) < 100 {
		t.Fatalf("runs: %+v", runs.Shown)
	}
}

// TestWindowJSON: the window's own JSON writer gives what encoding/json
// gives.
func TestWindowJSON(t *testing.T) {
	for _, w := range []windowJSON{
		{Run: "a\"<b>", FromUS: -5, ToUS: 7, Lines: []windowLineJSON{{Key: "gpu0.used", T: []int64{1, 2}, V: []int64{-3, 1 << 40}, Every: 1, Samples: 2}, {Key: "k", T: []int64{}, V: []int64{}}}, TookMS: 1.25},
		{Run: "r", Lines: []windowLineJSON{}, Stale: "locked \u2028", TookMS: 0},
	} {
		want, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		if err := w.writeJSON(&got); err != nil || got.String() != string(want)+"\n" {
			t.Errorf("writeJSON (%v):\n%s\nencoding/json:\n%s", err, got.String(), want)
		}
	}
}

// TestLockedFile: while a writer (a recording) holds the file, a source
// that read the run before answers from its index, at its buckets'
// resolution, and says so; one that read nothing answers 503 with what to
// do. Once the writer is gone, every sample is read again.
func TestLockedFile(t *testing.T) {
	path, _ := testDB(t)
	srv := serveDB(t, path)
	url := srv.URL + "/api/window?run=gen&line=gpu0.used&from=10&to=11&points=200"
	var before windowJSON
	if code := getJSON(t, url, &before); code != 200 || before.Lines[0].Every != 1 {
		t.Fatalf("before: %d %+v", code, before)
	}
	time.Sleep(300 * time.Millisecond) // the source lets go of the file (linger)
	w, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var during windowJSON
	code := getJSON(t, strings.Replace(url, "from=10&to=11", "from=20&to=21", 1), &during)
	if code != 200 || during.Stale == "" || during.Lines[0].Every != 128 {
		t.Errorf("while locked: %d, every %v, stale %q", code, during.Lines, during.Stale)
	}
	srv2 := serveDB(t, path)
	resp, err := http.Get(srv2.URL + "/api/runs")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || !strings.Contains(string(b), "record --view-addr") {
		t.Errorf("nothing read before, locked: %d %s", resp.StatusCode, b)
	}
	w.Close()
	var after windowJSON
	if code := getJSON(t, url, &after); code != 200 || after.Stale != "" || after.Lines[0].Every != 1 {
		t.Errorf("after: %d, every %v, stale %q", code, after.Lines, after.Stale)
	}
}

// TestSites: /api/sites names the growing site first and the largest
// steady one second (top=2, from the fixture's design), and every band's
// bytes at every snapshot are the stored rows' (the other band: the rest
// of the sites and the probe's other, summed); a window keeps the
// snapshot before it; GPU 1, without snapshots, answers a note.
func TestSites(t *testing.T) {
	path, run := testDB(t)
	srv := serveDB(t, path)
	// The stored snapshots, by time: site key → live bytes.
	db, err := storage.Open(path, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var times []int64
	stored := map[int64]map[string]int64{}
	it := db.SiteSamples(run, 0, 4100, storage.MinTime, storage.MaxTime)
	for it.Next() {
		r := it.At()
		if stored[r.T] == nil {
			stored[r.T] = map[string]int64{}
			times = append(times, r.T)
		}
		stored[r.T][r.Key()] += r.LiveBytes
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if len(times) != testSeconds/sitesEvery-1 {
		t.Fatalf("%d snapshots stored", len(times))
	}
	check := func(q string, want []int64) {
		t.Helper()
		var got sitesJSON
		if code := getJSON(t, srv.URL+"/api/sites?run=gen&gpu=0&top=2"+q, &got); code != 200 {
			t.Fatalf("%s: %d", q, code)
		}
		if len(got.T) != len(want) || len(got.Sites) != 4 || got.Note != "" {
			t.Fatalf("%s: %d times (want %d), sites %+v, note %q", q, len(got.T), len(want), got.Sites, got.Note)
		}
		for i, s := range []struct{ label, kind, key string }{
			{"train.py:52 keep", "site", "/w/train.py:52"}, {"model.py:10 build", "site", "/w/model.py:10"},
			{"other sites", "other", ""}, {"untracked", "untracked", "<untracked>:0"},
		} {
			g := got.Sites[i]
			if g.Label != s.label || g.Kind != s.kind || g.Grows != (i == 0) || len(g.Bytes) != len(want) {
				t.Errorf("%s: band %d %+v, want %s (%s)", q, i, g, s.label, s.kind)
				continue
			}
			for k, tt := range want {
				row := stored[tt]
				v := row[s.key]
				if s.kind == "other" {
					v = 0
					for key, b := range row {
						if key != "/w/train.py:52" && key != "/w/model.py:10" && key != "<untracked>:0" {
							v += b
						}
					}
				}
				if got.T[k] != (tt-run.StartNS)/1000 || g.Bytes[k] != v {
					t.Errorf("%s: %s at %d µs: %d B, want %d B at %d µs", q, s.label, got.T[k], g.Bytes[k], v, (tt-run.StartNS)/1000)
				}
			}
		}
	}
	check("", times)
	// The one at 60 s holds at 75 s; 90 and 120 s are in (data.py:7, which
	// rises from 30 to 90 s, falls there).
	check("&from=75&to=130", times[1:4])
	var none sitesJSON
	if code := getJSON(t, srv.URL+"/api/sites?run=gen&gpu=1", &none); code != 200 || len(none.Sites) != 0 || len(none.T) != 0 || !strings.Contains(none.Note, "--sites") {
		t.Errorf("GPU 1: %d %+v", code, none)
	}
	var runs runsJSON
	if getJSON(t, srv.URL+"/api/runs", &runs); len(runs.Shown) != 1 || fmt.Sprint(runs.Shown[0].SiteGPUs) != "[0]" {
		t.Errorf("runs: site GPUs %+v", runs.Shown)
	}
}

// TestHostileQueries: hostile values of the API's query parameters
// (window bounds negative, NaN, huge, reversed or repeated; unknown runs
// and paths for names; widths of nothing and of years; counts of 0, of
// more digits than an int, repeated) are answered 4xx with a message that
// names the parameter and repeats at most the start of its value; a window
// of years is answered with at most the points asked for.
func TestHostileQueries(t *testing.T) {
	path, _ := testDB(t)
	srv := serveDB(t, path)
	w := "/api/window?run=gen&line=gpu0.used&points=100"
	huge := strings.Repeat("9", 100000)
	cases := []struct {
		url  string
		code int
		says string
	}{
		{w + "&from=-1e300&to=10", 400, "ten years"},
		{w + "&from=-Inf&to=10", 400, "finite"},
		{w + "&from=0&to=nan", 400, "finite"},
		{w + "&from=0x10&to=0x20", 400, "from=\"0x10\""},
		{w + "&from=10&to=10", 400, "after from"},
		{w + "&from=0&to=1e-10", 400, "after from"},
		{w + "&from=0&to=" + huge, 400, "(100000 bytes)"},
		{w + "&from=1." + strings.Repeat("0", 100000) + "&to=1", 400, "(100002 bytes)"},
		{w + "&from=0&to=1&from=2", 400, "give it once"},
		{w + "&from=0&to=10&points=7", 400, "points: give it once"},
		{"/api/window?run=gen&line=gpu0.used&from=0&to=10&points=" + huge, 400, "(100000 bytes)"},
		{"/api/window?run=gen&line=gpu0.used&line=gpu0.used&from=0&to=10", 400, `line "gpu0.used": given twice`},
		{"/api/window?run=gen&line=" + strings.Repeat("g", 5000) + "&from=0&to=10", 400, "no line has a name that long"},
		{"/api/window?run=../../etc/passwd&line=gpu0.used&from=0&to=1", 404, `run "../../etc/passwd": no such run`},
		{"/api/window?run=..%2Fview.db&line=gpu0.used&from=0&to=1", 404, "no such run"},
		{"/api/window?run=%00&line=gpu0.used&from=0&to=1", 404, "no such run"},
		{"/api/window?run=" + strings.Repeat("a", 100000) + "&line=gpu0.used&from=0&to=1", 404, "(100000 bytes): no such run"},
		{"/api/runs?run=gen&run=/etc/passwd", 404, "no such run"},
		{"/api/at?run=gen&t=5&near=" + huge, 400, "(100000 bytes)"},
		{"/api/at?run=gen&t=5&near=-1e-3", 400, "near"},
		{"/api/marks?run=gen&from=-300000000&to=300000000&limit=0", 400, "limit"},
		{"/api/marks?run=gen&from=0&to=10&limit=1&limit=2", 400, "limit: give it once"},
		{"/api/sites?run=gen&gpu=0&top=99999999999999999999", 400, "top"},
		{"/api/sites?run=gen&gpu=" + huge, 400, "(100000 bytes)"},
		{"/api/sites?run=gen&gpu=0&from=1e-300&to=2e-300", 400, "after from"},
	}
	for _, c := range cases {
		resp, err := http.Get(srv.URL + c.url)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		short := c.url
		if len(short) > 100 {
			short = short[:100] + "…"
		}
		var msg struct{ Error string }
		json.Unmarshal(b, &msg)
		if resp.StatusCode != c.code || !strings.Contains(msg.Error, c.says) {
			t.Errorf("%s: %d %.300s, want %d with an error saying %q", short, resp.StatusCode, b, c.code, c.says)
		}
		if len(b) > 512 {
			t.Errorf("%s: a message of %d bytes", short, len(b))
		}
	}
	// Windows of years, around the run and before it: answered, with at
	// most the points asked for a line.
	for _, u := range []string{w + "&from=-300000000&to=300000000", "/api/sites?run=gen&gpu=0&from=-300000000&to=300000000"} {
		var out struct {
			Lines []struct {
				T []int64 `json:"t_us"`
			} `json:"lines"`
			T []int64 `json:"t_us"`
		}
		if code := getJSON(t, srv.URL+u, &out); code != 200 {
			t.Fatalf("%s: %d", u, code)
		}
		for _, l := range out.Lines {
			if len(l.T) == 0 || len(l.T) > 100 {
				t.Errorf("%s: %d points, want 1 to 100", u, len(l.T))
			}
		}
	}
}
