package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

// docsRules is the recording rules block of docs/metrics.md.
func docsRules(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- rules:begin -->\n```yaml\n(.*?)```\n<!-- rules:end -->").FindSubmatch(b)
	if m == nil {
		t.Fatal("docs/metrics.md has no rules block")
	}
	return string(m[1])
}

// TestPrometheusJoinsDCGM runs a real Prometheus (Debian's package) that
// scrapes memrec record --job and a served copy of dcgm-exporter's
// /metrics (testdata/dcgm), with docs/metrics.md's recording rules: the
// run's job keeps its label (memrec_job, not exported_job), promtool
// accepts the rules, the documented join matches each GPU by UUID, and
// the rules give dcgm-exporter's MiB in bytes.
func TestPrometheusJoinsDCGM(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("prometheus")
	promtool, err2 := exec.LookPath("promtool")
	if err != nil || err2 != nil {
		t.Skip("no prometheus and promtool on PATH (Debian: apt-get install prometheus)")
	}
	dir := t.TempDir()
	rules := filepath.Join(dir, "rules.yml")
	os.WriteFile(rules, []byte(docsRules(t)), 0o644)
	if out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	fixture, err := os.ReadFile("testdata/dcgm/metrics.txt")
	if err != nil {
		t.Fatal(err)
	}
	dcgm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		w.Write(fixture)
	}))
	defer dcgm.Close()
	target, web := freePort(t), freePort(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`global:
  scrape_interval: 200ms
  scrape_timeout: 150ms
  evaluation_interval: 200ms
rule_files: ['%s']
scrape_configs:
  - job_name: memrec
    static_configs:
      - targets: ['%s']
  - job_name: dcgm
    static_configs:
      - targets: ['%s']
`, rules, target, dcgm.Listener.Addr())), 0o644)
	var plog bytes.Buffer
	prom := exec.Command(bin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"), "--web.listen-address="+web, "--log.level=warn")
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
	// Ask until Prometheus holds what the query needs (it scrapes a new
	// target within a few seconds of starting).
	query := func(q string, at time.Time, ok func(promResponse) bool) promResponse {
		t.Helper()
		var res promResponse
		for deadline := time.Now().Add(40 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			when := at
			if when.IsZero() { // now, as each try asks
				when = time.Now()
			}
			res, err = promQuery(web, q, when)
			if err == nil && ok(res) {
				return res
			}
			if time.Now().After(deadline) {
				if resp, err := http.Get("http://" + web + "/api/v1/targets"); err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					t.Logf("targets: %s", b)
				}
				t.Fatalf("%s: %v %+v", q, err, res.Data.Result)
			}
		}
	}
	// dcgm-exporter's copy is scraped before memrec records.
	query(`DCGM_FI_DEV_FB_USED`, time.Time{}, func(r promResponse) bool { return len(r.Data.Result) == 2 })

	db := filepath.Join(dir, "m.db")
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "2", "--name", "joined", "--job", "train-77",
		"--duration", "4s", "--metrics-addr", target)
	if code != 0 {
		t.Fatalf("record: %d %s", code, errs)
	}
	end := time.Now().Add(time.Second)
	info := query(`last_over_time(memrec_run_info{run="joined"}[5m])`, end, func(r promResponse) bool { return len(r.Data.Result) == 1 })
	if m := info.Data.Result[0].Metric; m["memrec_job"] != "train-77" || m["job"] != "memrec" || m["exported_job"] != "" {
		t.Errorf("memrec_run_info labels %v: want memrec_job=train-77 beside the scrape's job=memrec, no exported_job", m)
	}
	// The documented join: one series per GPU, memrec's labels kept, its
	// value memrec's bytes less dcgm-exporter's MiB × 1048576.
	join := `last_over_time(memrec_gpu_memory_used_bytes{run="joined"}[5m]) - on(UUID) group_left() (DCGM_FI_DEV_FB_USED * 1048576)`
	res := query(join, end, func(r promResponse) bool { return len(r.Data.Result) == 2 })
	used := query(`last_over_time(memrec_gpu_memory_used_bytes{run="joined"}[5m])`, end, func(r promResponse) bool { return len(r.Data.Result) == 2 })
	dcgmMiB := map[string]float64{"0": 20000, "1": 40000} // the fixture's DCGM_FI_DEV_FB_USED by gpu
	mine := map[string]float64{}
	for _, s := range used.Data.Result {
		mine[s.Metric["UUID"]] = value(t, s.Value)
	}
	for _, s := range res.Data.Result {
		gpu := s.Metric["gpu"]
		want := mine[s.Metric["UUID"]] - dcgmMiB[gpu]*1048576
		if s.Metric["run"] != "joined" || value(t, s.Value) != want {
			t.Errorf("join for GPU %s: %v = %v, want %v", gpu, s.Metric, value(t, s.Value), want)
		}
	}
	// The rules: dcgm-exporter's figures in bytes.
	total := query(`gpu:dcgm_fb_total:bytes`, time.Time{}, func(r promResponse) bool { return len(r.Data.Result) == 2 })
	for _, s := range total.Data.Result {
		if v := value(t, s.Value); v != 60000*1048576 && v != 80000*1048576 {
			t.Errorf("gpu:dcgm_fb_total:bytes %v = %v, want (used + free) MiB × 1048576", s.Metric, v)
		}
	}
}

// value is an instant vector's value.
func value(t *testing.T, v [2]any) float64 {
	t.Helper()
	str, _ := v[1].(string)
	f, err := strconv.ParseFloat(str, 64)
	if err != nil {
		t.Fatalf("value %v: %v", v, err)
	}
	return f
}
