package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/internal/jobmodel"
	"github.com/memrec/memrec/recorder"
)

// simLimit is the largest batch whose step fits on one simulated GPU,
// worked out from the job model's sizes (not from the simulator's code):
// the GPU less what the driver reserves, the idle GPU and the CUDA
// context, less the weights and optimizer state, in activations of a
// sample (the model's activations are those of SimRefBatch samples).
func simLimit() int {
	j := jobmodel.H200(1, 20)
	const driverReserved = 644939776 // what the simulated NVML says the driver keeps
	room := j.Total - driverReserved - j.Idle - j.Context - j.Weights - j.Optimizer - j.Held
	return int(room / (j.Activations / recorder.SimRefBatch))
}

// TestSimBatchPredictionFoundByFit: two simulated runs at batch 16 and 64
// grow their step peak with the batch, compare --by predicts a limit, and
// fit --source sim (each trial the simulated job at the value) finds it
// by trial: between the prediction's ends, one --multiple from the job's
// true limit.
func TestSimBatchPredictionFoundByFit(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	for _, b := range []string{"16", "64"} {
		if _, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "1", "--sim-clock", "fake", "--duration", "4s",
			"--name", "sim-bs"+b, "--tag", "batch_size="+b); code != 0 {
			t.Fatalf("record at %s: %d %s", b, code, errs)
		}
	}
	out, errs, code := run(t, db, "", "compare", "--json", "--by", "batch_size", "--headroom", "0%", "sim-bs16", "sim-bs64")
	if code != 0 {
		t.Fatalf("compare: %d %s", code, errs)
	}
	var c struct {
		By struct {
			NoHeadroom *float64 `json:"max_fitting_value_no_headroom"`
			Optimistic *float64 `json:"max_fitting_value_optimistic"`
			Statement  string   `json:"statement"`
		} `json:"by_tag"`
	}
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.By.NoHeadroom == nil || c.By.Optimistic == nil {
		t.Fatalf("compare --json: %v\n%s", err, out)
	}
	if strings.Contains(c.By.Statement, "does not grow") {
		t.Fatalf("the sim's peak does not grow with its batch: %s", c.By.Statement)
	}
	limit := simLimit()
	if lo, hi := *c.By.NoHeadroom, *c.By.Optimistic; lo > float64(limit) || hi < float64(limit)-8 || hi > float64(limit) {
		t.Errorf("predicted %g to %g, want the interval to end at the true limit %d, not above it", lo, hi, limit)
	}
	r, errs, code := fitJSON(t, db, "--runs", "sim-bs16,sim-bs64", "--multiple", "8", "--grace", "300ms", "--id", "simfit")
	if code != 0 || r.LargestRan == nil || r.SmallestFailed == nil {
		t.Fatalf("fit: %d %+v\n%s", code, r, errs)
	}
	ran, failed := *r.LargestRan, *r.SmallestFailed
	if ran > float64(limit) || failed <= float64(limit) || failed-ran > 8 {
		t.Errorf("fit found %g ran and %g failed, want them one --multiple apart around the true limit %d", ran, failed, limit)
	}
	if ran < *c.By.NoHeadroom || ran > *c.By.Optimistic {
		t.Errorf("fit's %g lies outside compare's prediction %g to %g", ran, *c.By.NoHeadroom, *c.By.Optimistic)
	}
	checkTrials(t, db, r)
}

// TestSimOOMsLikeAJob: a simulated job whose batch does not fit leaves an
// OOM mark and exits 1; a bad batch tag is refused naming the tag.
func TestSimOOMsLikeAJob(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "1", "--sim-clock", "fake", "--duration", "3s",
		"--name", "big", "--tag", "batch_size=100000")
	if code != 1 || !strings.Contains(errs, "ran out of memory at step 0") {
		t.Fatalf("%d %s", code, errs)
	}
	out, _, _ := run(t, db, "", "export", "big")
	if !strings.Contains(out, `"kind":"oom"`) {
		t.Errorf("no OOM mark in the run")
	}
	for _, bad := range []string{"batch_size=-3", "seq_len=x"} {
		_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-clock", "fake", "--duration", "1s", "--tag", bad)
		if code != 1 || !strings.Contains(errs, "--tag: tag "+bad) {
			t.Errorf("%s: %d %s", bad, code, errs)
		}
	}
}

// TestCompareSuggestsTheFitOfItsRuns: compare --by's projection names the
// fit that tries it: the simulated job's for runs of the simulator, the
// user's command for any other, never a COMMAND the sim does not take.
func TestCompareSuggestsTheFitOfItsRuns(t *testing.T) {
	sim := map[string]string{"source": "sim"}
	all := []compare.RunSummary{{Run: "s1", Tags: sim, GPUs: 2}, {Run: "s2", Tags: sim, GPUs: 2}, {Run: "s3", Tags: sim, GPUs: 1},
		{Run: "real", Tags: map[string]string{"batch_size": "8"}, GPUs: 8}}
	for _, tc := range []struct {
		tag  string
		runs []string
		want string
	}{
		{"batch_size", []string{"s1", "s2"}, "memrec fit --source sim --sim-gpus 2 --runs s1,s2"},
		{"seq_len", []string{"s3", "s3"}, "memrec fit --source sim --by seq_len --runs s3,s3"},
		{"batch_size", []string{"s1", "real"}, "memrec fit --by batch_size --runs s1,real -- COMMAND ... {}"},
		{"batch_size", []string{"real"}, "memrec fit --by batch_size --runs real -- COMMAND ... {}"},
	} {
		if got := fitLine(tc.tag, tc.runs, all); got != tc.want {
			t.Errorf("%s %v: %q, want %q", tc.tag, tc.runs, got, tc.want)
		}
	}
}
