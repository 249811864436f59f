package main

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
)

// sameSecond runs twice (up to five tries) until both runs of it fell in
// one second, as the names memrec makes up (run-DATE-TIME) tell; it returns
// the two outputs. The names are read from what each run printed.
func sameSecond(t *testing.T, name *regexp.Regexp, once func() string) (first, second string) {
	t.Helper()
	for try := 0; try < 5; try++ {
		a, b := once(), once()
		na, nb := name.FindStringSubmatch(a), name.FindStringSubmatch(b)
		if na == nil || nb == nil {
			t.Fatalf("no run name in\n%s\n--\n%s", a, b)
		}
		if na[1] == nb[1] {
			return a, b
		}
	}
	t.Skip("five pairs of runs each crossed a second boundary")
	return "", ""
}

// TestRecordGeneratedNamesNeverCollide: two recordings without --name in
// the same second both run their command and are both stored; the second
// name gets a suffix (the old code refused it, and the command never ran).
func TestRecordGeneratedNamesNeverCollide(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	marker := filepath.Join(dir, "ran")
	n := 0
	once := func() string {
		n++
		_, errs, code := run(t, db, "", "record", "--source", "sim", "--", "sh", "-c", `echo x >> "$0"`, marker)
		if code != 0 {
			t.Fatalf("record %d: exit %d\n%s", n, code, errs)
		}
		return errs
	}
	name := regexp.MustCompile(`run "(run-\d{8}-\d{6})(-\d+)?"`)
	first, second := sameSecond(t, name, once)
	if a, b := name.FindStringSubmatch(first), name.FindStringSubmatch(second); b[2] == "" || a[0] == b[0] {
		t.Errorf("the second recording of the second is %s after %s, want a name with a suffix", b[0], a[0])
	}
	if b, _ := os.ReadFile(marker); strings.Count(string(b), "x") != n {
		t.Errorf("the command ran %d times in %d recordings", strings.Count(string(b), "x"), n)
	}
}

// TestRecordRefusesATakenNameBeforeTheCommand: an explicit --name that a
// run has is refused before the command runs, and said so, also while a
// reader holds the database (the old code ran the command and lost the
// recording at the end).
func TestRecordRefusesATakenNameBeforeTheCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	marker := filepath.Join(dir, "ran")
	record := func() (string, int) {
		_, errs, code := run(t, db, "", "record", "--source", "sim", "--name", "real-resnet18-bs128", "--", "touch", marker)
		return errs, code
	}
	check := func(how string) {
		t.Helper()
		errs, code := record()
		if code != 1 || !strings.Contains(errs, "already exists") || !strings.Contains(errs, "the command was not run") {
			t.Errorf("%s: exit %d, %q", how, code, errs)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Errorf("%s: the command ran", how)
			os.Remove(marker)
		}
	}
	check("database free")
	r, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	check("a reader holds the database")
}

// TestDemoTwiceInASecond: the second demo of a second is a run of its own,
// not an error about flags demo does not have.
func TestDemoTwiceInASecond(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "d.db")
	once := func() string {
		out, errs, code := run(t, db, "", "demo", "--duration", "300ms", "-o", filepath.Join(dir, "demo"), "--width", "300", "--height", "200")
		if code != 0 {
			t.Fatalf("demo: exit %d\n%s%s", code, out, errs)
		}
		return out
	}
	name := regexp.MustCompile(`as "(demo-\d{8}-\d{6})(-\d+)?"`)
	first, second := sameSecond(t, name, once)
	if a, b := name.FindStringSubmatch(first), name.FindStringSubmatch(second); b[2] == "" || a[0] == b[0] {
		t.Errorf("the second demo of the second is %s after %s, want a name with a suffix", b[0], a[0])
	}
}

