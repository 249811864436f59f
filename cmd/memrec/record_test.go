package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// TestMain lets tests run this binary as memrec itself (MEMREC_AS_MAIN=1),
// for what needs a real process: kill -9.
func TestMain(m *testing.M) {
	if os.Getenv("MEMREC_AS_MAIN") == "1" {
		os.Exit(execute(context.Background(), os.Args[1:], defaultIO()))
	}
	if os.Getenv("MEMREC_FAKE_JOB") == "1" {
		os.Exit(fakeJob(os.Args[1:]))
	}
	code := m.Run()
	if longDBs.dir != "" {
		os.RemoveAll(longDBs.dir)
	}
	os.Exit(code)
}

func TestRecordSimEndToEnd(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-scenario", "leak", "--duration", "1500ms",
		"--interval", "5ms", "--procs", "--name", "sim1", "--tag", "batch_size=64")
	if code != 0 {
		t.Fatalf("%d %s", code, errs)
	}
	for _, want := range []string{"ticks", "on time", "device", "allocator", "marks", "of one core", `run "sim1" (complete)`} {
		if !strings.Contains(errs, want) {
			t.Errorf("summary lacks %q:\n%s", want, errs)
		}
	}
	out, _, _ := run(t, db, "", "runs")
	if !strings.Contains(out, "sim1") || !strings.Contains(out, "batch_size=64") || !strings.Contains(out, "scenario=leak") {
		t.Fatalf("runs: %s", out)
	}
	out, _, _ = run(t, db, "", "export", "sim1")
	for _, want := range []string{`"type":"sample"`, `"type":"proc"`, `"type":"torch"`, `"kind":"step"`, `"kind":"epoch_start"`, `"source":"sim"`} {
		if !strings.Contains(out, want) {
			t.Errorf("export lacks %s", want)
		}
	}
	// The same name again is refused before anything runs.
	_, errs, code = run(t, db, "", "record", "--source", "sim", "--duration", "100ms", "--name", "sim1")
	if code != 1 || !strings.Contains(errs, "already exists") {
		t.Fatalf("%d %s", code, errs)
	}
}

// TestRecordSimSpeed records 20 s of a simulated job at 200 times real
// speed: the run spans the job's 20 s (not the 0.1 s of real time it took),
// with the job's steps.
func TestRecordSimSpeed(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	start := time.Now()
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-speed", "200", "--duration", "20s", "--name", "fast")
	if code != 0 {
		t.Fatalf("%d %s", code, errs)
	}
	if real := time.Since(start); real > 10*time.Second {
		t.Errorf("20 s of the job at 200x took %v", real)
	}
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := d.Run("fast")
	if err != nil {
		t.Fatal(err)
	}
	// Every millisecond of real time is 0.2 s of the job's: a loaded machine
	// that delays the recorder's start, its last ticks or its stop moves the
	// ends by job seconds. What matters is that the run spans job time, not
	// the 0.1 s of real time it took.
	if got := r.Duration(); got < 10*time.Second || got > time.Minute {
		t.Errorf("run spans %v of the job, want about 20 s", got)
	}
	// The simulated job steps every 100 ms from its first second on.
	if r.Counts.Marks < 100 {
		t.Errorf("%d marks in 20 s of the job, want over 100", r.Counts.Marks)
	}
}

