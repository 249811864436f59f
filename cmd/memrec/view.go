package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/viewer"
)

type viewOptions struct {
	*globals
	addr string
	runs []string
	// ready, when set, is told the address once the server listens (tests).
	ready func(addr string)
}

func newViewCmd(g *globals) *cobra.Command {
	o := &viewOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "view [RUN...]",
		Short: "Browse runs in a local web page, zoomable down to every sample",
		Long: `Serve a read-only web page over the database: each GPU's memory as a chart
that the server redraws for every window you zoom to, at the chart's width, down
to every sample; hover for each line's value at the cursor and the marks near it.
Several runs are overlaid. With no RUN, the newest run is shown.

The server listens on 127.0.0.1 on a free port unless --addr says otherwise, and
prints the address. It holds the database's lock only while it reads, and a
recording holds it only while it commits (about once a second), so both work on
the same file: a run being recorded shows up to its last commit, and the
recording's own page (record --view-addr) shows it live.`,
		Example: `  memrec view bs64
  memrec view bs64 bs128 --addr 127.0.0.1:8080`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.runs = args
			return runView(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.addr, "addr", "127.0.0.1:0", "address to listen on (port 0: a free one)")
	return cmd
}

func runView(ctx context.Context, o *viewOptions) error {
	src := viewer.NewDBSource(o.dbPath)
	defer src.Close()
	src.Built = func(run storage.Run, samples int64, took time.Duration) {
		fmt.Fprintf(o.io.Err, "memrec: %s: %d samples summarised in %s\n", run.Name, samples, units.FormatDuration(took.Seconds()))
	}
	all, err := src.Runs()
	locked := errors.Is(err, storage.ErrLocked)
	switch {
	case locked && len(o.runs) > 0:
		// The runs cannot be checked yet: serve, and the page asks again.
		fmt.Fprintf(o.io.Err, "memrec: %v: a recording is writing it; the page shows the runs once it is free (the recording's own page: record --view-addr)\n", err)
		all = nil
	case locked:
		fmt.Fprintf(o.io.Err, "memrec: %v: a recording is writing it; the page shows the newest run once it is free (the recording's own page: record --view-addr)\n", err)
	case err != nil:
		return err
	}
	var names []string
	for _, ref := range o.runs {
		if locked {
			names = append(names, ref)
			continue
		}
		run, err := findRun(all, ref)
		if err != nil {
			return err
		}
		names = append(names, run.Name)
	}
	if len(names) == 0 && len(all) > 0 {
		names = []string{all[len(all)-1].Name}
	}
	// The shown runs are summarised before the address is printed, so the
	// page's first paint does not wait for the scan.
	for _, name := range names {
		run, _ := findRun(all, name)
		if _, _, err := src.Index(run); err != nil {
			return err
		}
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %w", o.addr, err)
	}
	h := recorder.HostGuard(viewer.Handler(src, viewer.Options{Runs: names}), o.addr, ln.Addr())
	fmt.Fprintf(o.io.Out, "memrec view: http://%s/ (Ctrl-C to stop)\n", ln.Addr())
	if o.ready != nil {
		o.ready(ln.Addr().String())
	}
	stop := recorder.ServeHTTP(ln, h, viewLimits)
	defer stop()
	<-ctx.Done()
	return nil
}

// viewLimits bound memrec view's server: a browser opens six connections,
// a few tabs and a script fit in maxViewConns, more wait unaccepted. No
// deadline on a whole answer (a window of a long run may take its time to
// read from the file); the viewer gives each write its own
// (viewer.DefaultWriteTimeout).
var viewLimits = recorder.ServeLimits{Conns: maxViewConns, ReadHeader: 5 * time.Second, Idle: time.Minute, HeaderBytes: 8 << 10}

// findRun is the run named ref, or of id ref.
func findRun(all []storage.Run, ref string) (storage.Run, error) {
	for _, r := range all {
		if r.Name == ref || fmt.Sprint(r.ID) == ref {
			return r, nil
		}
	}
	return storage.Run{}, fmt.Errorf("run %q: %w", ref, storage.ErrNoRun)
}
