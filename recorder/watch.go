package recorder

import (
	"net/http"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
)

// WatchRing is how many of each line's newest samples a Watch keeps as
// they are (11 minutes at 100 Hz, 1 MiB a line); older ones are kept in
// its pyramid's buckets only (0.56 B a sample), so a day of 8 GPUs at
// 100 Hz takes about 100 MB.
const WatchRing = 1 << 16

// WatchSiteRows bounds the allocation-site rows a Watch keeps (a
// snapshot's rows are its top sites and a few totals, 100 B or so each):
// past it the oldest snapshots give way (SiteRows says how many).
const WatchSiteRows = 1 << 18

// Watch is a recording as it happens, for the live page (package viewer,
// wired in cmd): the run once it is known, and an index of its lines fed
// from the recording's sink, in memory. The page reads the index, never
// the database the recorder writes. It is safe for concurrent use; the
// zero value is not usable, use NewWatch.
type Watch struct {
	index *series.Index
	run   atomic.Pointer[storage.Run]
	last  atomic.Int64 // newest sample's time
	// Page, if set before Record starts, is served at / and /api/ on the
	// metrics listener beside /metrics (the viewer's page over this
	// watch).
	Page http.Handler

	smu       sync.Mutex
	sites     []storage.SiteSample // the site snapshots' rows, in arrival order
	sitesGone int                  // snapshots that gave way to WatchSiteRows
}

// addSites keeps one snapshot's rows, the oldest snapshots giving way past
// WatchSiteRows.
func (w *Watch) addSites(rows []storage.SiteSample) {
	w.smu.Lock()
	defer w.smu.Unlock()
	w.sites = append(w.sites, rows...)
	if len(w.sites) <= WatchSiteRows {
		return
	}
	// Past the bound, down to three quarters of it at once: one copy for
	// many snapshots, not one for each.
	cut := 0
	for len(w.sites)-cut > WatchSiteRows*3/4 {
		first := w.sites[cut]
		cut++
		for cut < len(w.sites) && w.sites[cut].T == first.T && w.sites[cut].GPU == first.GPU && w.sites[cut].PID == first.PID {
			cut++
		}
		w.sitesGone++
	}
	w.sites = slices.Delete(w.sites, 0, cut)
}

// SiteRows returns a copy of the site rows of GPU gpu kept so far, in
// arrival order, and how many of the recording's snapshots (of any GPU)
// gave way to the bound.
func (w *Watch) SiteRows(gpu int) (rows []storage.SiteSample, gone int) {
	w.smu.Lock()
	defer w.smu.Unlock()
	for _, r := range w.sites {
		if r.GPU == gpu {
			rows = append(rows, r)
		}
	}
	return rows, w.sitesGone
}

// SiteGPUs lists the GPUs with site rows kept, in increasing order.
func (w *Watch) SiteGPUs() []int {
	w.smu.Lock()
	defer w.smu.Unlock()
	var gpus []int
	for _, r := range w.sites {
		if !slices.Contains(gpus, r.GPU) {
			gpus = append(gpus, r.GPU)
		}
	}
	slices.Sort(gpus)
	return gpus
}

// NewWatch returns a watch with nothing recorded yet.
func NewWatch() *Watch { return &Watch{index: series.NewIndex(WatchRing)} }

// Index is the recording's lines, marks and steps so far.
func (w *Watch) Index() *series.Index { return w.index }

// Run is the run being recorded, its end the newest sample's time; false
// before the recording has started.
func (w *Watch) Run() (storage.Run, bool) {
	r := w.run.Load()
	if r == nil {
		return storage.Run{}, false
	}
	run := *r
	run.EndNS = max(run.StartNS, w.last.Load())
	run.Complete = false
	return run, true
}

func (w *Watch) start(run storage.Run) { w.run.Store(&run) }

func (w *Watch) seen(t int64) {
	for {
		cur := w.last.Load()
		if t <= cur || w.last.CompareAndSwap(cur, t) {
			return
		}
	}
}

// wrap returns a sink that adds every value to the index and passes it on
// to next, whatever next does with it.
func (w *Watch) wrap(next Sink) Sink { return &watchSink{next: next, w: w} }

type watchSink struct {
	next Sink
	w    *Watch
}

func (s *watchSink) AppendDevice(d storage.DeviceSample) error {
	s.w.index.AddDevice(d)
	s.w.seen(d.T)
	return s.next.AppendDevice(d)
}

func (s *watchSink) AppendProc(p storage.ProcSample) error { return s.next.AppendProc(p) }

func (s *watchSink) AppendTorch(t storage.TorchSample) error {
	s.w.index.AddTorch(t)
	s.w.seen(t.T)
	return s.next.AppendTorch(t)
}

func (s *watchSink) AppendMark(m storage.Mark) error {
	s.w.index.AddMark(m)
	return s.next.AppendMark(m)
}

func (s *watchSink) AppendSites(rows []storage.SiteSample) error {
	s.w.addSites(rows)
	return s.next.AppendSites(rows)
}

func (s *watchSink) AppendBudget(b storage.BudgetSample) error {
	s.w.index.AddBudget(b)
	return s.next.AppendBudget(b)
}