func TestRecordFlagsAndDriverErrors(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"record", "--interval", "50us", "--source", "sim"}, "--interval 50µs: the shortest is 100µs"},
		{[]string{"record", "--gpus", "0,x", "--source", "sim"}, `--gpus "0,x"`},
		{[]string{"record", "--gpus", "5", "--source", "sim"}, "--gpus: no such GPU: no GPU 5 here"},
		{[]string{"record", "--source", "tpu"}, `--source "tpu"`},
		{[]string{"record", "--source", "sim", "--sim-scenario", "boom"}, `unknown simulation scenario "boom"`},
		{[]string{"record", "--tag", "oops", "--source", "sim"}, "--tag"},
		{[]string{"record", "stray", "--source", "sim"}, "put the command after --"},
		{[]string{"record", "--sim-speed", "10"}, "--sim-speed 10: want a speed above 0, with --source sim"},
		{[]string{"record", "--source", "sim", "--sim-speed", "0"}, "--sim-speed 0"},
		{[]string{"annotate", "hi", "--socket", ""}, "MEMREC_SOCKET is not set"},
		{[]string{"annotate", "--kind", "epoch_start", "--socket", "/x"}, "needs --epoch"},
		{[]string{"annotate", "--kind", "party", "--socket", "/x"}, `--kind "party"`},
	} {
		_, errs, code := run(t, db, "", tc.args...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: %d %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}

func TestRecordNoDriverNamesSim(t *testing.T) {
	var out, errb strings.Builder
	g := &globals{io: streams{In: strings.NewReader(""), Out: &out, Err: &errb}, dbPath: filepath.Join(t.TempDir(), "m.db")}
	o := &recordOptions{globals: g, interval: 10 * time.Millisecond, source: "nvml", openNVML: func() (*recorder.NVML, error) {
		return recorder.NewNVML(&mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }})
	}}
	err := runRecord(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "--source sim") {
		t.Fatal(err)
	}
}

func TestRecordExitCodeOfChild(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--name", "c", "--", "sh", "-c", "exit 9")
	if code != 9 || !strings.Contains(errs, "command     exited with 9") {
		t.Fatalf("%d %s", code, errs)
	}
}

// waitForCommitted polls a recording's database until run holds at least
// min committed device samples, and returns how many it holds. The
// recorder keeps the file locked, so each poll reads a copy of it: a
// commit writes its pages before the meta page that points at them, so a
// copy shows the last commit whose meta page it caught (or, torn mid-meta,
// fails its checksum and is polled again).
func waitForCommitted(t *testing.T, path, run string, min int64) int64 {
	t.Helper()
	cp := filepath.Join(t.TempDir(), "copy.db")
	var n int64
	for deadline := time.Now().Add(60 * time.Second); n < min; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d samples of run %q committed in 60 s, want %d", path, n, run, min)
		}
		b, err := os.ReadFile(path)
		if err != nil || os.WriteFile(cp, b, 0o600) != nil {
			continue
		}
		d, err := storage.Open(cp, storage.Options{ReadOnly: true})
		if err != nil {
			continue
		}
		if r, err := d.Run(run); err == nil {
			n = r.Counts.Samples
		}
		d.Close()
	}
	return n
}

