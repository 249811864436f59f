package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/testsupport/pickletest"
)

// writePickle writes a snapshot pickle into dir and returns its path.
func writePickle(t *testing.T, dir, name string, snap pickletest.Dict) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, pickletest.Dumps(snap), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const t0US = 1_790_000_000_000_000 // a time in 2026, µs

func leakBlocks(n int) []any {
	var bl []any
	for i := range n {
		bl = append(bl, pickletest.Block(int64(i)<<20, 256000, "active_allocated", pickletest.Frame("/w/job.py", 10, "remember")))
	}
	return bl
}

// Two snapshot files make two runs, each named after its file; --name
// with two files is refused, since it can name one run only.
func TestImportSnapshotsOneRunPerFile(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	a := writePickle(t, dir, "a.pickle", pickletest.Snapshot(leakBlocks(2), []any{pickletest.Entry("alloc", 1<<20, 256000, t0US)}))
	b := writePickle(t, dir, "b.pickle", pickletest.Snapshot(leakBlocks(3), []any{pickletest.Entry("alloc", 2<<20, 256000, t0US+3600e6)}))
	if _, errs, code := run(t, db, "", "import", "--name", "x", a, b); code != 1 || !strings.Contains(errs, "--name names one run, and each of the 2 snapshot files makes a run of its own") {
		t.Errorf("--name with two files: %d %q", code, errs)
	}
	out, errs, code := run(t, db, "", "import", a, b)
	if code != 0 || !strings.Contains(out, "imported a (id 1)") || !strings.Contains(out, "imported b (id 2)") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	for name, want := range map[string]string{"a": "500.0 KiB  2 blocks", "b": "750.0 KiB  3 blocks"} {
		if out, _, _ := run(t, db, "", "sites", name); !strings.Contains(out, "job.py:10  `remember`  "+want) {
			t.Errorf("sites %s:\n%s", name, out)
		}
	}
}

// A run of snapshots starts at its earliest, whatever device or file time
// it comes from: a device whose one trace entry is earlier than the
// file's modification time (the other device's time) is still in the run.
func TestImportSnapshotStartsAtItsEarliest(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	snap := pickletest.Dict{
		{K: "segments", V: []any{pickletest.Dict{{K: "device", V: 0}, {K: "blocks", V: leakBlocks(1)}}}},
		{K: "device_traces", V: []any{[]any{}, []any{pickletest.Entry("alloc", 5<<20, 4096, t0US+123)}}},
	}
	p := writePickle(t, dir, "two.pickle", snap)
	mtime := time.UnixMicro(t0US + 10e6).Add(789) // ns after the entry's µs
	os.Chtimes(p, mtime, mtime)
	if out, errs, code := run(t, db, "", "import", p); code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	out, errs, code := run(t, db, "", "sites", "two")
	if code != 0 || !strings.Contains(out, "== GPU 0") || !strings.Contains(out, "== GPU 1") {
		t.Errorf("sites: %d %q\n%s", code, errs, out)
	}
}

// A snapshot past the decoder's limits, or of times outside 1970..2200,
// is refused naming the file and the limit; nothing is imported.
func TestImportHostileSnapshotIsRefused(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	bomb := filepath.Join(dir, "strings.pickle")
	big := strings.Repeat("x", 2<<20)
	os.WriteFile(bomb, pickletest.Dumps(pickletest.Snapshot([]any{pickletest.Block(0, 512, "active_allocated", pickletest.Frame(big, 1, "f"))}, nil)), 0o644)
	wrap := writePickle(t, dir, "wrap.pickle", pickletest.Snapshot(nil, []any{pickletest.Entry("alloc", 1, 512, 1<<63-1)}))
	for file, want := range map[string]string{
		bomb: "import: " + bomb + ": 2097152 bytes in one string, more than the 1048576 memrec reads (docs/limits.md) (nothing was imported)",
		wrap: "import: " + wrap + ": not a PyTorch memory snapshot: device 0, trace entry 0: time_us 9223372036854775807 is outside 1970..2200 (nothing was imported)",
	} {
		_, errs, code := run(t, db, "", "import", file)
		if code != 1 || strings.TrimSpace(errs) != "memrec: "+want {
			t.Errorf("%s: %d %q\nwant %q", filepath.Base(file), code, errs, want)
		}
	}
	if out, _, _ := run(t, db, "", "runs"); strings.Contains(out, "strings") || strings.Contains(out, "wrap") {
		t.Errorf("runs after refused imports:\n%s", out)
	}
}

// 20 000 distinct sites with long paths are more than one import line
// holds (4 MiB): the smallest are added up as "other", and the import
// says nothing about line numbers of a file that has none.
func TestImportSnapshotOfManySites(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	long := strings.Repeat("d/", 100)
	var bl []any
	for i := range 20_000 {
		bl = append(bl, pickletest.Block(int64(i)<<20, int64(512*(i+1)), "active_allocated", pickletest.Frame(fmt.Sprintf("/w/%sm%05d.py", long, i), 3, "f")))
	}
	p := writePickle(t, dir, "many.pickle", pickletest.Snapshot(bl, []any{pickletest.Entry("alloc", 0, 512, t0US)}))
	out, errs, code := run(t, db, "", "import", p)
	if code != 0 {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	out, _, _ = run(t, db, "", "sites", "many")
	if !strings.Contains(out, "m19999.py:3") {
		t.Errorf("sites: the largest site missing:\n%s", out)
	}
}
