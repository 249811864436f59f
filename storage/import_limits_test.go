package storage

import (
	"fmt"
	"strings"
	"testing"
)

// TestImportBoundsTimesAndFields: times outside 1970..2200 or far before
// the run's start, negative pids, end and interval, oversized names and
// GPU indices are refused with the file and line, and nothing is kept.
func TestImportBoundsTimesAndFields(t *testing.T) {
	const run = `{"type":"run","name":"a","start_ns":1000000000000000000}` + "\n"
	good := run + `{"type":"gpu","gpu":0}` + "\n"
	for _, tc := range []struct{ name, input, want string }{
		{"min int64 time", good + `{"type":"sample","t_ns":-9223372036854775808,"gpu":0,"used_bytes":1}`, "bad.jsonl:3: sample: time -9223372036854775808 is outside 1970..2200"},
		{"time near max int64", good + `{"type":"sample","t_ns":9223372036854775000,"gpu":0,"used_bytes":1}`, "bad.jsonl:3: sample: time 9223372036854775000 is outside 1970..2200"},
		{"mark near max int64", good + `{"type":"mark","t_ns":9223372036854775807,"kind":"event"}`, "bad.jsonl:3: mark: time 9223372036854775807 is outside"},
		{"before the start", good + `{"type":"sample","t_ns":1000000000,"gpu":0,"used_bytes":1}`, "bad.jsonl:3: sample: time 1000000000 is more than 24h0m0s before the run's start"},
		{"end near max int64", `{"type":"run","name":"a","end_ns":9223372036854775807}`, "bad.jsonl:1: end_ns 9223372036854775807 is outside 1970..2200"},
		{"negative end", `{"type":"run","name":"a","end_ns":-5}`, "bad.jsonl:1: end_ns is negative (-5)"},
		{"negative interval", `{"type":"run","name":"a","interval_ns":-1}`, "bad.jsonl:1: interval_ns -1 is outside"},
		{"negative start", `{"type":"run","name":"a","start_ns":-1}`, "bad.jsonl:1: start_ns -1 is outside 1970..2200"},
		{"40 KB name", `{"type":"run","name":"` + strings.Repeat("n", 40<<10) + `"}`, "bad.jsonl:1: run name of 40960 bytes (at most 1024)"},
		{"huge tag", `{"type":"run","name":"a","tags":{"k":"` + strings.Repeat("v", 2000) + `"}}`, "bad.jsonl:1: tag of 1+2000 bytes"},
		{"proc pid -1", good + `{"type":"proc","t_ns":1000000000000000001,"gpu":0,"pid":-1,"used_bytes":1}`, "bad.jsonl:3: proc: pid is negative (-1)"},
		{"torch pid -1", good + `{"type":"torch","t_ns":1000000000000000001,"gpu":0,"pid":-1,"allocated_bytes":1,"reserved_bytes":2}`, "bad.jsonl:3: torch: pid is negative (-1)"},
		{"gpu index", run + `{"type":"gpu","gpu":70000}`, "bad.jsonl:2: gpu: gpu index 70000 is outside 0..65535"},
		{"too many gpus", run + gpuLines(MaxGPUs+1), fmt.Sprintf("bad.jsonl:%d: gpu: more than %d GPUs", MaxGPUs+2, MaxGPUs)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openTestDB(t)
			_, err := loadString(db, "bad.jsonl", tc.input)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v\nwant %q", err, tc.want)
			}
			if runs, _ := db.Runs(); len(runs) != 0 {
				t.Fatalf("kept %v", runs)
			}
		})
	}
}

