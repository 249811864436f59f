package recorder

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"
	"unsafe"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// DefaultHoldBytes bounds what a recording holds in memory while its
// database is locked by another process (see HeldStore).
const DefaultHoldBytes = 64 << 20

// heldSink holds samples and marks in memory, in arrival order, until a
// sink to write them to exists (the database was locked when the recording
// started). attach replays them into it and from then on passes everything
// straight through. Past max bytes held the oldest quarter is dropped and
// counted. It is safe for concurrent use.
type heldSink struct {
	mu    sync.Mutex
	to    Sink // nil while holding
	order []sampleKind
	dev   []storage.DeviceSample
	proc  []storage.ProcSample
	torch []storage.TorchSample
	marks []storage.Mark
	sites [][]storage.SiteSample
	budg  []storage.BudgetSample
	size  int64
	max   int64
	lost  storage.Counts
	gone  bool // given up: drop everything from now on
}

type sampleKind uint8

const (
	heldDevice sampleKind = iota
	heldProc
	heldTorch
	heldMark
	heldSites
	heldBudget
	// heldKinds is how many kinds there are: per-kind counts are arrays
	// of this length, indexed by kind.
	heldKinds
)

var (
	devSize   = int64(unsafe.Sizeof(storage.DeviceSample{})) + 1
	procSize  = int64(unsafe.Sizeof(storage.ProcSample{})) + 1
	torchSize = int64(unsafe.Sizeof(storage.TorchSample{})) + 1
	markSize  = int64(unsafe.Sizeof(storage.Mark{})) + 1
	siteSize  = int64(unsafe.Sizeof(storage.SiteSample{}))
	budgSize  = int64(unsafe.Sizeof(storage.BudgetSample{})) + 1
)

// sitesSize is what one held site snapshot takes.
func sitesSize(rows []storage.SiteSample) int64 {
	n := int64(1)
	for _, r := range rows {
		n += siteSize + int64(len(r.Reason)+len(r.Name)+len(r.File)+len(r.Func)+len(r.Stack))
	}
	return n
}

func newHeldSink(max int64) *heldSink {
	if max <= 0 {
		max = DefaultHoldBytes
	}
	return &heldSink{max: max}
}

// begin returns the sink to pass a sample to, with the lock released; or
// nil with the lock held, and whether to hold the sample (false: count it
// lost).
func (h *heldSink) begin() (Sink, bool) {
	h.mu.Lock()
	if h.to != nil {
		to := h.to
		h.mu.Unlock()
		return to, false
	}
	return nil, !h.gone
}

func (h *heldSink) AppendDevice(s storage.DeviceSample) error {
	to, hold := h.begin()
	if to != nil {
		return to.AppendDevice(s)
	}
	defer h.mu.Unlock()
	if !hold {
		h.lost.Samples++
		return nil
	}
	h.order, h.dev, h.size = append(h.order, heldDevice), append(h.dev, s), h.size+devSize
	h.bound()
	return nil
}

func (h *heldSink) AppendProc(s storage.ProcSample) error {
	to, hold := h.begin()
	if to != nil {
		return to.AppendProc(s)
	}
	defer h.mu.Unlock()
	if !hold {
		h.lost.ProcSamples++
		return nil
	}
	h.order, h.proc, h.size = append(h.order, heldProc), append(h.proc, s), h.size+procSize
	h.bound()
	return nil
}

func (h *heldSink) AppendBudget(s storage.BudgetSample) error {
	to, hold := h.begin()
	if to != nil {
		return to.AppendBudget(s)
	}
	defer h.mu.Unlock()
	if !hold {
		h.lost.Budgets++
		return nil
	}
	h.order, h.budg, h.size = append(h.order, heldBudget), append(h.budg, s), h.size+budgSize
	h.bound()
	return nil
}

func (h *heldSink) AppendTorch(s storage.TorchSample) error {
	to, hold := h.begin()
	if to != nil {
		return to.AppendTorch(s)
	}
	defer h.mu.Unlock()
	if !hold {
		h.lost.TorchSamples++
		return nil
	}
	h.order, h.torch, h.size = append(h.order, heldTorch), append(h.torch, s), h.size+torchSize
	h.bound()
	return nil
}

