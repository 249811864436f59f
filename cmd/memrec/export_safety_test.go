package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// TestExportNeverReplacesADatabase: -o naming the database in use, the
// same file through a hard or symbolic link, or another memrec database is
// refused, and each file keeps its bytes.
func TestExportNeverReplacesADatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "memrec.db")
	other := filepath.Join(dir, "other.db")
	for _, p := range []string{db, other} {
		if _, errs, code := run(t, p, "", "import", realRun); code != 0 {
			t.Fatal(errs)
		}
	}
	hard, soft := filepath.Join(dir, "hard.jsonl"), filepath.Join(dir, "soft.jsonl")
	if err := os.Link(db, hard); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("memrec.db", soft); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(db)
	beforeOther, _ := os.ReadFile(other)
	for _, tc := range []struct{ out, want string }{
		{db, "is the database in use"},
		{dir + "//./memrec.db", "is the database in use"},
		{hard, "is the database in use"},
		{soft, "is the database in use"},
		{other, "is a memrec database"},
	} {
		for _, format := range []string{"jsonl", "csv"} {
			_, errs, code := run(t, db, "", "export", "real-resnet18-bs128", "--format", format, "-o", tc.out)
			if code != 1 || !strings.Contains(errs, tc.want) {
				t.Errorf("export -o %s --format %s: exit %d, %q; want %q", tc.out, format, code, errs, tc.want)
			}
		}
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
		t.Error("the database changed")
	}
	if after, _ := os.ReadFile(other); !bytes.Equal(beforeOther, after) {
		t.Error("the other database changed")
	}
	// An ordinary file there is replaced as before.
	plain := filepath.Join(dir, "plain.jsonl")
	os.WriteFile(plain, []byte("old"), 0o644)
	if _, errs, code := run(t, db, "", "export", "real-resnet18-bs128", "-o", plain); code != 0 {
		t.Fatal(errs)
	}
}

// TestExportNamesStayInsideTheFolder: a host with slashes, dots and
// control characters gives an event file inside -o DIR, named with none
// of them.
func TestExportNamesStayInsideTheFolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	data := fixtures.Read(t, fixtures.CleanRun)
	data = bytes.Replace(data, []byte(`"host":"vm"`), []byte(`"host":"/../../x/pwn\u001b[2J\n"`), 1)
	if _, errs, code := run(t, db, string(data), "import", "-"); code != 0 {
		t.Fatal(errs)
	}
	tb := filepath.Join(dir, "a", "b", "tb")
	if _, errs, code := run(t, db, "", "export", "real-resnet18-bs128", "--format", "tensorboard", "-o", tb, "--points", "100"); code != 0 {
		t.Fatal(errs)
	}
	files, _ := filepath.Glob(filepath.Join(tb, "*"))
	if len(files) != 1 {
		t.Fatalf("the folder holds %v", files)
	}
	base := filepath.Base(files[0])
	if !strings.Contains(base, "._.._.._x_pwn__2J_.") || strings.ContainsAny(base, "/\x1b\n") {
		t.Errorf("event file name %q", base)
	}
	if _, err := os.Stat(filepath.Join(dir, "a", "x")); err == nil {
		t.Error("a folder was made outside -o")
	}
}

// TestExportHonoursUmask: exported files are 0666 less the umask, as the
// database is.
func TestExportHonoursUmask(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	out := filepath.Join(dir, "r.csv")
	if _, errs, code := run(t, db, "", "export", "real-resnet18-bs128", "--format", "csv", "-o", out); code != 0 {
		t.Fatal(errs)
	}
	tb := filepath.Join(dir, "tb")
	if _, errs, code := run(t, db, "", "export", "real-resnet18-bs128", "--format", "tensorboard", "-o", tb, "--points", "100"); code != 0 {
		t.Fatal(errs)
	}
	events, _ := filepath.Glob(filepath.Join(tb, "events.*"))
	for _, p := range append(events, out, tb) {
		fi, err := os.Stat(p)
		want := os.FileMode(0o644)
		if fi != nil && fi.IsDir() {
			want = 0o755
		}
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, mode %v; want %03o", p, err, fi.Mode().Perm(), want)
		}
	}
}

