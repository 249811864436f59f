package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// memrecProcess starts this test binary as memrec (TestMain) with args.
func memrecProcess(t *testing.T, stdin io.Reader, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), "MEMREC_AS_MAIN=1")
	cmd.Stdin = stdin
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, &errb
}

// waitOpened waits until process pid has path open: memrec opens its
// database only after its signal handling is in place (and the Go runtime
// marks SIGTERM caught from its start, so /proc's SigCgt cannot tell).
func waitOpened(t *testing.T, pid int, path string) {
	t.Helper()
	want, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	fds := fmt.Sprintf("/proc/%d/fd", pid)
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		entries, err := os.ReadDir(fds)
		if err != nil && os.IsNotExist(err) {
			if _, err := os.Stat("/proc/self/fd"); err != nil {
				t.Skipf("no /proc: %v", err)
			}
		}
		for _, e := range entries {
			if target, err := os.Readlink(filepath.Join(fds, e.Name())); err == nil && target == want {
				return
			}
		}
	}
	t.Fatalf("process %d never opened %s", pid, path)
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if err == nil {
		return 0
	}
	if !errors.As(err, &ee) {
		t.Fatal(err)
	}
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()) + 1000 // killed by the signal, not exited
	}
	return ee.ExitCode()
}

// TestImportStopsAtTheFirstSignal: an import that is still reading (its
// input keeps coming) stops at the first SIGINT: exit 130, nothing
// committed, and the new database it had created is gone. The old code
// went on until the input ended and committed it all.
func TestImportStopsAtTheFirstSignal(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "new.db")
	pr, pw := io.Pipe()
	cmd, errb := memrecProcess(t, pr, "--db", db, "import", "--name", "endless", "-")
	defer cmd.Process.Kill()
	written := make(chan int64, 1)
	go func() {
		// A run, then samples as long as anyone reads them.
		w := bufio.NewWriter(pw)
		fmt.Fprintln(w, `{"type":"run","name":"x","start_ns":1764430000000000000,"interval_ns":10000000}`)
		fmt.Fprintln(w, `{"type":"gpu","gpu":0,"uuid":"GPU-0","name":"G","total_bytes":80000000000}`)
		var n int64
		for i := int64(0); ; i++ {
			k, err := fmt.Fprintf(w, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", 1764430000000000000+i*10000000, 1<<30+i)
			n += int64(k)
			if err != nil {
				return
			}
			if n > 8<<20 {
				select {
				case written <- n:
				default:
				}
			}
		}
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-written: // well into the import
	case err := <-exited:
		t.Fatalf("import ended before the signal: %v\n%s", err, errb.String())
	}
	cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("import still running a minute after SIGINT")
	}
	pr.Close()
	if code := exitCode(t, err); code != 130 || !strings.Contains(errb.String(), "nothing was imported") {
		t.Fatalf("exit %d, want 130; stderr %q", code, errb.String())
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("the interrupted import left its new database: %v", err)
	}
}

// TestReportStopsAtTheFirstSignal: a report of a long run stops at the
// first SIGTERM: exit 143, no report folder, no temporary beside it. The
// old code ran to the end and wrote the report (exit 0).
func TestReportStopsAtTheFirstSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("imports long runs")
	}
	t.Parallel()
	dir := t.TempDir()
	db, _ := copyLongDBs(t, dir)
	before, _ := os.ReadFile(db)

	out := filepath.Join(dir, "out", "rep")
	os.MkdirAll(filepath.Dir(out), 0o755)
	cmd, errb := memrecProcess(t, nil, "--db", db, "report", "a", "-o", out)
	defer cmd.Process.Kill()
	waitOpened(t, cmd.Process.Pid, db) // into the analysis
	cmd.Process.Signal(syscall.SIGTERM)
	err := cmd.Wait()
	if code := exitCode(t, err); code != 143 || !strings.Contains(errb.String(), "no report was written") {
		t.Fatalf("exit %d, want 143; stderr %q", code, errb.String())
	}
	if entries, _ := os.ReadDir(filepath.Dir(out)); len(entries) != 0 {
		t.Errorf("the interrupted report left %v", entries)
	}
	if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
		t.Error("the database changed")
	}
}
