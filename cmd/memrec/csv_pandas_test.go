package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// pandasScript reads memrec's CSV as the docs say to, and prints per epoch
// the row count and the highest device used and step peak, from
// groupby("epoch"); and whether "time" parsed as UTC datetimes equal to t_ns.
const pandasScript = `
import json, sys
import pandas as pd
df = pd.read_csv(sys.argv[1], parse_dates=["time"])
g = df.groupby("epoch")
out = {
    "time_is_utc": str(df["time"].dt.tz) == "UTC",
    "time_equals_t_ns": bool((df["time"].astype("int64") // 1000 == df["t_ns"] // 1000).all()),
    "epoch_dtype": str(df["epoch"].dtype),
    "step_dtype": str(df["step"].dtype),
    "rows_before_epoch_0": int((df["epoch"] == -1).sum()),
    "alloc_na_before_first_report": bool(pd.isna(df["gpu0_allocated_bytes"].iloc[0])),
    "epochs": {str(int(e)): {"rows": int(len(x)), "max_used": int(x["gpu0_used_bytes"].max()),
                             "max_step_peak": int(x["gpu0_step_peak_allocated_bytes"].max()),
                             "last_step": int(x["step"].max())} for e, x in g if e >= 0},
}
print(json.dumps(out))
`

// TestCSVWithPandas: the CSV of a real H200 run read by Debian's pandas;
// epoch and step read as int64 (-1 before the first mark);
// groupby("epoch") gives, per epoch, the rows, the highest device used, the
// highest step peak and the last step that this test works out from the
// stored samples and marks themselves.
func TestCSVWithPandas(t *testing.T) {
	t.Parallel()
	py := "/usr/bin/python3"
	if err := exec.Command(py, "-c", "import pandas").Run(); err != nil {
		t.Skip("no pandas for /usr/bin/python3 (Debian: apt-get install python3-pandas; .ci/run installs it)")
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", fixtures.Path(fixtures.LeakRun)); code != 0 {
		t.Fatal(errs)
	}
	csvPath := filepath.Join(dir, "r.csv")
	if _, errs, code := run(t, db, "", "export", fixtures.LeakRun, "--format", "csv", "-o", csvPath); code != 0 {
		t.Fatal(errs)
	}
	script := filepath.Join(dir, "p.py")
	os.WriteFile(script, []byte(pandasScript), 0o644)
	out, err := exec.Command(py, script, csvPath).CombinedOutput()
	if err != nil {
		t.Fatalf("pandas: %v\n%s", err, out)
	}
	var got struct {
		TimeIsUTC     bool   `json:"time_is_utc"`
		TimeEqualsTNS bool   `json:"time_equals_t_ns"`
		EpochDtype    string `json:"epoch_dtype"`
		StepDtype     string `json:"step_dtype"`
		RowsBefore    int    `json:"rows_before_epoch_0"`
		AllocNA       bool   `json:"alloc_na_before_first_report"`
		Epochs        map[string]struct {
			Rows        int64 `json:"rows"`
			MaxUsed     int64 `json:"max_used"`
			MaxStepPeak int64 `json:"max_step_peak"`
			LastStep    int64 `json:"last_step"`
		} `json:"epochs"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	// The same figures from the database: each device sample belongs to
	// the latest epoch started at or before it.
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, _ := d.Run(fixtures.LeakRun)
	type mk struct {
		t          int64
		epoch      int
		step       int
		isEpochMrk bool
	}
	var marks []mk
	mi := d.Marks(r, storage.MinTime, storage.MaxTime)
	for mi.Next() {
		m := mi.At()
		switch m.Kind {
		case wire.MarkEpochStart:
			marks = append(marks, mk{t: m.T, epoch: m.Epoch, isEpochMrk: true})
		case wire.MarkStep:
			marks = append(marks, mk{t: m.T, step: m.Step})
		}
	}
	var torch []storage.TorchSample
	series, _ := d.Series(r)
	for _, s := range series {
		if s.Kind == storage.SeriesTorch {
			ti := d.TorchSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime)
			for ti.Next() {
				torch = append(torch, ti.At())
			}
		}
	}
	type agg struct{ rows, maxUsed, maxPeak, lastStep int64 }
	want := map[string]*agg{}
	before := 0
	di := d.DeviceSamples(r, 0, storage.MinTime, storage.MaxTime)
	epoch, step, k, ti := -1, -1, 0, 0
	var peak int64 = -1
	for di.Next() {
		s := di.At()
		for ; k < len(marks) && marks[k].t <= s.T; k++ {
			if marks[k].isEpochMrk {
				epoch = max(epoch, marks[k].epoch)
			} else {
				step = max(step, marks[k].step)
			}
		}
		for ; ti < len(torch) && torch[ti].T <= s.T; ti++ {
			peak = torch[ti].PeakAllocated // one process: the last report's
		}
		if epoch < 0 {
			before++
			continue
		}
		a := want[strconv.Itoa(epoch)]
		if a == nil {
			a = &agg{}
			want[strconv.Itoa(epoch)] = a
		}
		a.rows++
		a.maxUsed = max(a.maxUsed, s.Used)
		a.maxPeak = max(a.maxPeak, peak)
		a.lastStep = max(a.lastStep, int64(step))
	}
	if !got.TimeIsUTC || !got.TimeEqualsTNS || got.RowsBefore != before || before == 0 || !got.AllocNA {
		t.Errorf("pandas: time UTC %v, time = t_ns %v, %d rows at epoch -1 (want %d), allocated NaN before its first report %v",
			got.TimeIsUTC, got.TimeEqualsTNS, got.RowsBefore, before, got.AllocNA)
	}
	// -1 before the first mark: integers in every row.
	if got.EpochDtype != "int64" || got.StepDtype != "int64" {
		t.Errorf("pandas reads epoch as %s, step as %s; want int64", got.EpochDtype, got.StepDtype)
	}
	if len(got.Epochs) != len(want) || len(want) != 4 {
		t.Fatalf("pandas groups %d epochs, the run has %d", len(got.Epochs), len(want))
	}
	for e, w := range want {
		g := got.Epochs[e]
		if g.Rows != w.rows || g.MaxUsed != w.maxUsed || g.MaxStepPeak != w.maxPeak || g.LastStep != w.lastStep {
			t.Errorf("epoch %s: pandas %+v, from the database %+v", e, g, *w)
		}
	}
	t.Logf("pandas groupby(\"epoch\"): %s", out)
}