// TestExportSignalLeavesNothing: with the context ended by SIGINT or
// SIGTERM (as the first signal ends it), export -o writes nothing, leaves
// no temporary, and exits 130 or 143.
func TestExportSignalLeavesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		for _, format := range []string{"jsonl", "csv", "tensorboard"} {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(signalCause{sig})
			out := filepath.Join(dir, "out-"+format)
			var o, e bytes.Buffer
			code := execute(ctx, []string{"--db", db, "export", "real-resnet18-bs128", "--format", format, "-o", out}, streams{In: strings.NewReader(""), Out: &o, Err: &e})
			if code != 128+int(sig) {
				t.Errorf("%v, %s: exit %d (%s), want %d", sig, format, code, e.String(), 128+int(sig))
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() != "m.db" && e.Name() != "out-tensorboard" {
			t.Errorf("left behind: %s", e.Name())
		}
	}
	if e, _ := os.ReadDir(filepath.Join(dir, "out-tensorboard")); len(e) != 0 {
		t.Errorf("left in the tensorboard folder: %v", e)
	}

	// writeFile whose context ends during the write: no target, no temporary.
	ctx, cancel := context.WithCancelCause(context.Background())
	target := filepath.Join(dir, "mid")
	err := writeFile(ctx, target, func(w io.Writer) error {
		w.Write([]byte("first"))
		cancel(signalCause{syscall.SIGTERM})
		_, err := w.Write([]byte("second"))
		return err
	})
	if err == nil || interrupted(ctx, err) != (exitError{143}) {
		t.Errorf("writeFile after the signal: %v", err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "*mid*")); len(m) != 0 {
		t.Errorf("left: %v", m)
	}
}

// TestExportStopsOnTheFirstSignal: a real memrec process exporting a run
// larger than a pipe holds, sent one SIGINT (or SIGTERM) while its output
// waits to be read, stops short of the end with exit 130 (143).
func TestExportStopsOnTheFirstSignal(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	c := tracegen.Default()
	c.Duration = time.Minute // about 100 000 lines, 9 MB of JSON Lines
	var gen bytes.Buffer
	if _, err := tracegen.Write(&gen, c); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := run(t, db, gen.String(), "import", "-"); code != 0 {
		t.Fatal(errs)
	}
	full, _, _ := run(t, db, "", "export", "gen")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := exec.Command(exe, "--db", db, "export", "gen")
		cmd.Env = append(os.Environ(), "MEMREC_AS_MAIN=1")
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The first byte read means export is writing, and blocked on the
		// pipe until it is read further.
		first := make([]byte, 1)
		if _, err := io.ReadFull(stdout, first); err != nil {
			t.Fatal(err)
		}
		cmd.Process.Signal(sig)
		rest, _ := io.ReadAll(stdout)
		err = cmd.Wait()
		code := cmd.ProcessState.ExitCode()
		if code != 128+int(sig) || 1+len(rest) >= len(full) {
			t.Errorf("%v: exit %d (%v), %d of %d bytes written", sig, code, err, 1+len(rest), len(full))
		}
	}
}

// TestReportStopsOnASignalWhileIndexing: the first signal that comes while
// report builds its page's levels (seconds on a long run) ends it at once:
// exit 130, no report written, nothing left beside it.
func TestReportStopsOnASignalWhileIndexing(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	real := analyzeForReport
	t.Cleanup(func() { analyzeForReport = real })
	release := make(chan struct{})
	defer close(release)
	analyzeForReport = func(d *storage.DB, r storage.Run, opts analysis.Options) (*analysis.Report, error) {
		cancel(signalCause{syscall.SIGINT})
		<-release // a long run's analysis and indexing, still going when the signal comes
		return real(d, r, opts)
	}
	start := time.Now()
	var o, e bytes.Buffer
	code := execute(ctx, []string{"--db", db, "report", "real-resnet18-bs128", "-o", filepath.Join(dir, "rep")}, streams{In: strings.NewReader(""), Out: &o, Err: &e})
	if code != 130 || time.Since(start) > 10*time.Second || !strings.Contains(e.String(), "no report was written") {
		t.Fatalf("exit %d after %v: %s", code, time.Since(start), e.String())
	}
	entries, _ := os.ReadDir(dir)
	for _, en := range entries {
		if en.Name() != "m.db" {
			t.Errorf("left behind: %s", en.Name())
		}
	}
}
