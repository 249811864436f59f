package main

import (
	"encoding/binary"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/memrec/memrec/formats/parquet"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// TestExportFormats: CSV to stdout and to a file, a TensorBoard event file
// into a folder, and the errors of bad flags.
func TestExportFormats(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	out, errs, code := run(t, db, "", "export", "real-resnet18-bs128", "--format", "csv")
	if code != 0 {
		t.Fatal(errs)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || len(rows) < 100 || rows[0][5] != "gpu0_used_bytes" {
		t.Fatalf("csv: %v, %d rows, header %v", err, len(rows), rows[0])
	}
	file := filepath.Join(dir, "r.csv")
	if _, errs, code = run(t, db, "", "export", "real-resnet18-bs128", "--format", "csv", "-o", file); code != 0 {
		t.Fatal(errs)
	}
	if b, _ := os.ReadFile(file); string(b) != out {
		t.Error("CSV written with -o differs from stdout")
	}

	tb := filepath.Join(dir, "tb", "bs128")
	if _, errs, code = run(t, db, "", "export", "real-resnet18-bs128", "--format", "tensorboard", "-o", tb, "--points", "100"); code != 0 {
		t.Fatal(errs)
	}
	files, _ := filepath.Glob(filepath.Join(tb, "*"))
	if len(files) != 1 || !strings.HasPrefix(filepath.Base(files[0]), "events.out.tfevents.") || !strings.HasSuffix(files[0], ".memrec") {
		t.Fatalf("tensorboard folder holds %v", files)
	}
	b, _ := os.ReadFile(files[0])
	if len(b) < 16 || binary.LittleEndian.Uint64(b) > uint64(len(b)) || !strings.Contains(string(b[:64]), "brain.Event:2") {
		t.Fatalf("%s does not start with a file_version record", files[0])
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "xml"}, `--format "xml": want jsonl, csv, tensorboard or parquet`},
		{[]string{"--format", "parquet"}, "give it with -o DIR"},
		{[]string{"--format", "parquet", "-o", tb, "--all"}, "--all exports every run: give no RUN"},
		{[]string{"--format", "tensorboard"}, "give it with -o DIR"},
		{[]string{"--format", "tensorboard", "-o", file}, "not a folder"},
		{[]string{"--format", "tensorboard", "-o", tb, "--points", "2"}, "--points 2"},
	} {
		_, errs, code := run(t, db, "", append([]string{"export", "real-resnet18-bs128"}, tc.args...)...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("export %v: exit %d, %q; want %q", tc.args, code, errs, tc.want)
		}
	}
}

// TestExportAllParquet: export --all --format parquet writes every run of
// the database into one folder, a host=/run= partition each, the names
// escaped so that runs the old rule put in one folder (bs 64/amp and
// bs_64_amp) keep a folder each; --all takes parquet only.
func TestExportAllParquet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	for _, args := range [][]string{{realRun}, {fixtures.Path(fixtures.LeakRun)}, {"--name", "bs 64/amp", realRun}, {"--name", "bs_64_amp", realRun}} {
		if _, errs, code := run(t, db, "", append([]string{"import"}, args...)...); code != 0 {
			t.Fatal(errs)
		}
	}
	out := filepath.Join(dir, "fleet")
	_, errs, code := run(t, db, "", "export", "--all", "--format", "parquet", "-o", out)
	if code != 0 {
		t.Fatal(errs)
	}
	for _, name := range []string{"real-resnet18-bs128", "real-resnet18-bs64-leak"} {
		for _, table := range []string{"runs", "device", "allocator", "marks"} {
			if _, err := os.Stat(filepath.Join(out, table, "host=vm", "run="+name, "part-0.parquet")); err != nil {
				t.Errorf("%s of %s: %v", table, name, err)
			}
		}
		if !strings.Contains(errs, "wrote "+name) {
			t.Errorf("stderr does not say it wrote %s: %s", name, errs)
		}
	}
	for name, folder := range map[string]string{"bs 64/amp": "run=bs 64%2Famp", "bs_64_amp": "run=bs_64_amp"} {
		rows, err := pq.ReadFile[parquet.RunRow](filepath.Join(out, "runs", "host=vm", folder, "part-0.parquet"))
		if err != nil || len(rows) != 1 || rows[0].Run != name {
			t.Errorf("run %q: %v, %+v in %s", name, err, rows, folder)
		}
	}
	if _, errs, code := run(t, db, "", "export", "--all", "--format", "csv"); code != 1 || !strings.Contains(errs, "--all takes --format parquet") {
		t.Errorf("--all --format csv: %d %q", code, errs)
	}
}
