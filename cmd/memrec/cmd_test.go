package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// run runs memrec with args against db and returns stdout, stderr and the
// exit code.
func run(t testing.TB, db string, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), append([]string{"--db", db}, args...), streams{In: strings.NewReader(stdin), Out: &out, Err: &errb})
	return out.String(), errb.String(), code
}

var realRun = fixtures.Path(fixtures.CleanRun)

func TestStoreCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")

	_, errs, code := run(t, db, "", "runs")
	if code != 1 || !strings.Contains(errs, "no database") {
		t.Fatalf("runs on a missing db: %d %q", code, errs)
	}
	out, errs, code := run(t, db, "", "import", realRun)
	if code != 0 || !strings.Contains(out, "imported real-resnet18-bs128") {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	out, _, code = run(t, db, "", "runs")
	if code != 0 || !strings.Contains(out, "real-resnet18-bs128") || !strings.Contains(out, "complete") || !strings.Contains(out, "batch_size=128") {
		t.Fatalf("runs: %q", out)
	}
	out, _, _ = run(t, db, "", "runs", "--json", "--check")
	var runs []runSummary
	if err := json.Unmarshal([]byte(out), &runs); err != nil || len(runs) != 1 || runs[0].Status != "complete" || runs[0].DurationS < 20 {
		t.Fatalf("runs --json: %v %q", err, out)
	}

	// Export to a file, import it again from stdin under another name.
	exp := filepath.Join(dir, "x.jsonl")
	if _, errs, code = run(t, db, "", "export", "real-resnet18-bs128", "-o", exp); code != 0 {
		t.Fatalf("export: %s", errs)
	}
	data, _ := os.ReadFile(exp)
	if _, errs, code = run(t, db, string(data), "import", "-"); code != 1 || !strings.Contains(errs, "already exists") || !strings.Contains(errs, "nothing was imported") {
		t.Fatalf("duplicate import: %d %s", code, errs)
	}
	if _, errs, code = run(t, db, string(data), "import", "--name", "copy", "-"); code != 0 {
		t.Fatalf("import --name: %s", errs)
	}
	out, _, _ = run(t, db, "", "export", "copy")
	if strings.SplitN(out, "\n", 2)[1] != strings.SplitN(string(data), "\n", 2)[1] {
		t.Fatal("export of the re-imported run differs")
	}

	if out, errs, code = run(t, db, "", "tag", "copy", "amp=on", "batch_size="); code != 0 || !strings.Contains(out, "amp=on") || strings.Contains(out, "batch_size") {
		t.Fatalf("tag: %q %q", out, errs)
	}
	if _, errs, code = run(t, db, "", "tag", "copy", "novalue"); code != 1 || !strings.Contains(errs, `"novalue": want KEY=VALUE`) {
		t.Fatalf("bad tag: %q", errs)
	}
	if out, _, code = run(t, db, "", "rm", "copy"); code != 0 || !strings.Contains(out, "removed copy") {
		t.Fatal(out)
	}
	if _, errs, code = run(t, db, "", "export", "copy"); code != 1 || !strings.Contains(errs, "no such run") {
		t.Fatal(errs)
	}
	// rm leaves the copy's pages free; compact gives them back and keeps
	// the other run as it was.
	before, _ := os.Stat(db)
	if out, errs, code = run(t, db, "", "compact"); code != 0 || !strings.Contains(out, " -> ") {
		t.Fatalf("compact: %d %q %q", code, out, errs)
	}
	if after, _ := os.Stat(db); after.Size() >= before.Size() {
		t.Fatalf("compact: %d bytes before, %d after", before.Size(), after.Size())
	}
	out, _, _ = run(t, db, "", "export", "real-resnet18-bs128")
	if out != string(data) {
		t.Fatal("export after compact differs")
	}
	if _, errs, code = run(t, db, "", "import", filepath.Join(dir, "missing.jsonl")); code != 1 || !strings.Contains(errs, "missing.jsonl") {
		t.Fatal(errs)
	}
}

func TestLockedDatabaseIsAClearError(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	w, err := storage.Open(db, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	_, errs, code := run(t, db, "", "runs")
	if code != 1 || !strings.Contains(errs, "locked by another memrec process") {
		t.Fatalf("%d %q", code, errs)
	}
}

func TestDBFromEnvironment(t *testing.T) {
	db := filepath.Join(t.TempDir(), "env.db")
	t.Setenv("MEMREC_DB", db)
	var out, errb bytes.Buffer
	if code := execute(context.Background(), []string{"import", realRun}, streams{In: strings.NewReader(""), Out: &out, Err: &errb}); code != 0 {
		t.Fatal(errb.String())
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatal("MEMREC_DB not used:", err)
	}
}

func TestReportOutputRefusesForeignFolder(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	thesis := filepath.Join(dir, "thesis")
	os.MkdirAll(filepath.Join(thesis, ".git"), 0o755)
	os.WriteFile(filepath.Join(thesis, "thesis.tex"), []byte("chapter 1"), 0o644)
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	for _, args := range [][]string{
		{"report", "real-resnet18-bs128", "-o", thesis},
		{"compare", "real-resnet18-bs128", "real-resnet18-bs128", "-o", thesis},
		{"demo", "--duration", "1h", "-o", thesis}, // refused before it records
	} {
		_, errs, code := run(t, db, "", args...)
		if code != 1 || !strings.Contains(errs, "-o: "+thesis+" exists, is not empty and is not a memrec report") {
			t.Errorf("%s: %d %q", args[0], code, errs)
		}
	}
	if b, err := os.ReadFile(filepath.Join(thesis, "thesis.tex")); err != nil || string(b) != "chapter 1" {
		t.Fatalf("thesis damaged: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(thesis, ".git")); err != nil {
		t.Fatal(err)
	}
}

// TestFailedCommandsLeaveFileAsItWas: a failed import, rm or tag of no such
// run leave the database byte for byte as it was, its length included (a
// file a killed recorder left longer than its pages stays so).
func TestFailedCommandsLeaveFileAsItWas(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	f, err := os.OpenFile(db, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 256<<10)) // room bbolt grew the file by, as a killed writer leaves it
	f.Close()
	before, _ := os.ReadFile(db)
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"type":"run","name":"x"}`+"\n"+`{"type":"gpu","gpu":0}`+"\n"+"not json\n"), 0o644)
	for _, args := range [][]string{
		{"import", bad},
		{"import", realRun}, // the name is taken
		{"rm", "nosuch"},
		{"tag", "nosuch", "a=b"},
	} {
		if _, _, code := run(t, db, "", args...); code != 1 {
			t.Fatalf("%v succeeded", args)
		}
		if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
			t.Fatalf("%v changed the file (%d bytes before, %d after)", args, len(before), len(after))
		}
	}
}

func TestLimitMemory(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	debug.SetMemoryLimit(math.MaxInt64)
	limitMemory(func(string) string { return "1GiB" })
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("with GOMEMLIMIT set: limit %d, want it left alone", got)
	}
	limitMemory(func(string) string { return "" })
	if got := debug.SetMemoryLimit(-1); got != softMemoryLimit {
		t.Errorf("limit %d, want %d", got, softMemoryLimit)
	}
}

// pythonScript writes a Python script into a folder of its own beside a
// database path there (the test is skipped without python3).
func pythonScript(t *testing.T, text string) (db, script string) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found")
	}
	dir := t.TempDir()
	script = filepath.Join(dir, "train.py")
	if err := os.WriteFile(script, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "m.db"), script
}