// TestImportFoldsManyProcesses: past MaxPIDsPerGPU distinct processes on a
// GPU, the later ones' samples are kept together under OtherPID: every
// sample stays, the series stay bounded.
func TestImportFoldsManyProcesses(t *testing.T) {
	db := openTestDB(t)
	var b strings.Builder
	b.WriteString(`{"type":"run","name":"many","start_ns":1000000000000000000}` + "\n" + `{"type":"gpu","gpu":0}` + "\n")
	const procs = MaxPIDsPerGPU + 100
	for pid := 1; pid <= procs; pid++ {
		fmt.Fprintf(&b, `{"type":"proc","t_ns":%d,"gpu":0,"pid":%d,"used_bytes":%d}`+"\n", 1000000000000000000+int64(pid)*1000, pid, pid)
		fmt.Fprintf(&b, `{"type":"torch","t_ns":%d,"gpu":0,"pid":%d,"allocated_bytes":1,"reserved_bytes":2}`+"\n", 1000000000000000000+int64(pid)*1000, pid)
	}
	runs, err := loadString(db, "many.jsonl", b.String())
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if r.Counts.ProcSamples != procs || r.Counts.TorchSamples != procs {
		t.Fatalf("counts %+v, want %d of each", r.Counts, procs)
	}
	series, err := db.Series(r)
	if err != nil {
		t.Fatal(err)
	}
	perKind := map[SeriesKind]int{}
	for _, s := range series {
		perKind[s.Kind]++
	}
	if perKind["proc"] != MaxPIDsPerGPU+1 || perKind["torch"] != MaxPIDsPerGPU+1 {
		t.Fatalf("series per kind %v, want %d proc and torch (the first %d and other)", perKind, MaxPIDsPerGPU+1, MaxPIDsPerGPU)
	}
	var other int64
	for it := db.ProcSamples(r, 0, OtherPID, MinTime, MaxTime); it.Next(); {
		if it.At().PID != OtherPID || it.At().Used <= MaxPIDsPerGPU {
			t.Fatalf("sample %+v under other", it.At())
		}
		other++
	}
	if other != procs-MaxPIDsPerGPU {
		t.Errorf("%d samples under other, want %d", other, procs-MaxPIDsPerGPU)
	}
}

// TestImportBoundsSeries: many GPUs each with many processes stop making
// new series at the run's bound; later processes are kept under OtherPID
// of their GPU, and every sample stays. The bound is lowered so that it is
// reached in a few thousand lines; the writer starts from MaxSeries.
func TestImportBoundsSeries(t *testing.T) {
	if got := newRunWriter(Run{}).maxSeries; got != MaxSeries {
		t.Fatalf("a run's writer bounds series at %d, want MaxSeries %d", got, MaxSeries)
	}
	db := openTestDB(t)
	const gpus, pids, bound = 12, 250, 1000 // pids below MaxPIDsPerGPU: only the run's bound folds
	var b strings.Builder
	b.WriteString(`{"type":"run","name":"wide","start_ns":1000000000000000000}` + "\n")
	for g := range gpus {
		fmt.Fprintf(&b, `{"type":"gpu","gpu":%d}`+"\n", g)
	}
	for g := range gpus {
		for pid := 1; pid <= pids; pid++ {
			fmt.Fprintf(&b, `{"type":"proc","t_ns":%d,"gpu":%d,"pid":%d,"used_bytes":1}`+"\n", 1000000000000000000+int64(g*pids+pid), g, pid)
		}
	}
	runs, err := loadString(db, "wide.jsonl", b.String(), WithMaxSeries(bound))
	if err != nil {
		t.Fatal(err)
	}
	if runs[0].Counts.ProcSamples != gpus*pids {
		t.Fatalf("%d process samples kept, want %d", runs[0].Counts.ProcSamples, gpus*pids)
	}
	series, err := db.Series(runs[0])
	if err != nil {
		t.Fatal(err)
	}
	// The bound's series, and one OtherPID series on each GPU whose
	// processes came after it was reached.
	if len(series) > bound+gpus || len(series) < bound {
		t.Fatalf("%d series, want between %d and %d", len(series), bound, bound+gpus)
	}
	other := 0
	for _, s := range series {
		if s.PID == OtherPID {
			other++
		}
	}
	if late := gpus - bound/pids; other != late {
		t.Errorf("%d series under OtherPID, want one on each of the %d GPUs past the bound", other, late)
	}
}

func gpuLines(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"type":"gpu","gpu":%d}`+"\n", i)
	}
	return b.String()
}