// TestRecorderKilledKeepsCommittedData kills a real recorder with SIGKILL
// mid-run: the run is listed as incomplete and every sample it committed
// reads back.
func TestRecorderKilledKeepsCommittedData(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "k.db")
	cmd := exec.Command(exe, "--db", db, "record", "--source", "sim", "--duration", "60s", "--interval", "5ms", "--procs", "--name", "killed")
	cmd.Env = append(os.Environ(), "MEMREC_AS_MAIN=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	seen := waitForCommitted(t, db, "killed", 100) // at 5 ms on 2 GPUs a second holds 400
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()

	out, errs, code := run(t, db, "", "runs", "--check")
	if code != 0 || !strings.Contains(out, "killed") || !strings.Contains(out, "incomplete") {
		t.Fatalf("%d %q %q", code, out, errs)
	}
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := d.Run("killed")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, g := range r.GPUs {
		it := d.DeviceSamples(r, g.Index, storage.MinTime, storage.MaxTime)
		for it.Next() {
			n++
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
	}
	// Committed counts and readable samples agree, and hold at least what
	// was committed before the kill.
	if n != r.Counts.Samples || n < seen {
		t.Fatalf("%d samples readable, run says %d; %d were committed before the kill", n, r.Counts.Samples, seen)
	}
}

// TestRecordNativeWithDriverLibrary runs memrec record as a process against
// a stand-in for the driver's NVML library (recorder/testdata/fakenvml.c,
// found through LD_LIBRARY_PATH as libnvidia-ml.so.1): the default path,
// sampling on the native thread. Then it kills such a recording with
// SIGKILL: what was committed stays readable.
func TestRecordNativeWithDriverLibrary(t *testing.T) {
	t.Parallel()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the fake NVML library")
	}
	lib := t.TempDir()
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(lib, "libnvidia-ml.so.1"), "../../recorder/testdata/fakenvml.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "n.db")
	memrec := func(args ...string) *exec.Cmd {
		cmd := exec.Command(exe, append([]string{"--db", db}, args...)...)
		cmd.Env = append(os.Environ(), "MEMREC_AS_MAIN=1", "LD_LIBRARY_PATH="+lib)
		return cmd
	}
	out, err := memrec("record", "--name", "native", "--interval", "1ms", "--procs", "--duration", "500ms").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "sampled on a native thread") || !strings.Contains(string(out), "0 failed or lost") {
		t.Fatalf("%v\n%s", err, out)
	}

	kill := memrec("record", "--name", "killed", "--interval", "1ms", "--procs", "--duration", "60s")
	if err := kill.Start(); err != nil {
		t.Fatal(err)
	}
	waitForCommitted(t, db, "killed", 2*100) // drains and timed commits of both GPUs
	kill.Process.Signal(syscall.SIGKILL)
	kill.Wait()

	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for _, tc := range []struct {
		name     string
		complete bool
		min      int64
	}{{"native", true, 100}, {"killed", false, 100}} {
		r, err := d.Run(tc.name)
		if err != nil || r.Complete != tc.complete || len(r.GPUs) != 2 || r.GPUs[1].Name != "Fake GPU" || r.Recorder.Driver != "fake-1.0" {
			t.Fatalf("%s: %+v %v", tc.name, r, err)
		}
		for _, g := range r.GPUs {
			var n, procs int64
			for it := d.DeviceSamples(r, g.Index, storage.MinTime, storage.MaxTime); it.Next(); {
				n++
			}
			for it := d.ProcSamples(r, g.Index, 4000+g.Index, storage.MinTime, storage.MaxTime); it.Next(); {
				procs++
			}
			if n < tc.min || procs == 0 || procs > n/10 {
				t.Errorf("%s GPU %d: %d device samples, %d process samples readable", tc.name, g.Index, n, procs)
			}
		}
	}
}

// TestRecordWhileAReaderHoldsTheDatabase: `memrec export RUN | less` holds
// the file for the whole recording; record says so and fails without a
// command, and with one runs it and passes its exit code on.
func TestRecordWhileAReaderHoldsTheDatabase(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	r, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--duration", "1500ms", "--name", "held")
	for _, want := range []string{"samples are held in memory", "NOT RECORDED: " + db + " stayed locked by another process", "nothing was recorded"} {
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("%d, stderr lacks %q:\n%s", code, want, errs)
		}
	}
	_, errs, code = run(t, db, "", "record", "--source", "sim", "--name", "held", "--", "sh", "-c", "exit 3")
	if code != 3 || !strings.Contains(errs, "stayed locked") {
		t.Errorf("%d %s", code, errs)
	}
}

// TestDiskFullAtStartLeavesNoFile: a recorder that cannot write the new
// database's first pages (here a file size limit of 0, as a full disk)
// removes the empty file it made, so nothing later trips over it.
func TestDiskFullAtStartLeavesNoFile(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "full.db")
	cmd := exec.Command("sh", "-c", `ulimit -f 0 && exec "$0" --db "$1" record --source sim --duration 200ms`, exe, db)
	cmd.Env = append(os.Environ(), "MEMREC_AS_MAIN=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "file too large") {
		t.Fatalf("%v\n%s", err, out)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("the failed start left a file: %v", err)
	}
}

