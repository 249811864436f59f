package viewer

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/cdp"
)

// benchDB is the database the window benchmarks read: $MEMREC_VIEW_DB
// (bench/perf/view.sh makes a 24-hour run of 8 GPUs at 100 Hz with
// bench/tools/gentrace), or else a generated 10-minute run of 8 GPUs.
func benchDB(b *testing.B) (string, storage.Run) {
	b.Helper()
	path := os.Getenv("MEMREC_VIEW_DB")
	if path == "" {
		path = filepath.Join(b.TempDir(), "bench.db")
		db, err := storage.Open(path, storage.Options{})
		if err != nil {
			b.Fatal(err)
		}
		pr, pw, _ := os.Pipe()
		go func() { tracegen.Write(pw, tracegen.Default()); pw.Close() }()
		if _, err := jsonl.Import(db, []jsonl.Source{{Name: "gen", R: pr}}, jsonl.ImportOptions{}); err != nil {
			b.Fatal(err)
		}
		db.Close()
	}
	db, err := storage.Open(path, storage.Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Runs()
	if err != nil || len(runs) == 0 {
		b.Fatalf("%s: %v, %d runs", path, err, len(runs))
	}
	return path, runs[len(runs)-1]
}

// cpuTime is the process' user and system time so far: on a loaded
// machine a window's wall time is mostly waiting for a core, its CPU time
// is what it costs.
func cpuTime() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkWindows answers 200 random windows at 2 000 points per line
// through the HTTP handler (JSON included), as the page asks for them:
// widths log-uniform from 1 s to the whole run, starts uniform. "1gpu" is
// one GPU's lines in one request, "8gpu" every GPU's as the page asks for
// them: 16 lines a request (four GPUs'), the requests side by side. It
// reports the median and
// the 95th percentile of a window's wall time and CPU time, and the index's build time and
// size once.
// linesPerRequest is view.js's LINES_PER_REQUEST.
const linesPerRequest = 16

func BenchmarkWindows(b *testing.B) {
	path, run := benchDB(b)
	src := NewDBSource(path)
	defer src.Close()
	start := time.Now()
	x, _, err := src.Index(run)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s: %d samples summarised in %.1f s into %.0f MiB", run.Name, x.Samples(), time.Since(start).Seconds(), float64(x.Bytes())/(1<<20))
	if x.Coarse() { // from the chunks' summaries: the windows are timed on the index of every sample
		src.waitRefined(run)
		if x, _, err = src.Index(run); err != nil {
			b.Fatal(err)
		}
		b.Logf("%s: every sample indexed %.1f s after the start, into %.0f MiB", run.Name, time.Since(start).Seconds(), float64(x.Bytes())/(1<<20))
	}
	h := Handler(src, Options{})
	lines := map[int][]string{}
	for _, k := range x.Keys() {
		lines[k.GPU] = append(lines[k.GPU], k.String())
	}
	gpus := len(lines)
	span := float64(run.EndNS-run.StartNS) / 1e9
	ask := func(keys []string, from, to float64) error {
		q := fmt.Sprintf("/api/window?run=%s&from=%.6f&to=%.6f&points=2000", run.Name, from, to)
		for _, l := range keys {
			q += "&line=" + l
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, q, nil))
		if rec.Code != 200 {
			return fmt.Errorf("%s: %d %s", q, rec.Code, rec.Body)
		}
		return nil
	}
	for _, all := range []bool{false, true} {
		name := "1gpu"
		if all {
			name = fmt.Sprintf("%dgpu", gpus)
		}
		b.Run(name, func(b *testing.B) {
			var times, cpus []float64
			for b.Loop() {
				rng := rand.New(rand.NewPCG(1, 2))
				for i := range 200 {
					w := math.Exp(rng.Float64() * math.Log(span))
					from := rng.Float64() * (span - w)
					t0, c0 := time.Now(), cpuTime()
					if all {
						var every []string
						for g := range gpus {
							every = append(every, lines[g]...)
						}
						var wg sync.WaitGroup
						errs := make([]error, (len(every)+linesPerRequest-1)/linesPerRequest)
						for j := 0; j < len(every); j += linesPerRequest {
							wg.Add(1)
							go func() {
								defer wg.Done()
								errs[j/linesPerRequest] = ask(every[j:min(j+linesPerRequest, len(every))], from, from+w)
							}()
						}
						wg.Wait()
						if err := errors.Join(errs...); err != nil {
							b.Fatal(err)
						}
					} else if err := ask(lines[i%gpus], from, from+w); err != nil {
						b.Fatal(err)
					}
					times = append(times, float64(time.Since(t0).Microseconds())/1000)
					cpus = append(cpus, float64((cpuTime()-c0).Microseconds())/1000)
				}
			}
			slices.Sort(times)
			slices.Sort(cpus)
			b.ReportMetric(times[len(times)/2], "p50-ms")
			b.ReportMetric(times[len(times)*95/100], "p95-ms")
			b.ReportMetric(times[len(times)-1], "max-ms")
			b.ReportMetric(cpus[len(cpus)/2], "p50-cpu-ms")
			b.ReportMetric(cpus[len(cpus)*95/100], "p95-cpu-ms")
		})
	}
}

// BenchmarkFirstPaint loads the page in headless Chromium over the
// benchmark's run, driven over the DevTools protocol in real time (no
// virtual time), and reads the page's own clock when every chart has drawn
// its first data (uPlot drawn, the window's data received): from the
// navigation's start, the time a user waits, rendering included. Each
// round is a new tab of one browser, as a user opening the page again.
func BenchmarkFirstPaint(b *testing.B) {
	browser := cdp.Find()
	if browser == "" {
		b.Skip("no Chromium")
	}
	path, run := benchDB(b)
	src := NewDBSource(path)
	defer src.Close()
	if _, _, err := src.Index(run); err != nil { // as memrec view does before it prints its address
		b.Fatal(err)
	}
	srv := httptest.NewServer(Handler(src, Options{}))
	defer srv.Close()
	br, err := cdp.Start(browser, b.TempDir(), "--window-size=1400,1200")
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	var times []float64
	for b.Loop() {
		p, err := br.NewPage()
		if err != nil {
			b.Fatal(err)
		}
		if err := p.Navigate(srv.URL + "/"); err != nil {
			b.Fatal(err)
		}
		if err := p.WaitFor(`document.body && document.body.hasAttribute("data-charts-ready")`, time.Minute); err != nil {
			b.Fatal(err)
		}
		var ms float64
		if err := p.Eval("window.memrecView.firstPaintMs", &ms); err != nil {
			b.Fatal(err)
		}
		if errs := p.Errors(); len(errs) > 0 {
			b.Fatalf("the page: %v", errs)
		}
		times = append(times, ms)
	}
	slices.Sort(times)
	b.Logf("first paint of %s (%d samples): median %.0f ms", run.Name, run.Counts.Samples, times[len(times)/2])
	b.ReportMetric(times[len(times)/2], "paint-ms")
}
