package main

import (
	"encoding/binary"
	"encoding/csv"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	if err != nil || len(rows) < 100 || rows[0][2] != "gpu0_used_bytes" {
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
		{[]string{"--format", "parquet"}, `--format "parquet": want jsonl, csv or tensorboard`},
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
