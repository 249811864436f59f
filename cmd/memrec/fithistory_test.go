package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/fit"
)

// TestFitRecordJudged: a record against the trials' bracket, each case
// worked by hand: at or above a value that failed is above; below the
// largest that ran, the distance under it as a share of it; above the
// largest that ran with nothing failed is not judged.
func TestFitRecordJudged(t *testing.T) {
	for _, c := range []struct {
		rec           string
		judged, above bool
		below         float64
		wantErr       bool
	}{
		{rec: "by=batch_size predicted=60 basis=trace_replay trials=5 largest_ran=64 smallest_failed=66", judged: true, below: 4.0 / 64},
		{rec: "by=batch_size predicted=66 basis=segments trials=5 largest_ran=64 smallest_failed=66", judged: true, above: true},
		{rec: "by=batch_size predicted=65 basis=segments trials=5 largest_ran=64 smallest_failed=66", judged: true},
		{rec: "by=batch_size predicted=80 basis=traceless trials=4 largest_ran=64", judged: false},
		{rec: "by=batch_size predicted=48 basis=traceless trials=4 largest_ran=64", judged: true, below: 16.0 / 64},
		{rec: "by=batch_size predicted=8 trials=2 smallest_failed=4", judged: true, above: true},
		{rec: "by=batch_size trials=2", wantErr: true},
		{rec: "predicted=x trials=2", wantErr: true},
		{rec: "predicted=1 trials=2 junk", wantErr: true},
	} {
		r, err := parseFitRecord("f", c.rec)
		if (err != nil) != c.wantErr {
			t.Errorf("%q: error %v", c.rec, err)
			continue
		}
		if !c.wantErr && (r.Judged != c.judged || r.Above != c.above || r.Below != c.below) {
			t.Errorf("%q: judged %v above %v below %v", c.rec, r.Judged, r.Above, r.Below)
		}
		if !c.wantErr {
			back, err := parseFitRecord("f", r.encode())
			if err != nil || back.encode() != r.encode() {
				t.Errorf("%q: round trip %q, %v", c.rec, r.encode(), err)
			}
		}
	}
}

// TestFitSettingsWords: the allocator setting the trials get from the
// environment, and the summary's line per setting that marks it.
func TestFitSettingsWords(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	for _, c := range []struct {
		env     map[string]string
		want    string
		wantErr bool
	}{
		{env: nil, want: "default"},
		{env: map[string]string{"PYTORCH_CUDA_ALLOC_CONF": " expandable_segments:True "}, want: "expandable_segments:True"},
		{env: map[string]string{"PYTORCH_ALLOC_CONF": "max_split_size_mb:512"}, want: "max_split_size_mb:512"},
		{env: map[string]string{"PYTORCH_CUDA_ALLOC_CONF": "pinned_use_cuda_host_register:True"}, want: "pinned_use_cuda_host_register:True", wantErr: true},
	} {
		got, err := allocConfOf(env(c.env))
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("%v: %q, %v", c.env, got, err)
		}
	}
	v64, v72 := 64.0, 72.0
	r := fit.Result{By: "batch_size", Settings: fit.Settings{TrialsAllocConf: "default", PredictionBySetting: []compare.SettingLimit{
		{Setting: "default", Value: &v64}, {Setting: "expandable_segments:True", Value: &v72}, {Setting: "max_split_size_mb:512"}}}}
	if got, want := settingsWords(r), "batch_size=64 with the default allocator (the trials'), 72 with expandable_segments:True, none with max_split_size_mb:512"; got != want {
		t.Errorf("words %q, want %q", got, want)
	}
	r.TrialsAllocConf = "garbage_collection_threshold:0.8"
	if got := settingsWords(r); !strings.Contains(got, "the trials ran with PYTORCH_CUDA_ALLOC_CONF=garbage_collection_threshold:0.8, which the replay did not try") {
		t.Errorf("words %q", got)
	}
	if settingsWords(fit.Result{}) != "" {
		t.Error("words without a prediction per setting")
	}
}

