package recorder

import (
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/memrec/memrec/storage"
)

// ErrStopped is what a store returns once a bug stopped the recording.
var ErrStopped = errors.New("recording stopped by an internal error")

// guard turns a panic in one of the recorder's goroutines into the end of
// the recording, said once on log: memrec then keeps waiting for the job
// and exits with its exit code, so that a bug of memrec's never kills the
// job's parent and orphans the job. It is safe for concurrent use.
type guard struct {
	log     io.Writer
	tripped atomic.Bool
	once    sync.Once
}

// catch is deferred by a goroutine of the recorder; it recovers a panic
// and stops the recording.
func (g *guard) catch(where string) {
	if v := recover(); v != nil {
		g.trip(where, v)
	}
}

func (g *guard) trip(where string, v any) {
	g.tripped.Store(true)
	g.once.Do(func() {
		fmt.Fprintf(g.log, "memrec: BUG: recording stopped (%s: %v); the command runs on and memrec waits for it; what was committed is kept. Please report this with the stack below.\n%s",
			where, v, debug.Stack())
	})
}

// guardedStore is a Store behind a guard: a panic in it stops the
// recording (later appends are refused with ErrStopped) and Finish still
// saves what the store can.
type guardedStore struct {
	s Store
	g *guard
}

func (gs *guardedStore) do(where string, f func() error) (err error) {
	if gs.g.tripped.Load() {
		return ErrStopped
	}
	defer func() {
		if v := recover(); v != nil {
			gs.g.trip(where, v)
			err = ErrStopped
		}
	}()
	return f()
}

func (gs *guardedStore) AppendDevice(s storage.DeviceSample) error {
	return gs.do("store", func() error { return gs.s.AppendDevice(s) })
}
func (gs *guardedStore) AppendProc(s storage.ProcSample) error {
	return gs.do("store", func() error { return gs.s.AppendProc(s) })
}
func (gs *guardedStore) AppendTorch(s storage.TorchSample) error {
	return gs.do("store", func() error { return gs.s.AppendTorch(s) })
}
func (gs *guardedStore) AppendMark(m storage.Mark) error {
	return gs.do("store", func() error { return gs.s.AppendMark(m) })
}
func (gs *guardedStore) AppendSites(rows []storage.SiteSample) error {
	return gs.do("store", func() error { return gs.s.AppendSites(rows) })
}
func (gs *guardedStore) AppendBudget(s storage.BudgetSample) error {
	return gs.do("store", func() error { return gs.s.AppendBudget(s) })
}

// Finish finishes the store even after a panic in it (to keep what it
// committed); a panic in Finish itself leaves the run as last committed.
func (gs *guardedStore) Finish(rec storage.Recorder) (r StoreResult) {
	defer func() {
		if v := recover(); v != nil {
			gs.g.trip("finishing the store", v)
			r = StoreResult{LastErr: ErrStopped}
		}
	}()
	return gs.s.Finish(rec)
}