func (h *heldSink) AppendMark(m storage.Mark) error {
	to, hold := h.begin()
	if to != nil {
		return to.AppendMark(m)
	}
	defer h.mu.Unlock()
	if !hold {
		h.lost.Marks++
		return nil
	}
	h.order, h.marks = append(h.order, heldMark), append(h.marks, m)
	h.size += markSize + int64(len(m.Kind)+len(m.Text))
	h.bound()
	return nil
}

func (h *heldSink) AppendSites(rows []storage.SiteSample) error {
	to, hold := h.begin()
	if to != nil {
		return to.AppendSites(rows)
	}
	defer h.mu.Unlock()
	if !hold {
		h.lost.Sites += int64(len(rows))
		return nil
	}
	h.order, h.sites = append(h.order, heldSites), append(h.sites, rows)
	h.size += sitesSize(rows)
	h.bound()
	return nil
}

// bound drops the oldest quarter of what is held while it is over max.
func (h *heldSink) bound() {
	for h.size > h.max && len(h.order) > 0 {
		n := max(len(h.order)/4, 1)
		var c [heldKinds]int
		for _, k := range h.order[:n] {
			c[k]++
		}
		h.order = slices.Delete(h.order, 0, n)
		h.dev = slices.Delete(h.dev, 0, c[heldDevice])
		h.proc = slices.Delete(h.proc, 0, c[heldProc])
		h.torch = slices.Delete(h.torch, 0, c[heldTorch])
		h.budg = slices.Delete(h.budg, 0, c[heldBudget])
		for _, m := range h.marks[:c[heldMark]] {
			h.size -= int64(len(m.Kind) + len(m.Text))
		}
		h.marks = slices.Delete(h.marks, 0, c[heldMark])
		for _, rows := range h.sites[:c[heldSites]] {
			h.size -= sitesSize(rows)
			h.lost.Sites += int64(len(rows))
		}
		h.sites = slices.Delete(h.sites, 0, c[heldSites])
		h.size -= int64(c[heldDevice])*devSize + int64(c[heldProc])*procSize + int64(c[heldTorch])*torchSize +
			int64(c[heldMark])*markSize + int64(c[heldBudget])*budgSize
		h.lost.Samples += int64(c[heldDevice])
		h.lost.ProcSamples += int64(c[heldProc])
		h.lost.TorchSamples += int64(c[heldTorch])
		h.lost.Marks += int64(c[heldMark])
		h.lost.Budgets += int64(c[heldBudget])
	}
}

// attach writes what is held into to, in arrival order, and passes
// everything after straight to it. It returns how many were written; one
// that to refuses is counted as lost.
func (h *heldSink) attach(to Sink) (written int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var d, p, t, m, st, b int
	for _, k := range h.order {
		var err error
		switch k {
		case heldDevice:
			err = to.AppendDevice(h.dev[d])
			d++
		case heldProc:
			err = to.AppendProc(h.proc[p])
			p++
		case heldTorch:
			err = to.AppendTorch(h.torch[t])
			t++
		case heldMark:
			err = to.AppendMark(h.marks[m])
			m++
		case heldSites:
			err = to.AppendSites(h.sites[st])
			st++
		case heldBudget:
			err = to.AppendBudget(h.budg[b])
			b++
		}
		if err == nil {
			written++
			continue
		}
		switch k {
		case heldDevice:
			h.lost.Samples++
		case heldProc:
			h.lost.ProcSamples++
		case heldTorch:
			h.lost.TorchSamples++
		case heldMark:
			h.lost.Marks++
		case heldSites:
			h.lost.Sites += int64(len(h.sites[st-1]))
		case heldBudget:
			h.lost.Budgets++
		}
	}
	h.release()
	h.to = to
	return written
}

