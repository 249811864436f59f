package recorder

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/memrec/memrec/storage"
)

// panicStore is a Store with a bug: it panics on the nth device sample,
// and in Finish if finishPanics.
type panicStore struct {
	memSink
	n            int64
	seen         atomic.Int64
	finishPanics bool
}

func (p *panicStore) AppendDevice(s storage.DeviceSample) error {
	if p.seen.Add(1) == p.n {
		var held []int
		_ = held[p.n] // the kind of bug a table's wrong length makes
	}
	return p.memSink.AppendDevice(s)
}

func (p *panicStore) Finish(storage.Recorder) StoreResult {
	if p.finishPanics {
		panic("finish")
	}
	return StoreResult{}
}

// TestPanicInStoreKeepsTheJob: a bug in the store stops the recording,
// never the job: the command runs to its end, is waited for, and its exit
// code is the result; the bug is said once.
func TestPanicInStoreKeepsTheJob(t *testing.T) {
	for _, finishPanics := range []bool{false, true} {
		var log syncBuffer
		store := &panicStore{n: 3, finishPanics: finishPanics}
		start := time.Now()
		res, err := Record(context.Background(), Options{
			Open: func(storage.Run) (Store, error) { return store, nil },
			Run:  storage.Run{Name: "bug"}, Source: simSource(t), Interval: 10 * time.Millisecond,
			Command: []string{"sh", "-c", "sleep 0.5; exit 3"},
			Log:     &log, SocketDir: t.TempDir(),
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 3 || !res.Child {
			t.Errorf("finish panics %v: exit code %d, want the command's 3", finishPanics, res.ExitCode)
		}
		if took := time.Since(start); took < 500*time.Millisecond {
			t.Errorf("finish panics %v: returned after %v, before the command ended", finishPanics, took)
		}
		if !res.Stopped || strings.Count(log.String(), "memrec: BUG: recording stopped") != 1 {
			t.Errorf("finish panics %v: stopped %v; log:\n%s", finishPanics, res.Stopped, log.String())
		}
		if got := store.seen.Load(); got != store.n {
			t.Errorf("finish panics %v: the store got %d device samples after the bug, want none", finishPanics, got-store.n)
		}
	}
}