// TestForeignFileRefusedByEveryCommand: another program's bbolt file is
// refused by readers and writers (runs --check does not panic) and is left
// byte for byte as it was; rm and tag of a missing file create nothing.
func TestForeignFileRefusedByEveryCommand(t *testing.T) {
	dir := t.TempDir()
	foreign := filepath.Join(dir, "other.db")
	b, err := bolt.Open(foreign, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("widgets")); return err })
	b.Close()
	before, _ := os.ReadFile(foreign)
	for _, args := range [][]string{{"runs"}, {"runs", "--check"}, {"rm", "x"}, {"tag", "x", "a=b"}, {"import", realRun}, {"analyze", "x"}} {
		_, errs, code := run(t, foreign, "", args...)
		if code != 1 || !strings.Contains(errs, "not a memrec database") {
			t.Errorf("%v: %d %q", args, code, errs)
		}
	}
	if after, _ := os.ReadFile(foreign); !bytes.Equal(before, after) {
		t.Error("the foreign file changed")
	}
	missing := filepath.Join(dir, "typo.db")
	for _, args := range [][]string{{"rm", "x"}, {"tag", "x", "a=b"}} {
		if _, errs, code := run(t, missing, "", args...); code != 1 || !strings.Contains(errs, "no database") {
			t.Errorf("%v: %d %q", args, code, errs)
		}
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Error("rm or tag created a database")
	}
}

// TestDiskFullSummarySaysWhatIsLost: the file can be created but not grown
// (a file size limit of 32 KiB, as a full disk), so no commit succeeds; the
// summary counts the samples as lost and says how much of the recording
// the file lacks.
func TestDiskFullSummarySaysWhatIsLost(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(t.TempDir(), "full.db")
	cmd := exec.Command("sh", "-c", `ulimit -f 64 && exec "$0" --db "$1" record --source sim --duration 1500ms --interval 5ms`, exe, db)
	cmd.Env = append(os.Environ(), "MEMREC_AS_MAIN=1")
	out, _ := cmd.CombinedOutput()
	text := string(out)
	m := regexp.MustCompile(`samples +(\d+) device.* (\d+) failed or lost`).FindStringSubmatch(text)
	if m == nil || m[1] != m[2] || m[1] == "0" {
		t.Fatalf("the samples line does not count every device sample as lost:\n%s", text)
	}
	s := regexp.MustCompile(`NOT STORED: the last ([0-9.]+) s of the recording`).FindStringSubmatch(text)
	if s == nil {
		t.Fatalf("no NOT STORED line:\n%s", text)
	}
	// Nothing was ever committed: the file lacks the whole recording.
	if secs, _ := strconv.ParseFloat(s[1], 64); secs < 1.2 || secs > 3 {
		t.Errorf("says the last %s s are not stored, want about 1.5:\n%s", s[1], text)
	}
}

// TestSocketSurvivesRunningOutOfDescriptors runs a recorder with a small
// descriptor limit, takes all its descriptors with idle connections, lets
// them go, and sends a mark: the recorder kept accepting, and its summary
// counts the failed accepts.
func TestSocketSurvivesRunningOutOfDescriptors(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	sockFile := filepath.Join(dir, "socket")
	// The command writes the socket's path for the test, then waits until
	// the test is done (at most a minute).
	cmd := exec.Command("sh", "-c", `ulimit -n 40 && exec "$0" --db "$1" record --source sim --name fds -- sh -c 'echo "$MEMREC_SOCKET" > "$SOCKFILE.tmp" && mv "$SOCKFILE.tmp" "$SOCKFILE" && i=0 && while [ ! -e "$SOCKFILE.done" ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done'`, exe, db)
	cmd.Env = append(os.Environ(), "MEMREC_AS_MAIN=1", "SOCKFILE="+sockFile)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := func() { os.WriteFile(sockFile+".done", nil, 0o644) }
	defer done()
	var sock string
	for deadline := time.Now().Add(20 * time.Second); sock == ""; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(sockFile); err == nil {
			sock = strings.TrimSpace(string(b))
		} else if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no socket path:\n%s", out.String())
		}
	}
	var held []net.Conn
	for range 60 { // more than the recorder has descriptors left
		c, err := net.Dial("unix", sock)
		if err != nil {
			break // the backlog is full
		}
		held = append(held, c)
	}
	time.Sleep(300 * time.Millisecond) // the recorder fails to accept meanwhile
	for _, c := range held {
		c.Close()
	}
	if err := recorder.Send(sock, storage.NewMark(time.Now().UnixNano(), wire.MarkEvent)); err != nil {
		t.Fatalf("send after the descriptors came back: %v", err)
	}
	done() // the mark was taken: the command may end
	cmd.Wait()
	text := out.String()
	if !strings.Contains(text, "failed accepts retried") || !strings.Contains(text, "(1 from the socket)") {
		t.Fatalf("%d connections held; summary:\n%s", len(held), text)
	}
}

