package recorder

import (
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// TestWatchKeepsSitesBounded: a Watch keeps the site rows of the
// snapshots it sees, by GPU, and past WatchSiteRows the oldest whole
// snapshots give way, down to three quarters of the bound.
func TestWatchKeepsSitesBounded(t *testing.T) {
	w := NewWatch()
	sink := w.wrap(discard{})
	const per = 1000 // rows a snapshot
	snaps := WatchSiteRows/per + 10
	for i := range snaps {
		rows := make([]storage.SiteSample, per)
		for j := range rows {
			rows[j] = storage.SiteSample{T: int64(i + 1), GPU: i % 2, PID: 7, File: "t.py", Line: j}
		}
		rows[0].File = wire.SiteUntracked
		if err := sink.AppendSites(rows); err != nil {
			t.Fatal(err)
		}
	}
	r0, gone := w.SiteRows(0)
	r1, _ := w.SiteRows(1)
	if kept := len(r0) + len(r1); kept > WatchSiteRows || kept < WatchSiteRows*3/4-per || kept%per != 0 {
		t.Fatalf("%d rows kept, bound %d", kept, WatchSiteRows)
	}
	if want := snaps - (len(r0)+len(r1))/per; gone != want {
		t.Errorf("%d snapshots gone, want %d", gone, want)
	}
	if r0[0].T <= int64(gone) || r0[len(r0)-1].T != int64(snaps-1) || r1[len(r1)-1].T != int64(snaps) {
		t.Errorf("kept from %d to %d (GPU 0), last on GPU 1 %d; %d gone", r0[0].T, r0[len(r0)-1].T, r1[len(r1)-1].T, gone)
	}
	if g := w.SiteGPUs(); len(g) != 2 || g[0] != 0 || g[1] != 1 {
		t.Errorf("site GPUs %v", g)
	}
}

type discard struct{}

func (discard) AppendDevice(storage.DeviceSample) error { return nil }
func (discard) AppendProc(storage.ProcSample) error     { return nil }
func (discard) AppendTorch(storage.TorchSample) error   { return nil }
func (discard) AppendMark(storage.Mark) error           { return nil }
func (discard) AppendSites([]storage.SiteSample) error  { return nil }
func (discard) AppendBudget(storage.BudgetSample) error { return nil }
