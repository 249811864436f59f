package parquet

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/fixtures"
)

func importRun(t *testing.T, data []byte) (*storage.DB, storage.Run) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "m.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "run", R: bytes.NewReader(data)}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return db, runs[0]
}

// TestExportLayout: the partitions are named after the host and run made
// safe, every table a run has is written, absent optional values are
// null, and a second export of the run replaces the first's files.
func TestExportLayout(t *testing.T) {
	data := fixtures.Read(t, fixtures.LeakRun)
	data = bytes.Replace(data, []byte(`"host":"vm"`), []byte(`"host":"/../x=y"`), 1)
	db, r := importRun(t, data)
	dir := t.TempDir()
	st, err := Export(context.Background(), db, r, dir)
	if err != nil {
		t.Fatal(err)
	}
	part := filepath.Join("host=%2F..%2Fx%3Dy", "run=real-resnet18-bs64-leak")
	var tables []string
	for _, tb := range Tables {
		if _, err := os.Stat(filepath.Join(dir, tb, part, "part-0.parquet")); err == nil {
			tables = append(tables, tb)
		}
	}
	if want := []string{"runs", "gpus", "device", "process", "allocator", "marks"}; !slices.Equal(tables, want) {
		t.Errorf("tables %v, want %v", tables, want)
	}
	marks, err := pq.ReadFile[Mark](filepath.Join(dir, "marks", part, "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(marks)) != r.Counts.Marks || st.Rows["marks"] != r.Counts.Marks {
		t.Fatalf("%d marks read, %d exported, %d stored", len(marks), st.Rows["marks"], r.Counts.Marks)
	}
	var steps, epochs int
	for _, m := range marks {
		switch m.Kind {
		case "step":
			if m.Step == nil || m.Epoch != nil {
				t.Fatalf("step mark %+v: want a step, a null epoch", m)
			}
			steps++
		case "epoch_start":
			if m.Epoch == nil || m.Step != nil {
				t.Fatalf("epoch mark %+v: want an epoch, a null step", m)
			}
			epochs++
		}
		if m.Time != m.TNS/1000 {
			t.Fatalf("mark time %d µs, t_ns %d", m.Time, m.TNS)
		}
	}
	if steps != 600 || epochs != 4 {
		t.Errorf("%d step and %d epoch_start marks, want 600 and 4", steps, epochs)
	}
	runs, err := pq.ReadFile[RunRow](filepath.Join(dir, "runs", part, "part-0.parquet"))
	if err != nil || len(runs) != 1 || runs[0].Host != "/../x=y" || runs[0].Run != r.Name || runs[0].Start != r.StartNS/1000 {
		t.Fatalf("runs table: %v %+v", err, runs)
	}

	// Exported again: the same files, no temporary left.
	if _, err := Export(context.Background(), db, r, dir); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*", part, ".*"))
	if len(left) != 0 {
		t.Errorf("left behind: %v", left)
	}
}

// TestExportStopsWithItsContext: an export whose context is done writes
// nothing.
func TestExportStopsWithItsContext(t *testing.T) {
	db, r := importRun(t, fixtures.Read(t, fixtures.CleanRun))
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Export(ctx, db, r, dir); err == nil {
		t.Fatal("no error from a canceled export")
	}
	var files []string
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if len(files) != 0 {
		t.Errorf("a canceled export left %v", files)
	}
}
