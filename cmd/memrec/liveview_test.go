package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/storage"
)

// TestLivePage: while record --source sim runs, its --view-addr page and
// API show the run so far from memory, growing; the same page is at / on
// --metrics-addr; every sample the live API sent for a one-second window
// is one the recorder stored, at the same time, once it is done.
func TestLivePage(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "live.db")
	view, metrics := freePort(t), freePort(t)
	done := make(chan string, 1)
	go func() {
		_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "1", "--name", "live",
			"--duration", "5s", "--view-addr", view, "--metrics-addr", metrics)
		done <- fmt.Sprintf("%d %s", code, errs)
	}()
	get := func(url string, into any) int {
		resp, err := http.Get(url)
		if err != nil {
			return 0
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if into != nil {
			json.Unmarshal(b, into)
		}
		return resp.StatusCode
	}
	type runs struct {
		Live  bool `json:"live"`
		Shown []struct {
			Name  string `json:"name"`
			EndUS int64  `json:"end_us"`
		} `json:"shown"`
	}
	var ends []int64
	var window struct {
		Lines []struct {
			T     []int64 `json:"t_us"`
			V     []int64 `json:"v"`
			Every int64   `json:"every"`
		} `json:"lines"`
	}
	var startMS int64
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && len(ends) < 3; time.Sleep(300 * time.Millisecond) {
		var r runs
		if get("http://"+view+"/api/runs", &r) != 200 || len(r.Shown) != 1 || r.Shown[0].EndUS == 0 {
			continue
		}
		if !r.Live || r.Shown[0].Name != "live" {
			t.Fatalf("live runs: %+v", r)
		}
		if n := len(ends); n == 0 || r.Shown[0].EndUS > ends[n-1] {
			ends = append(ends, r.Shown[0].EndUS)
		}
		if len(ends) == 2 {
			end := float64(r.Shown[0].EndUS) / 1e6
			url := fmt.Sprintf("http://%s/api/window?run=live&line=gpu0.used&from=%g&to=%g&points=500", view, max(0, end-1), end)
			if code := get(url, &window); code != 200 || len(window.Lines) != 1 || len(window.Lines[0].T) == 0 || window.Lines[0].Every != 1 {
				t.Fatalf("%s: %d %+v", url, code, window)
			}
			var page struct {
				Shown []struct {
					StartMS int64 `json:"start_ms"`
				} `json:"shown"`
			}
			get("http://"+view+"/api/runs", &page)
			startMS = page.Shown[0].StartMS
			// The metrics listener serves the same page and API.
			resp, err := http.Get("http://" + metrics + "/")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), "memrec view") {
				t.Errorf("--metrics-addr /: %.200s", body)
			}
			if code := get("http://"+metrics+"/metrics", nil); code != 200 {
				t.Errorf("--metrics-addr /metrics: %d", code)
			}
		}
	}
	if len(ends) < 3 {
		t.Fatalf("the live run's end moved %d times: %v", len(ends)-1, ends)
	}
	if res := <-done; !strings.HasPrefix(res, "0 ") {
		t.Fatalf("record: %s", res)
	}
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := d.Run("live")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[int64]int64{}
	it := d.DeviceSamples(r, 0, storage.MinTime, storage.MaxTime)
	for it.Next() {
		stored[(it.At().T-r.StartNS)/1000] = it.At().Used
	}
	if startMS != r.StartNS/1e6 {
		t.Errorf("live start %d ms, stored %d ns", startMS, r.StartNS)
	}
	l := window.Lines[0]
	for i, tt := range l.T {
		// Stored times are to the µs: a sample's may be 1 µs before.
		v, ok := stored[tt]
		if !ok {
			v, ok = stored[tt-1]
		}
		if !ok || v != l.V[i] {
			t.Errorf("live sample at %d µs (%d B): stored %d, %v", tt, l.V[i], v, ok)
			break
		}
	}
	t.Logf("live ends %v µs; %d samples of the last second checked", ends, len(l.T))
}
