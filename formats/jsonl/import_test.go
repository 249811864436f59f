package jsonl

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
)

// The import's own behaviour: how it reads its input (gzip cut short,
// long and blank lines, workers), names errors and renames or replaces
// runs. The bounds the store puts on every row are tested in storage.

func importString(db *storage.DB, name, s string, opts ImportOptions) ([]storage.Run, error) {
	return Import(db, []Source{{Name: name, R: strings.NewReader(s)}}, opts)
}

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
	_, err := Import(db, []Source{{Name: "cut.jsonl.gz", R: gunzipped(t, data)}}, ImportOptions{})
	if !errors.Is(err, ErrTruncated) || !strings.Contains(err.Error(), "cut.jsonl.gz: after line 5002") {
		t.Fatalf("err = %v, want ErrTruncated after line 5002", err)
	}
	if runs, _ := db.Runs(); len(runs) != 0 {
		t.Fatalf("imported %v", runs)
	}
	runs, err := Import(db, []Source{{Name: "cut.jsonl.gz", R: gunzipped(t, data)}}, ImportOptions{AllowTruncated: true})
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
	runs, err = Import(db2, []Source{{Name: "mid.gz", R: gunzipped(t, buf.Bytes())}}, ImportOptions{AllowTruncated: true})
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
	_, err := Import(db, []Source{{Name: "huge.jsonl", R: in}}, ImportOptions{})
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
	if _, err := Import(db, []Source{{Name: "blank.jsonl", R: in}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&m1)
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 3*size {
		t.Errorf("allocated %d MiB for %d MiB of blank lines", alloc>>20, size>>20)
	}
}

func TestImportBadInputLeavesDatabaseUnchanged(t *testing.T) {
	good := `{"type":"run","name":"a","start_ns":1}
{"type":"gpu","gpu":0,"total_bytes":1000}
{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5}
`
	cases := []struct {
		name, input, want string
	}{
		{"malformed", good + "{\"type\":\"sample\",\n", "bad.jsonl:4: malformed JSON"},
		{"wrong type", good + `{"type":"sample","t_ns":"10","gpu":0,"used_bytes":5}`, `bad.jsonl:4: sample: "t_ns": want an integer, got string`},
		{"float bytes", good + `{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5.5}`, `bad.jsonl:4: sample: "used_bytes": not an integer`},
		{"negative", good + `{"type":"sample","t_ns":11,"gpu":0,"used_bytes":-5}`, "bad.jsonl:4: sample: used_bytes is negative (-5)"},
		{"undeclared gpu", good + `{"type":"sample","t_ns":11,"gpu":3,"used_bytes":5}`, "bad.jsonl:4: sample: GPU 3 is not declared"},
		{"missing field", good + `{"type":"proc","t_ns":11,"gpu":0,"used_bytes":5}`, `bad.jsonl:4: proc: missing "pid"`},
		{"unknown type", good + `{"type":"nope"}`, `bad.jsonl:4: unknown type "nope"`},
		{"not an object", good + `[1,2]`, "bad.jsonl:4: want a JSON object"},
		{"data first", `{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5}`, "bad.jsonl:1: data before the first"},
		{"negative torch", good + `{"type":"torch","t_ns":11,"gpu":0,"pid":1,"allocated_bytes":-1,"reserved_bytes":0}`, "bad.jsonl:4: torch: allocated_bytes is negative"},
		{"negative epoch", good + `{"type":"mark","t_ns":11,"kind":"epoch_start","epoch":-2}`, `bad.jsonl:4: mark: "epoch" is negative`},
		{"taken name", `{"type":"run","name":"kept"}`, `bad.jsonl:1: run "kept": a run with that name already exists`},
		{"empty", "\n\n", "no run in the input"},
		{"duplicate gpu", good + `{"type":"gpu","gpu":0}`, "bad.jsonl:4: gpu 0 declared twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := openTestDB(t)
			if _, err := importString(db, "kept.jsonl", strings.ReplaceAll(good, `"a"`, `"kept"`), ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			before, _ := db.Runs()
			// The good run comes first in the same input: it must not stay.
			_, err := importString(db, "bad.jsonl", tc.input, ImportOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			after, _ := db.Runs()
			if len(after) != len(before) || after[0].Name != "kept" {
				t.Fatalf("database changed: %v", after)
			}
		})
	}
}

func TestImportUnknownFieldsIgnored(t *testing.T) {
	db := openTestDB(t)
	runs, err := importString(db, "x", `{"type":"run","name":"a","start_ns":1,"future":{"x":[1]}}
{"type":"gpu","gpu":0,"nvlink":true}
{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5,"temperature_c":61}
`, ImportOptions{})
	if err != nil || runs[0].Counts.Samples != 1 {
		t.Fatal(runs, err)
	}
}

func TestImportRenameReplaceAndSeveralRuns(t *testing.T) {
	db := openTestDB(t)
	two := `{"type":"run","name":"a"}
{"type":"gpu","gpu":0}
{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5}
{"type":"run","name":"b","tags":{"batch_size":64,"amp":"on"}}
{"type":"gpu","gpu":0}
{"type":"sample","t_ns":20,"gpu":0,"used_bytes":6}
`
	runs, err := importString(db, "two", two, ImportOptions{})
	if err != nil || len(runs) != 2 || runs[1].Tags["batch_size"] != "64" || runs[0].StartNS != 10 {
		t.Fatal(runs, err)
	}
	if _, err := importString(db, "two", two, ImportOptions{Name: "c"}); !errors.Is(err, storage.ErrRenameMany) || !strings.Contains(err.Error(), "two:4:") {
		t.Fatalf("rename of two runs: %v", err)
	}
	if _, err := importString(db, "two", two, ImportOptions{}); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("reimport: %v", err)
	}
	runs2, err := importString(db, "two", two, ImportOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := db.Runs()
	if len(all) != 2 || all[0].ID == runs[0].ID {
		t.Fatalf("replace: %v", all)
	}
	it := db.DeviceSamples(runs2[1], 0, storage.MinTime, storage.MaxTime)
	if !it.Next() || it.At().Used != 6 {
		t.Fatal("replaced run's data")
	}
	if _, err := db.Delete("a", storage.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Run("a"); !errors.Is(err, storage.ErrNoRun) {
		t.Fatal(err)
	}
	r, err := db.SetTags("b", map[string]string{"amp": "", "lr": "0.1"})
	if err != nil || r.Tags["lr"] != "0.1" || r.Tags["amp"] != "" || len(r.Tags) != 2 {
		t.Fatal(r.Tags, err)
	}
	if r2, err := db.Run(fmt.Sprint(r.ID)); err != nil || r2.Name != "b" {
		t.Fatal("lookup by id", err)
	}
}

// BenchmarkImport imports a 2-minute 8-GPU run from memory; it reports
// lines per second and stored bytes per line.
func BenchmarkImport(b *testing.B) {
	var buf bytes.Buffer
	c := tracegen.Default()
	c.Duration = 2 * time.Minute
	truth, err := tracegen.Write(&buf, c)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for b.Loop() {
		db, err := storage.Open(filepath.Join(b.TempDir(), "bench.db"), storage.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Import(db, []Source{{Name: "gen", R: bytes.NewReader(buf.Bytes())}}, ImportOptions{}); err != nil {
			b.Fatal(err)
		}
		size, _ = db.Size()
		db.Close()
	}
	b.ReportMetric(float64(truth.Lines*b.N)/b.Elapsed().Seconds()/1e6, "Mlines/s")
	b.ReportMetric(float64(size)/float64(truth.Lines), "B/line")
}
