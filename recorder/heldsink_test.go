package recorder

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// lockedDB makes a database file and holds it open read-only, as
// `memrec export RUN | less` does: a writer cannot open it until release.
func lockedDB(t *testing.T) (path string, release func()) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "locked.db")
	w, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A run of its own, so that the file is kept (a new file nothing was
	// stored in is removed at Close).
	if _, err := jsonl.Import(w, []jsonl.Source{{Name: "other.jsonl", R: strings.NewReader(`{"type":"run","name":"other","start_ns":1700000000000000000}`)}}, jsonl.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	w.Close()
	r, err := storage.Open(path, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return path, func() { r.Close() }
}

// TestRecordWaitsForLockedDatabase: a reader holds the database when the
// recording starts; the samples are held in memory and written once it
// lets go, from the very first tick.
func TestRecordWaitsForLockedDatabase(t *testing.T) {
	path, release := lockedDB(t)
	_, err := storage.Open(path, storage.Options{LockTimeout: 10 * time.Millisecond})
	if !errors.Is(err, storage.ErrLocked) {
		t.Fatalf("the reader does not lock out a writer: %v", err)
	}
	// The recording ends once the fourth attempt has opened the file, as
	// late as a loaded machine makes that (the minute only ends a hang).
	calls := 0
	stop := make(chan os.Signal, 1)
	open := func() (*storage.DB, error) {
		calls++
		if calls == 4 {
			release()
		}
		db, err := storage.Open(path, storage.Options{LockTimeout: 10 * time.Millisecond})
		if err == nil {
			stop <- syscall.SIGTERM
		}
		return db, err
	}
	var log syncBuffer
	res, err := Record(context.Background(), Options{
		Open: func(run storage.Run) (Store, error) { return HeldStore(open, run, 0, &log), nil },
		Run:  storage.Run{Name: "late"}, Source: simSource(t),
		Interval: 10 * time.Millisecond, Duration: time.Minute, Log: &log, Signals: stop,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.DBOpened || res.DBHeld == 0 || res.DBWait <= 0 || res.DBLost.Total() != 0 || calls != 4 {
		t.Fatalf("opened %v, held %d, waited %v, lost %+v, %d opens\n%s", res.DBOpened, res.DBHeld, res.DBWait, res.DBLost, calls, log.String())
	}
	db, err := storage.Open(path, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Run("late")
	if err != nil || !r.Complete {
		t.Fatalf("%+v %v", r, err)
	}
	if r.Counts.Samples != res.Sampler.Samples {
		t.Errorf("stored %d device samples, sampled %d", r.Counts.Samples, res.Sampler.Samples)
	}
	it := db.DeviceSamples(r, r.GPUs[0].Index, storage.MinTime, storage.MaxTime)
	// The first stored sample was taken while the file was still locked.
	if !it.Next() || it.At().T-r.StartNS >= int64(res.DBWait) {
		t.Errorf("the ticks taken while the file was locked (the first %v) are missing", res.DBWait)
	}
}

// TestRecordDatabaseLockedThroughout: the file stays locked; the recording
// still runs and says what it lost.
func TestRecordDatabaseLockedThroughout(t *testing.T) {
	path, _ := lockedDB(t)
	open := func() (*storage.DB, error) {
		return storage.Open(path, storage.Options{LockTimeout: 10 * time.Millisecond})
	}
	res, err := Record(context.Background(), Options{
		Open: func(run storage.Run) (Store, error) { return HeldStore(open, run, 0, io.Discard), nil },
		Run:  storage.Run{Name: "never"}, Source: simSource(t),
		Interval: 10 * time.Millisecond, Duration: 300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.DBOpened || res.DBLost.Samples != res.Sampler.Samples || res.Sampler.Samples == 0 {
		t.Fatalf("opened %v, lost %+v of %d samples", res.DBOpened, res.DBLost, res.Sampler.Samples)
	}
}

func TestHeldSinkBoundsAndReplaysInOrder(t *testing.T) {
	h := newHeldSink(100 * devSize)
	for i := range 1000 {
		h.AppendDevice(storage.DeviceSample{T: int64(i), GPU: 0, Used: int64(i)})
		if i%10 == 0 {
			m := storage.NewMark(int64(i), wire.MarkStep)
			m.Step = i
			h.AppendMark(m)
		}
	}
	lost := h.Lost()
	var s memSink
	written := h.attach(&s)
	if h.size > h.max {
		t.Errorf("held %d bytes, bound %d", h.size, h.max)
	}
	if lost.Samples+int64(len(s.dev)) != 1000 || lost.Marks+int64(len(s.marks)) != 100 || written != int64(len(s.dev)+len(s.marks)) {
		t.Fatalf("lost %+v, wrote %d device samples and %d marks (%d)", lost, len(s.dev), len(s.marks), written)
	}
	// What is kept is the newest, in order, with no gap.
	for i, d := range s.dev {
		if want := int64(1000 - len(s.dev) + i); d.T != want {
			t.Fatalf("sample %d has time %d, want %d", i, d.T, want)
		}
	}
	// After attach, samples pass straight through.
	h.AppendDevice(storage.DeviceSample{T: 5000})
	if last := s.dev[len(s.dev)-1]; last.T != 5000 || h.size != 0 {
		t.Errorf("after attach: last %d, held %d bytes", last.T, h.size)
	}
}

// TestHeldSinkBoundsEveryKind: a held recording of every kind, budget
// lines among them, kept over its bound: each kind is trimmed, nothing
// panics, and every item appended is either written or counted lost.
func TestHeldSinkBoundsEveryKind(t *testing.T) {
	appendKind := []func(h *heldSink, i int){
		heldDevice: func(h *heldSink, i int) { h.AppendDevice(storage.DeviceSample{T: int64(i)}) },
		heldProc:   func(h *heldSink, i int) { h.AppendProc(storage.ProcSample{T: int64(i), PID: 7}) },
		heldTorch:  func(h *heldSink, i int) { h.AppendTorch(storage.TorchSample{T: int64(i)}) },
		heldMark:   func(h *heldSink, i int) { h.AppendMark(storage.NewMark(int64(i), wire.MarkStep)) },
		heldSites:  func(h *heldSink, i int) { h.AppendSites([]storage.SiteSample{{T: int64(i), Name: "f"}}) },
		heldBudget: func(h *heldSink, i int) { h.AppendBudget(storage.BudgetSample{T: int64(i)}) },
	}
	if len(appendKind) != int(heldKinds) {
		t.Fatalf("the test appends %d kinds, the sink holds %d", len(appendKind), heldKinds)
	}
	for _, budgetOnly := range []bool{false, true} {
		h := newHeldSink(50 * budgSize)
		const rounds = 500
		for i := range rounds {
			if budgetOnly {
				appendKind[heldBudget](h, i)
				continue
			}
			for _, add := range appendKind {
				add(h, i)
			}
		}
		if h.size > h.max {
			t.Errorf("held %d bytes, bound %d", h.size, h.max)
		}
		lost := h.Lost()
		var s memSink
		h.attach(&s)
		kept := []int64{int64(len(s.dev)), int64(len(s.procs)), int64(len(s.torch)), int64(len(s.marks)), int64(len(s.sites)), int64(len(s.budget))}
		gone := []int64{lost.Samples, lost.ProcSamples, lost.TorchSamples, lost.Marks, lost.Sites, lost.Budgets}
		for k := range heldKinds {
			want := int64(rounds)
			if budgetOnly && k != heldBudget {
				want = 0
			}
			if kept[k]+gone[k] != want {
				t.Errorf("budget only %v, kind %d: %d written + %d lost, appended %d", budgetOnly, k, kept[k], gone[k], want)
			}
		}
		if gone[heldBudget] == 0 {
			t.Errorf("budget only %v: no budget line was dropped, over a bound of %d bytes", budgetOnly, h.max)
		}
	}
}
