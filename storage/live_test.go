package storage

import (
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// TestDeleteRefusesALiveRecording: while a ShortLock writer records a
// run, another handle's Delete of it is refused (with Force too), and the
// recording's later commits and its end find the run whole. A run whose
// marker names a process that is gone is removed only with Force; once
// the writer's last commit has cleared the marker, Delete needs nothing.
func TestDeleteRefusesALiveRecording(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	w, err := Open(path, Options{ShortLock: true})
	if err != nil {
		t.Fatal(err)
	}
	live, err := w.NewAppender(Run{Name: "live", GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		must(t, live.AppendDevice(DeviceSample{T: 2e18 + int64(i)*1e6, Used: int64(i)}))
	}
	must(t, live.Commit())

	other, err := Open(path, Options{LockTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		if _, err := other.Delete("live", DeleteOptions{Force: force}); !errors.Is(err, ErrRecording) {
			t.Errorf("delete (force %v) of a run being recorded: %v, want ErrRecording", force, err)
		}
	}
	must(t, other.Close())
	for i := 100; i < 200; i++ {
		must(t, live.AppendDevice(DeviceSample{T: 2e18 + int64(i)*1e6, Used: int64(i)}))
	}
	must(t, live.Close())
	must(t, w.Close())

	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if run, n := countDevice(t, db, "live"); !run.Complete || n != 200 || run.Writer != nil {
		t.Fatalf("after the end: complete %v, %d samples, writer %+v; want complete, 200, none", run.Complete, n, run.Writer)
	}

	// A recorder that died: its marker names a process that is gone.
	dead := exec.Command("true")
	must(t, dead.Run())
	crashed, err := db.NewAppender(Run{Name: "crashed", GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	run := crashed.Committed()
	run.Writer.PID = dead.Process.Pid
	must(t, db.bolt.Update(func(tx *bolt.Tx) error { return putRun(tx, run) }))
	if _, err := db.Delete("crashed", DeleteOptions{}); !errors.Is(err, ErrStaleWriter) {
		t.Errorf("delete of a dead recorder's run without force: %v, want ErrStaleWriter", err)
	}
	if _, err := db.Delete("crashed", DeleteOptions{Force: true}); err != nil {
		t.Errorf("delete with force: %v", err)
	}
	if _, err := db.Delete("live", DeleteOptions{}); err != nil {
		t.Errorf("delete of a finished run: %v", err)
	}
	if runs, _ := db.Runs(); len(runs) != 0 {
		t.Errorf("runs left: %v", runs)
	}
}