// giveUp drops what is held (counted as lost) and every later sample.
func (h *heldSink) giveUp() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lost.Samples += int64(len(h.dev))
	h.lost.ProcSamples += int64(len(h.proc))
	h.lost.TorchSamples += int64(len(h.torch))
	h.lost.Marks += int64(len(h.marks))
	h.lost.Budgets += int64(len(h.budg))
	for _, rows := range h.sites {
		h.lost.Sites += int64(len(rows))
	}
	h.release()
	h.gone = true
}

func (h *heldSink) release() {
	h.order, h.dev, h.proc, h.torch, h.marks, h.sites, h.budg, h.size = nil, nil, nil, nil, nil, nil, nil, 0
}

// Lost is what was dropped unwritten.
func (h *heldSink) Lost() storage.Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lost
}

// heldStore opens the database in the background while another process
// holds it locked, holding the recording in memory meanwhile, and attaches
// the recording to it once it opens.
type heldStore struct {
	*heldSink
	errs    *commitErrors
	stop    chan struct{}
	done    chan struct{}
	start   time.Time
	wait    time.Duration
	written int64
	db      *storage.DB
	app     *storage.Appender
}

// HeldStore is the Store of a recording whose database another process
// (a reader, say) holds locked: it calls open again and again (each call
// may wait for the lock) while open fails with storage.ErrLocked, holds
// samples and marks in memory meanwhile, up to hold bytes (0:
// DefaultHoldBytes; past it the oldest are dropped and counted), and
// writes them once open returns a database, which Finish closes. Any
// other error ends the attempts: the recording is then not stored. A run
// that took run's name while the file was locked does not: the recording
// is stored under the next free name (NAME-2, ...), and that is logged.
func HeldStore(open func() (*storage.DB, error), run storage.Run, hold int64, log io.Writer) Store {
	fmt.Fprintf(log, "memrec: samples are held in memory and written once the database is free\n")
	l := &heldStore{heldSink: newHeldSink(hold), errs: &commitErrors{log: log},
		stop: make(chan struct{}), done: make(chan struct{}), start: time.Now()}
	go l.openLoop(open, run)
	return l
}

func (l *heldStore) openLoop(open func() (*storage.DB, error), run storage.Run) {
	defer close(l.done)
	defer func() {
		if v := recover(); v != nil {
			fmt.Fprintf(l.errs.log, "memrec: BUG: NOT RECORDING: writing the held samples failed (%v)\n", v)
			l.giveUp()
		}
	}()
	for {
		db, err := open() // waits for the lock
		if err == nil {
			// The name was free when the recording started, or could not
			// be looked at: a run that took it meanwhile must not cost this
			// recording, which is stored under the next free name instead.
			opts := l.errs.options()
			opts.UniqueName = true
			app, err := db.NewAppender(run, opts)
			if err != nil {
				db.Close()
				fmt.Fprintf(l.errs.log, "memrec: WARNING: NOT RECORDING: %v\n", err)
				l.giveUp()
				return
			}
			if got := app.Run().Name; got != run.Name {
				fmt.Fprintf(l.errs.log, "memrec: WARNING: a run named %q was stored while the database was locked; this one is %q\n", run.Name, got)
			}
			l.db, l.app, l.wait = db, app, time.Since(l.start)
			l.written = l.attach(app)
			fmt.Fprintf(l.errs.log, "memrec: the database is free after %s; %d held samples and marks written\n", units.FormatDuration(l.wait.Seconds()), l.written)
			return
		}
		if !errors.Is(err, storage.ErrLocked) {
			fmt.Fprintf(l.errs.log, "memrec: WARNING: NOT RECORDING: %v\n", err)
			l.giveUp()
			return
		}
		select {
		case <-l.stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Finish stops trying (after the attempt under way); if the database never
// opened, what is held is counted as lost.
func (l *heldStore) Finish(rec storage.Recorder) StoreResult {
	close(l.stop)
	<-l.done
	if l.app == nil {
		l.giveUp()
		l.wait = time.Since(l.start)
	}
	r := StoreResult{Wait: l.wait, Held: l.written, Lost: l.Lost()}
	if l.app != nil {
		finishAppender(l.app, rec, l.errs, &r)
		l.db.Close()
	}
	return r
}
