package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/storage"
)

// TestRmOfARecordingRun: rm of a run that a recording writes (this
// process's Appender, on a file it holds only around commits) is refused,
// --force too, and the run is left whole; once the recording ends, rm
// removes it.
func TestRmOfARecordingRun(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	w, err := storage.Open(db, storage.Options{ShortLock: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := w.NewAppender(storage.Run{Name: "live", GPUs: []storage.GPU{{Index: 0}}}, storage.AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if err := a.AppendDevice(storage.DeviceSample{T: 2e18 + int64(i)*1e6, Used: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"rm", "live"}, {"rm", "--force", "live"}} {
		if out, errs, code := run(t, db, "", args...); code != 1 || !strings.Contains(errs, `run "live": a recorder is writing the run`) || strings.Contains(out, "removed") {
			t.Errorf("%v while recording: exit %d, %q %q", args, code, out, errs)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatalf("the recording's end after rm was refused: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if out, errs, code := run(t, db, "", "runs"); code != 0 || !strings.Contains(out, "live") || !strings.Contains(out, "complete") {
		t.Fatalf("runs after the recording: %d %q %q", code, out, errs)
	}
	if out, errs, code := run(t, db, "", "rm", "live"); code != 0 || !strings.Contains(out, "removed live") {
		t.Errorf("rm after the recording: %d %q %q", code, out, errs)
	}
}
