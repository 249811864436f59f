package main

import (
	"fmt"
	"net"
	"time"

	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/viewer"
)

// watchSource is the viewer's source over a recording as it happens: the
// one run, its index in the recorder's memory, no database.
type watchSource struct{ w *recorder.Watch }

func (s watchSource) Runs() ([]storage.Run, error) {
	run, ok := s.w.Run()
	if !ok {
		return nil, nil
	}
	return []storage.Run{run}, nil
}

func (s watchSource) Index(storage.Run) (*series.Index, viewer.Reader, error) {
	return s.w.Index(), nil, nil
}

// SiteGPUs and Sites make the live page draw the sites charts, from the
// snapshots the recording kept in memory.
func (s watchSource) SiteGPUs(storage.Run) ([]int, error) { return s.w.SiteGPUs(), nil }

func (s watchSource) Sites(run storage.Run, gpu int) (*sites.Sites, error) {
	rows, _ := s.w.SiteRows(gpu)
	return sites.SitesOf(gpu, rows), nil
}

// maxViewConns bounds the connections the live page's server holds: a
// browser opens six, a few tabs and a script fit; more wait for one.
const maxViewConns = 32

// liveView sets up the live page when --view-addr or --metrics-addr asks
// for it: the watch that feeds it, and for --view-addr its own server.
// stop ends that server.
func liveView(o *recordOptions, opts *recorder.Options) (stop func(), err error) {
	stop = func() {}
	if o.viewAddr == "" && o.metricsAddr == "" {
		return stop, nil
	}
	w := recorder.NewWatch()
	w.Page = viewer.Handler(watchSource{w}, viewer.Options{Live: true})
	opts.Watch = w
	if o.viewAddr == "" {
		return stop, nil
	}
	ln, err := net.Listen("tcp", loopbackUnlessNamed(o.viewAddr))
	if err != nil {
		return stop, fmt.Errorf("--view-addr %q: %w", o.viewAddr, err)
	}
	fmt.Fprintf(o.io.Err, "memrec: live page at http://%s/\n", ln.Addr())
	lim := recorder.DefaultServeLimits
	lim.Conns, lim.Idle, lim.Write = maxViewConns, time.Minute, 30*time.Second
	return recorder.ServeHTTP(ln, recorder.HostGuard(w.Page, o.viewAddr, ln.Addr()), lim), nil
}
