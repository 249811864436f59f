package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
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

// liveSitesJob connects to the recorder's socket as the probe does and
// sends three site snapshots 0.3 s apart, the site train.py:52 holding
// 16 MiB more at each, then waits for the page to be read (until the
// file named by its first argument exists).
const liveSitesJob = `
import json, os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(os.environ["MEMREC_SOCKET"])
for i in range(3):
    snap = {"type": "sites", "t_ns": time.time_ns(), "gpu": 0, "pid": os.getpid(), "reason": "snapshot",
            "untracked": {"live_bytes": 1 << 20, "live_blocks": 1},
            "sites": [{"file": "/w/train.py", "line": 52, "func": "keep", "stack": ["train.py:80 main"],
                       "live_bytes": (i + 1) << 24, "live_blocks": i + 1, "alloc_bytes": 1 << 24, "allocs": 1}],
            "other": {"sites": 0, "live_bytes": 0, "live_blocks": 0}}
    s.sendall((json.dumps(snap) + "\n").encode())
    time.sleep(0.3)
# Until the test has read the live page (the file named first), at most a minute.
end = time.time() + 60
while not os.path.exists(sys.argv[1]) and time.time() < end:
    time.sleep(0.05)
`

// TestLivePageSites: the live page draws the sites of a recording as it
// happens, from the snapshots the recorder keeps in memory: /api/runs lists
// the GPU with sites once the first snapshot came, and /api/sites answers
// its bands with the bytes the job sent.
func TestLivePageSites(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	db := filepath.Join(t.TempDir(), "live.db")
	read := filepath.Join(t.TempDir(), "read")
	defer os.WriteFile(read, nil, 0o644) // the job may end
	view := freePort(t)
	done := make(chan string, 1)
	go func() {
		_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "1", "--name", "sites", "--view-addr", view, "--", py, "-c", liveSitesJob, read)
		done <- fmt.Sprintf("%d %s", code, errs)
	}()
	var got struct {
		Sites []struct {
			Label string  `json:"label"`
			Bytes []int64 `json:"bytes"`
		} `json:"sites"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var runs struct {
			Shown []struct {
				SiteGPUs []int `json:"site_gpus"`
			} `json:"shown"`
		}
		resp, err := http.Get("http://" + view + "/api/runs")
		if err != nil {
			continue
		}
		json.NewDecoder(resp.Body).Decode(&runs)
		resp.Body.Close()
		if len(runs.Shown) != 1 || len(runs.Shown[0].SiteGPUs) != 1 || runs.Shown[0].SiteGPUs[0] != 0 {
			continue
		}
		resp, err = http.Get("http://" + view + "/api/sites?run=sites&gpu=0")
		if err != nil {
			continue
		}
		json.NewDecoder(resp.Body).Decode(&got)
		resp.Body.Close()
		if len(got.Sites) > 0 && len(got.Sites[0].Bytes) == 3 {
			break
		}
	}
	if len(got.Sites) == 0 || !strings.Contains(got.Sites[0].Label, "train.py:52") || len(got.Sites[0].Bytes) != 3 ||
		got.Sites[0].Bytes[0] != 1<<24 || got.Sites[0].Bytes[2] != 3<<24 {
		t.Fatalf("live sites: %+v", got)
	}
	os.WriteFile(read, nil, 0o644)
	if res := <-done; !strings.HasPrefix(res, "0 ") {
		t.Fatalf("record: %s", res)
	}
}