// TestFitHistory: a simulated fit keeps its first prediction and its
// outcome in its trials' runs; fit --history shows it beside an earlier
// fit whose prediction was above its limit (a record set by hand), and
// counts each.
func TestFitHistory(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	if out, _, code := run(t, db, "", "fit", "--history"); code == 0 {
		t.Errorf("fit --history without a database: exit 0: %s", out)
	}
	for _, b := range []string{"16", "64"} {
		if _, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "1", "--sim-clock", "fake", "--duration", "4s",
			"--name", "sim-bs"+b, "--tag", "batch_size="+b); code != 0 {
			t.Fatalf("record at %s: %d %s", b, code, errs)
		}
	}
	out, _, _ := run(t, db, "", "fit", "--history")
	if !strings.Contains(out, "no fit in this database") {
		t.Errorf("history before any fit: %q", out)
	}
	r, errs, code := fitJSON(t, db, "--runs", "sim-bs16,sim-bs64", "--multiple", "8", "--grace", "300ms", "--id", "simfit")
	if code != 0 || r.Prediction == nil || r.Prediction.Value == nil || r.LargestRan == nil || r.SmallestFailed == nil {
		t.Fatalf("fit: %d %+v\n%s", code, r, errs)
	}
	if r.TrialsAllocConf != "default" || r.PredictionBasis == "" {
		t.Errorf("fit: trials' setting %q, basis %q", r.TrialsAllocConf, r.PredictionBasis)
	}
	if _, errs, code := run(t, db, "", "tag", "sim-bs16", "fit=older", fitRecordTag+"=by=batch_size predicted=80 basis=segments trials=3 largest_ran=64 smallest_failed=72"); code != 0 {
		t.Fatal(errs)
	}
	out, errs, code = run(t, db, "", "fit", "--history", "--json")
	var h struct {
		Fits    []fitRecord    `json:"fits"`
		Summary historySummary `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &h); code != 0 || err != nil || len(h.Fits) != 2 {
		t.Fatalf("fit --history --json: %d %v %s\n%s", code, err, errs, out)
	}
	var sim fitRecord
	for _, f := range h.Fits {
		if f.ID == "simfit" {
			sim = f
		}
	}
	if sim.Predicted != *r.Prediction.Value || *sim.LargestRan != *r.LargestRan || *sim.SmallestFailed != *r.SmallestFailed || sim.Trials != r.TrialsUsed || sim.Basis != r.PredictionBasis {
		t.Errorf("the record %+v, the fit %+v", sim, r)
	}
	// The sim's prediction is the pessimistic end: below what ran (the
	// fit's own test bounds it by the true limit), so judged and not above.
	wantWithin := 0
	if sim.Below <= withinBelow {
		wantWithin = 1
	}
	if !sim.Judged || sim.Above || h.Summary.Judged != 2 || h.Summary.Above != 1 || h.Summary.WithinBelow != wantWithin {
		t.Errorf("record %+v, summary %+v", sim, h.Summary)
	}
	out, _, _ = run(t, db, "", "fit", "--history")
	for _, want := range []string{"simfit", "older", "ABOVE", "within 10 % below: " + string(rune('0'+wantWithin)) + " of 2, above: 1, median trials"} {
		if !strings.Contains(out, want) {
			t.Errorf("fit --history lacks %q:\n%s", want, out)
		}
	}
	// A record that cannot be read is named with its run.
	run(t, db, "", "tag", "sim-bs64", "fit=bad", fitRecordTag+"=predicted=oops trials=1")
	if _, errs, code := run(t, db, "", "fit", "--history"); code == 0 || !strings.Contains(errs, `run "sim-bs64"`) {
		t.Errorf("a bad record: exit %d, %q", code, errs)
	}
}