// TestRecordFlagsSayWhatIsWrong: each flag refused names itself and what
// it takes, in the words of the command line (not interval_ns, not
// "time: missing unit"), before anything is recorded.
func TestRecordFlagsSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--duration", "-3s"}, "--duration -3s: want a length of time"},
		{[]string{"--sim-gpus", "0"}, "--sim-gpus 0: want 1 to 1024 GPUs"},
		{[]string{"--sim-gpus", "-1"}, "--sim-gpus -1"},
		{[]string{"--interval", "10"}, `"--interval" flag: 10 has no unit: write 10ms`},
		{[]string{"--interval", "2h"}, "--interval 2h0m0s: the longest is 1h0m0s"},
		{[]string{"--procs-every", "-1s"}, "--procs-every -1s"},
	} {
		_, errs, code := run(t, db, "", append([]string{"record", "--source", "sim"}, tc.args...)...)
		if code != 1 || !strings.Contains(errs, tc.want) || strings.Contains(errs, "interval_ns") {
			t.Errorf("%v: exit %d, %q, want %q", tc.args, code, errs, tc.want)
		}
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a refused flag left a database: %v", err)
	}
}

// TestNothingStoredLeavesNoFile: a failed import and a busy --metrics-addr
// port leave no new database; import and record refuse a 0-byte file and
// leave it as it is.
func TestNothingStoredLeavesNoFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"type":"run","name":"a","start_ns":1}`+"\n{broken\n"), 0o644)
	db := filepath.Join(dir, "new.db")
	if _, errs, code := run(t, db, "", "import", bad); code != 1 || !strings.Contains(errs, "nothing was imported") {
		t.Fatalf("bad import: %d %q", code, errs)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a failed import left a new database: %v", err)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	if _, errs, code := run(t, db, "", "record", "--source", "sim", "--metrics-addr", busy.Addr().String(), "--duration", "1s"); code != 1 || !strings.Contains(errs, "--metrics-addr") {
		t.Fatalf("busy port: %d %q", code, errs)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("a busy --metrics-addr port left a new database: %v", err)
	}

	empty := filepath.Join(dir, "empty.db")
	os.WriteFile(empty, nil, 0o644)
	for _, tc := range []struct {
		args []string
		code int // a command is run all the same, unrecorded, and exits 0
	}{
		{[]string{"import", realRun}, 1},
		{[]string{"record", "--source", "sim", "--duration", "200ms"}, 1},
		{[]string{"record", "--source", "sim", "--", "true"}, 0},
	} {
		args := tc.args
		_, errs, code := run(t, empty, "", args...)
		if code != tc.code || !strings.Contains(errs, "not a memrec database") {
			t.Errorf("%v on a 0-byte file: %d %q", args, code, errs)
		}
		if fi, err := os.Stat(empty); err != nil || fi.Size() != 0 {
			t.Errorf("%v took over the 0-byte file: %v", args, err)
		}
	}
}

// TestAnnotateFailsWhenTheMarkIsNotTaken: a recorder that never takes the
// connection (out of descriptors, its accept loop stuck) leaves annotate
// exiting 1 and saying so; the old annotate wrote into the socket's backlog
// and exited 0 while the mark was lost. The wait is shortened from
// recorder.SendTimeout: the error is the same after any wait.
func TestAnnotateFailsWhenTheMarkIsNotTaken(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // never accepted
	o := &annotateOptions{kind: "event", epoch: -1, step: -1, rank: -1, socket: sock, timeout: 50 * time.Millisecond}
	err = runAnnotate(o, "checkpoint saved")
	if !errors.Is(err, recorder.ErrNotTaken) || !strings.Contains(err.Error(), "did not take the mark") {
		t.Fatalf("annotate says %v; want that the mark was not taken", err)
	}
}

// TestMetricsAddrDefaultsToLoopback: --metrics-addr :PORT listens on the
// loopback interface only (the old code listened on every interface); a
// host given is used as it is.
func TestMetricsAddrDefaultsToLoopback(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--duration", "200ms", "--metrics-addr", ":0")
	if code != 0 || !regexp.MustCompile(`metrics at http://127\.0\.0\.1:\d+/metrics`).MatchString(errs) {
		t.Fatalf("exit %d:\n%s", code, errs)
	}
	for addr, want := range map[string]string{":9400": "127.0.0.1:9400", "0.0.0.0:9400": "0.0.0.0:9400", "[::]:1": "[::]:1", "node1:80": "node1:80"} {
		if got := loopbackUnlessNamed(addr); got != want {
			t.Errorf("%s listens on %s, want %s", addr, got, want)
		}
	}
}
