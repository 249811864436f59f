package parquet

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// TestPartitionValue: the escaped forms follow Hive's and Spark's
// escapePathName (the expected values are written from its character set
// by hand), and each reads back as the name.
func TestPartitionValue(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"bs_64_amp", "bs_64_amp"},
		{"bs 64/amp", "bs 64%2Famp"},
		{"a=b:c", "a%3Db%3Ac"},
		{"100%", "100%25"},
		{`q"#'*?\{[]^`, "q%22%23%27%2A%3F%5C%7B%5B%5D%5E"},
		{"tab\there\x7f", "tab%09here%7F"},
		{"..", ".."},
		{"run-é-日本", "run-é-日本"},
		{"bad\xffutf8", "bad%FFutf8"},
		{"__HIVE_DEFAULT_PARTITION__", "%5F_HIVE_DEFAULT_PARTITION__"},
		{"20261207", "20261207"},
	} {
		got := PartitionValue(tc.in)
		if got != tc.want {
			t.Errorf("PartitionValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if back, err := UnescapePartitionValue(got); err != nil || back != tc.in {
			t.Errorf("UnescapePartitionValue(%q) = %q, %v; want %q", got, back, err, tc.in)
		}
	}
	for _, bad := range []string{"x%", "x%2", "x%zz"} {
		if _, err := UnescapePartitionValue(bad); err == nil {
			t.Errorf("UnescapePartitionValue(%q): no error", bad)
		}
	}
}

// FuzzPartitionValue: an escaped value is one path component with no
// separator, '=' or control byte, and reads back as the name, so two
// names never share a folder.
func FuzzPartitionValue(f *testing.F) {
	for _, s := range []string{"bs 64/amp", "bs_64_amp", "%2F", "\x00", "é\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v := PartitionValue(s)
		if strings.ContainsAny(v, "/\\=:\x00") {
			t.Fatalf("PartitionValue(%q) = %q holds a separator", s, v)
		}
		back, err := UnescapePartitionValue(v)
		if err != nil || back != s {
			t.Fatalf("PartitionValue(%q) = %q reads back as %q, %v", s, v, back, err)
		}
	})
}

// importNamed imports the fixture into db under name.
func importNamed(t *testing.T, db *storage.DB, name string) storage.Run {
	t.Helper()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: name, R: bytes.NewReader(fixtures.Read(t, fixtures.CleanRun))}},
		jsonl.ImportOptions{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return runs[0]
}

// TestDatasetKeepsEveryRun: runs whose names the old rule made one folder
// get a folder each, every run's rows read back under its own name; a run
// whose partition this export wrote already (another database's run of the
// same name and host, or a folder linked to a written one) is refused,
// naming both, and the first run's files are untouched.
func TestDatasetKeepsEveryRun(t *testing.T) {
	db, _ := importRun(t, fixtures.Read(t, fixtures.CleanRun))
	a, b := importNamed(t, db, "bs 64/amp"), importNamed(t, db, "bs_64_amp")
	dir := t.TempDir()
	d := NewDataset(dir)
	for _, r := range []storage.Run{a, b} {
		if _, err := d.Export(context.Background(), db, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range []storage.Run{a, b} {
		part, err := Partition(r)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := pq.ReadFile[RunRow](filepath.Join(dir, "runs", part, "part-0.parquet"))
		if err != nil || len(rows) != 1 || rows[0].Run != r.Name {
			t.Fatalf("%s: %v %+v", part, err, rows)
		}
		dev, err := pq.ReadFile[Device](filepath.Join(dir, "device", part, "part-0.parquet"))
		if err != nil || int64(len(dev)) != r.Counts.Samples || dev[0].RunName != r.Name {
			t.Fatalf("%s: %v, %d device rows, want %d of run %q", part, err, len(dev), r.Counts.Samples, r.Name)
		}
	}

	// The same run name from another database: one folder, refused.
	db2, _ := importRun(t, fixtures.Read(t, fixtures.CleanRun))
	a2 := importNamed(t, db2, "bs 64/amp")
	partA, _ := Partition(a)
	before, _ := os.Stat(filepath.Join(dir, "device", partA, "part-0.parquet"))
	_, err := d.Export(context.Background(), db2, a2)
	if !errors.Is(err, ErrPartitionTaken) || !strings.Contains(err.Error(), `"bs 64/amp" and "bs 64/amp"`) {
		t.Errorf("second run into one partition: %v, want ErrPartitionTaken naming both", err)
	}
	after, _ := os.Stat(filepath.Join(dir, "device", partA, "part-0.parquet"))
	if before == nil || after == nil || !after.ModTime().Equal(before.ModTime()) || !os.SameFile(before, after) {
		t.Errorf("the first run's file was replaced")
	}

	// A folder that is another name for a written one (as on a file system
	// that folds case): refused by identity, not by name.
	c := importNamed(t, db, "c")
	partC, _ := Partition(c)
	if err := os.Symlink(filepath.Base(partA), filepath.Join(dir, "runs", partC)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Export(context.Background(), db, c); !errors.Is(err, ErrPartitionTaken) ||
		!strings.Contains(err.Error(), `"bs 64/amp" and "c"`) {
		t.Errorf("a run into a folder linked to a written one: %v, want ErrPartitionTaken naming both", err)
	}

	// A new export (a new Dataset) replaces a run's partition, as before.
	if _, err := NewDataset(dir).Export(context.Background(), db, a); err != nil {
		t.Errorf("a later export of the same run: %v", err)
	}
}

// TestPartitionTooLong: a name too long for a folder once escaped is
// refused, never cut (a cut name could be another run's).
func TestPartitionTooLong(t *testing.T) {
	if _, err := Partition(storage.Run{Name: strings.Repeat("/", 90)}); !errors.Is(err, ErrNameTooLong) {
		t.Errorf("a 270-byte escaped name: %v, want ErrNameTooLong", err)
	}
	if _, err := Partition(storage.Run{Name: strings.Repeat("x", 251)}); err != nil {
		t.Errorf("a 255-byte folder: %v", err)
	}
}
