package storage

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

// cutGzip returns a gzip stream of a run with n samples whose writer died
// after flushing its whole lines: no end, no checksum.
func cutGzip(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	fmt.Fprintf(zw, `{"type":"run","name":"cut","start_ns":1000000000000000000}`+"\n"+`{"type":"gpu","gpu":0}`+"\n")
	for i := range n {
		fmt.Fprintf(zw, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", 1000000000000000000+int64(i)*1e7, i)
	}
	if err := zw.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes() // zw is not closed: the stream just stops
}

func gunzipped(t *testing.T, b []byte) io.Reader {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return zr
}

// TestImportTruncatedGzip: a gzip file cut short is refused, nothing
// imported; with AllowTruncated its whole lines are, the run incomplete.
func TestImportTruncatedGzip(t *testing.T) {
	db := openTestDB(t)
	data := cutGzip(t, 5000)
	_, err := db.Import([]Source{{Name: "cut.jsonl.gz", R: gunzipped(t, data)}}, ImportOptions{})
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "cut.jsonl.gz: after line 5002") {
		t.Fatalf("err = %v, want ErrTruncated after line 5002", err)
	}
	if runs, _ := db.Runs(); len(runs) != 0 {
		t.Fatalf("imported %v", runs)
	}
	runs, err := db.Import([]Source{{Name: "cut.jsonl.gz", R: gunzipped(t, data)}}, ImportOptions{AllowTruncated: true})
	if err != nil {
		t.Fatal(err)
	}
	if r := runs[0]; r.Complete || r.Counts.Samples != 5000 {
		t.Fatalf("complete %v, %d samples; want incomplete with 5000", r.Complete, r.Counts.Samples)
	}
	// Cut inside a line: the whole lines before it are kept, the cut one dropped.
	db2 := openTestDB(t)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	io.WriteString(zw, `{"type":"run","name":"mid"}`+"\n"+`{"type":"gpu","gpu":0}`+"\n"+`{"type":"sample","t_ns":5,"gpu":0,"used_bytes":1}`+"\n"+`{"type":"sample","t_ns":6,"gp`)
	zw.Flush()
	runs, err = db2.Import([]Source{{Name: "mid.gz", R: gunzipped(t, buf.Bytes())}}, ImportOptions{AllowTruncated: true})
	if err != nil || runs[0].Counts.Samples != 1 || runs[0].Complete {
		t.Fatalf("%+v %v", runs, err)
	}
}

// endless is an input of one line that never ends; it counts what is read.
type endless struct {
	head []byte
	fill byte
	read int64
}

func (e *endless) Read(p []byte) (int, error) {
	n := copy(p, e.head)
	e.head = e.head[n:]
	for i := n; i < len(p); i++ {
		p[i] = e.fill
	}
	e.read += int64(len(p))
	return len(p), nil
}

// TestImportLineLimit: a line past MaxLineBytes fails with its file and
// line after reading a bounded amount of it, however long it is.
func TestImportLineLimit(t *testing.T) {
	db := openTestDB(t)
	in := &endless{head: []byte(`{"type":"run","name":"a"}` + "\n" + `{"type":"mark","t_ns":1,"kind":"event","text":"`), fill: 'x'}
	_, err := db.Import([]Source{{Name: "huge.jsonl", R: in}}, ImportOptions{})
	if !errors.Is(err, ErrLineLong) || !strings.HasPrefix(err.Error(), "huge.jsonl:2: line longer than") {
		t.Fatalf("err = %v", err)
	}
	if in.read > 2*MaxLineBytes+(2<<20) {
		t.Errorf("read %d bytes before refusing a line over %d", in.read, MaxLineBytes)
	}
	// A line just over the limit that ends is refused the same way.
	long := `{"type":"run","name":"b"}` + "\n" + `{"type":"mark","t_ns":1,"kind":"event","text":"` + strings.Repeat("y", MaxLineBytes) + `"}` + "\n"
	if _, err := importString(db, "long.jsonl", long, ImportOptions{}); !errors.Is(err, ErrLineLong) || !strings.HasPrefix(err.Error(), "long.jsonl:2:") {
		t.Fatalf("err = %v", err)
	}
}

// TestImportBlankLinesCostNoMemory: 64 MiB of newlines (what an 18 MB gzip
// file of newlines holds a thousandfold) allocate about what is read, not
// a record per line.
func TestImportBlankLinesCostNoMemory(t *testing.T) {
	db := openTestDB(t)
	const size = 64 << 20
	in := io.MultiReader(strings.NewReader(`{"type":"run","name":"blank"}`+"\n"), io.LimitReader(&endless{fill: '\n'}, size))
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	if _, err := db.Import([]Source{{Name: "blank.jsonl", R: in}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 3*size {
		t.Errorf("allocated %d MiB for %d MiB of blank lines", alloc>>20, size>>20)
	}
}

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
			_, err := importString(db, "bad.jsonl", tc.input, ImportOptions{})
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
	runs, err := importString(db, "many.jsonl", b.String(), ImportOptions{})
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
	runs, err := importString(db, "wide.jsonl", b.String(), ImportOptions{maxSeries: bound})
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
