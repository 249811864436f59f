package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/memrec/memrec/storage"
)

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// promQuery asks Prometheus' HTTP API for an instant query.
func promQuery(addr, q string, at time.Time) (promResponse, error) {
	var r promResponse
	u := "http://" + addr + "/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatFloat(float64(at.UnixMilli())/1000, 'f', 3, 64)}}.Encode()
	resp, err := http.Get(u)
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("%s: %w", body, err)
	}
	if r.Status != "success" {
		return r, fmt.Errorf("query %q: %s", q, body)
	}
	return r, nil
}

type promResponse struct {
	Status string `json:"status"`
	Data   struct {
		Result []struct {
			Metric map[string]string `json:"metric"`
			Values [][2]any          `json:"values"` // [unix seconds, "value"]
			Value  [2]any            `json:"value"`  // of an instant vector
		} `json:"result"`
	} `json:"data"`
}

// TestPrometheusScrapesRecord runs a real Prometheus server (Debian's
// prometheus package) against memrec record --metrics-addr, then checks
// every value Prometheus stored against the samples memrec stored: each
// scraped value of a GPU is one the recorder stored for that GPU close to
// the scrape's time, and the labels name the GPU as the run does.
func TestPrometheusScrapesRecord(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("no prometheus binary on PATH (Debian: apt-get install prometheus; .ci/run installs it): the scrape test needs a real server")
	}
	dir := t.TempDir()
	target, web := freePort(t), freePort(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 200ms
  scrape_timeout: 150ms
scrape_configs:
  - job_name: memrec
    static_configs:
      - targets: ['%s']
`, target)), 0o644)
	var plog bytes.Buffer
	prom := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+web, "--log.level=warn")
	prom.Stdout, prom.Stderr = &plog, &plog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		prom.Process.Signal(os.Interrupt)
		prom.Wait()
		if t.Failed() {
			t.Logf("prometheus log:\n%s", plog.String())
		}
	}()
	for deadline := time.Now().Add(60 * time.Second); ; {
		resp, err := http.Get("http://" + web + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 60 s: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Prometheus hands new targets to its scrapers every 5 s: wait until
	// it has tried the (not yet listening) target once.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var tg struct {
			Data struct {
				ActiveTargets []struct {
					LastScrape time.Time `json:"lastScrape"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		if resp, err := http.Get("http://" + web + "/api/v1/targets"); err == nil {
			json.NewDecoder(resp.Body).Decode(&tg)
			resp.Body.Close()
		}
		if len(tg.Data.ActiveTargets) == 1 && tg.Data.ActiveTargets[0].LastScrape.Year() > 2000 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("prometheus has not tried its target after 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}

	db := filepath.Join(dir, "m.db")
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "2", "--name", "scraped",
		"--duration", "5s", "--metrics-addr", target)
	if code != 0 {
		t.Fatalf("record: %d %s", code, errs)
	}
	end := time.Now()

	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := d.Run("scraped")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string][]storage.DeviceSample{} // by gpu label
	for _, g := range r.GPUs {
		it := d.DeviceSamples(r, g.Index, math.MinInt64, math.MaxInt64)
		for it.Next() {
			stored[strconv.Itoa(g.Index)] = append(stored[strconv.Itoa(g.Index)], it.At())
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}

	// What Prometheus holds of the run; it may still be ingesting the
	// last scrape, so ask until every GPU has enough samples.
	var res promResponse
	for deadline := time.Now().Add(20 * time.Second); ; {
		res, err = promQuery(web, `memrec_gpu_memory_used_bytes{run="scraped"}[5m]`, end.Add(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		enough := len(res.Data.Result) == len(r.GPUs)
		for _, s := range res.Data.Result {
			enough = enough && len(s.Values) >= 10
		}
		if enough {
			break
		}
		if time.Now().After(deadline) {
			if resp, err := http.Get("http://" + web + "/api/v1/targets"); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				t.Logf("targets: %s", b)
			}
			t.Fatalf("prometheus holds %d series (want %d with 10+ samples each): %+v", len(res.Data.Result), len(r.GPUs), res.Data.Result)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, s := range res.Data.Result {
		gpu := s.Metric["gpu"]
		idx, _ := strconv.Atoi(gpu)
		g, ok := r.GPUByIndex(idx)
		if !ok {
			t.Fatalf("series for a GPU the run lacks: %v", s.Metric)
		}
		if s.Metric["UUID"] != g.UUID || s.Metric["modelName"] != g.Name || s.Metric["hostname"] != r.Host || s.Metric["job"] != "memrec" ||
			s.Metric["pci_bus_id"] != g.PCIBusID || s.Metric["device"] != g.Device || g.PCIBusID == "" || g.Device == "" {
			t.Errorf("labels %v, want UUID %q modelName %q hostname %q pci_bus_id %q device %q", s.Metric, g.UUID, g.Name, r.Host, g.PCIBusID, g.Device)
		}
		samples := stored[gpu]
		for _, v := range s.Values {
			ts := time.Duration(v[0].(float64) * float64(time.Second))
			val, err := strconv.ParseFloat(v[1].(string), 64)
			if err != nil {
				t.Fatal(err)
			}
			// The scrape started at ts and served the newest sample the
			// sampler had handed over: one taken before (or, as the
			// request travels, just after) ts, however long before on
			// a loaded machine or after the job's last sample. Allow
			// half a second for the request's travel.
			found := false
			for i := len(samples) - 1; i >= 0 && !found; i-- {
				d := samples[i]
				if time.Duration(d.T) > ts+500*time.Millisecond {
					continue
				}
				found = float64(d.Used) == val
				if time.Duration(d.T) < ts-500*time.Millisecond {
					break // the newest before the window; older ones were not served
				}
			}
			if !found {
				t.Errorf("GPU %s: Prometheus has %v at %v, which memrec stored at no tick near or before it", gpu, val, time.Unix(0, int64(ts)))
			}
		}
		t.Logf("GPU %s: %d scraped values, each a stored sample", gpu, len(s.Values))
	}

	// The info metric joins onto every GPU series by hostname and run (as
	// a dashboard adds the version to a panel), and the start gauge is the
	// stored run's start.
	// (last_over_time: the recording has ended, its series are stale.)
	res, err = promQuery(web, `last_over_time(memrec_gpu_memory_used_bytes{run="scraped"}[5m]) * on(hostname, run) group_left(version) last_over_time(memrec_run_info[5m])`, end.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data.Result) != len(r.GPUs) {
		t.Errorf("join on memrec_run_info: %d series, want %d", len(res.Data.Result), len(r.GPUs))
	}
	for _, s := range res.Data.Result {
		if s.Metric["version"] != version {
			t.Errorf("joined series lacks version %q: %v", version, s.Metric)
		}
	}
	res, err = promQuery(web, `memrec_run_start_time_seconds{run="scraped"}[5m]`, end.Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Data.Result) != 1 || len(res.Data.Result[0].Values) == 0 {
		t.Fatalf("memrec_run_start_time_seconds: %+v", res.Data.Result)
	}
	v, _ := strconv.ParseFloat(res.Data.Result[0].Values[0][1].(string), 64)
	if math.Abs(v-float64(r.StartNS)/1e9) > 1e-3 {
		t.Errorf("memrec_run_start_time_seconds %v, the run started at %v", v, float64(r.StartNS)/1e9)
	}
}
