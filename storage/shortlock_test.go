package storage

import (
	"errors"
	"path/filepath"
	"testing"
	"time"
)

// countDevice counts a run's device samples of GPU 0 as a reader sees them.
func countDevice(t *testing.T, db *DB, name string) (Run, int) {
	t.Helper()
	r, err := db.Run(name)
	if err != nil {
		t.Fatal(err)
	}
	it := db.DeviceSamples(r, 0, MinTime, MaxTime)
	n := 0
	for it.Next() {
		n++
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return r, n
}

// TestShortLockReadersWhileWriting: a ShortLock writer lets readers open
// the file between its commits; they read the other runs whole and the
// live run up to its last commit. A reader holding the file defers the
// writer's timed commits but never blocks its appends, and the samples are
// all written once the reader lets go.
func TestShortLockReadersWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	other, err := w.NewAppender(Run{Name: "other", GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		must(t, other.AppendDevice(DeviceSample{T: 1e18 + int64(i)*1e6, Used: int64(i)}))
	}
	must(t, other.Close())
	must(t, w.Close())

	w, err = Open(path, Options{ShortLock: true})
	if err != nil {
		t.Fatal(err)
	}
	live, err := w.NewAppender(Run{Name: "live", GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	add := func(n int) {
		for range n {
			must(t, live.AppendDevice(DeviceSample{T: 2e18 + next*1e6, Used: next}))
			next++
		}
	}
	add(300)
	must(t, live.Commit())
	committed := live.Committed().Counts.Samples

	r, err := Open(path, Options{ReadOnly: true, LockTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("a reader cannot open the file a ShortLock writer has: %v", err)
	}
	if _, n := countDevice(t, r, "other"); n != 500 {
		t.Errorf("other run: %d samples, want 500", n)
	}
	if run, n := countDevice(t, r, "live"); run.Complete || int64(n) != committed || run.Counts.Samples != committed {
		t.Errorf("live run: complete %v, %d samples read, %d counted; want incomplete and %d", run.Complete, n, run.Counts.Samples, committed)
	}

	// The reader still holds the file: appends go on, timed commits wait.
	done := make(chan struct{})
	go func() { add(300); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("appends wait for the reader")
	}
	for deadline := time.Now().Add(10 * time.Second); live.Deferred() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no timed commit was deferred while the reader held the file")
		}
	}
	if got := live.Committed().Counts.Samples; got != committed {
		t.Errorf("committed %d samples while the reader held the file, want %d", got, committed)
	}
	// A writer's lock is refused meanwhile, as a reader's share allows.
	if _, err := Open(path, Options{LockTimeout: 10 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Errorf("a second writer opened the file a reader holds: %v", err)
	}
	must(t, r.Close())

	must(t, live.Close())
	must(t, w.Close())
	r, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if run, n := countDevice(t, r, "live"); !run.Complete || int64(n) != next || live.Lost().Total() != 0 {
		t.Errorf("after the end: complete %v, %d samples of %d, lost %+v", run.Complete, n, next, live.Lost())
	}
}