// TestRecordCommandNotStarted: a command that cannot be started exits 127
// with a message naming it, and its run is stored as not started, never
// complete.
func TestRecordCommandNotStarted(t *testing.T) {
	db := filepath.Join(t.TempDir(), "ns.db")
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--name", "ns", "--", "nosuchcommand-memrec")
	if code != 127 || !strings.Contains(errs, "nosuchcommand-memrec") || !strings.Contains(errs, "could not be started") {
		t.Fatalf("exit %d, want 127 and a message naming the command:\n%s", code, errs)
	}
	out, _, _ := run(t, db, "", "runs")
	if !strings.Contains(out, "command not started") || strings.Contains(out, "complete") {
		t.Errorf("runs:\n%s", out)
	}
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, err := d.Run("ns")
	if err != nil || r.Complete || r.Recorder.NotStarted == "" {
		t.Errorf("stored %+v, %v: want incomplete and why", r, err)
	}
}

// TestReadersWhileRecording: while a recording writes the database, runs,
// analyze of another run and export of the live run (up to its last
// commit) answer; the recording then ends complete, with no failed commit.
func TestReadersWhileRecording(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "live.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatalf("import: %s", errs)
	}
	recorded := make(chan string, 1)
	go func() {
		_, errs, _ := run(t, db, "", "record", "--source", "sim", "--name", "live", "--duration", "3s", "--interval", "2ms", "--sim-gpus", "4")
		recorded <- errs
	}()
	// The live run appears once its first commit is in.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		out, _, _ := run(t, db, "", "runs")
		if strings.Contains(out, "live") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the live run never showed in runs:\n%s", out)
		}
	}
	reads, samples := 0, 0
	for done := false; !done; {
		select {
		case errs := <-recorded:
			if !strings.Contains(errs, `run "live" (complete)`) || strings.Contains(errs, "failed commits") {
				t.Errorf("the recording:\n%s", errs)
			}
			done = true
			continue
		default:
		}
		out, errs, code := run(t, db, "", "runs")
		if code != 0 || !strings.Contains(out, "real-resnet18-bs128") {
			t.Fatalf("runs while recording: %d %s %s", code, out, errs)
		}
		if _, errs, code := run(t, db, "", "analyze", "real-resnet18-bs128"); code != 0 {
			t.Fatalf("analyze of another run while recording: %d %s", code, errs)
		}
		out, errs, code = run(t, db, "", "export", "live")
		if code != 0 || !strings.HasPrefix(out, `{"type":"run","name":"live"`) {
			t.Fatalf("export of the live run while recording: %d %.300s %s", code, out, errs)
		}
		// What was committed, and only that, grows from read to read.
		n := strings.Count(out, `{"type":"sample"`)
		if n < samples {
			t.Fatalf("the live run had %d samples, then %d", samples, n)
		}
		samples = n
		reads++
	}
	if reads == 0 || samples == 0 {
		t.Errorf("%d reads while recording, the last saw %d samples of the live run", reads, samples)
	}
}
