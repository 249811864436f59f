package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

type sitesOptions struct {
	*globals
	at    string
	epoch int
	diff  bool
	gpu   int
	top   int
	json  bool
}

func newSitesCmd(g *globals) *cobra.Command {
	o := &sitesOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "sites RUN [--at TIME | --epoch N] [--diff A B]",
		Short: "Which lines of code hold GPU memory: growing sites first, then the biggest holders",
		Long: `List a run's allocation sites (recorded with memrec record --sites, or imported
from a PyTorch snapshot). Without flags, per GPU: the sites whose live bytes grow
from snapshot to snapshot, under a heading that says they grow, then the biggest
steady holders at the end. --at and --epoch list one snapshot; --diff compares two
moments, each an epoch (e3, epoch3) or a time since the run's start (90s, 1m30s).`,
		Example: `  memrec sites bs64
  memrec sites bs64 --epoch 3
  memrec sites bs64 --at 2m
  memrec sites bs64 --diff e1 e4`,
		Args: cobra.RangeArgs(1, 3),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.diff != (len(args) == 3) {
				return errors.New("--diff takes two moments after the run (memrec sites RUN --diff A B); without --diff give only the run")
			}
			ctx := cmd.Context()
			return stoppedSaying(ctx, o.io.Err, untilDone(ctx, func() error { return runSites(o, args) }), "stopped before it printed all")
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.at, "at", "", "the snapshot at or before this time since the run's start (90s, 1m30s)")
	f.IntVar(&o.epoch, "epoch", -1, "the snapshot at the end of epoch N")
	f.BoolVar(&o.diff, "diff", false, "compare two moments A and B (epochs e3, or times 90s)")
	f.IntVar(&o.gpu, "gpu", -1, "only this GPU")
	f.IntVar(&o.top, "top", 10, "sites listed per snapshot")
	f.BoolVar(&o.json, "json", false, "print JSON")
	return cmd
}

// moment is an epoch's end or a time since the run's start.
type moment struct {
	epoch int // -1: by time
	t     int64
}

func parseMoment(s string, run storage.Run) (moment, error) {
	e := strings.TrimPrefix(strings.TrimPrefix(s, "epoch"), "e")
	if e != s {
		n, err := strconv.Atoi(e)
		if err != nil || n < 0 {
			return moment{}, fmt.Errorf("moment %q: want an epoch (e3) or a time since the start (90s)", s)
		}
		return moment{epoch: n}, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return moment{}, fmt.Errorf("moment %q: want an epoch (e3) or a time since the start (90s)", s)
	}
	return moment{epoch: -1, t: run.StartNS + d.Nanoseconds()}, nil
}

// pick is the snapshot of a moment: the last snapshot at the end of the
// epoch (or, without one, in it), or the last at or before the time.
func (m moment) pick(snaps []sites.SiteSnapshot) (sites.SiteSnapshot, bool) {
	var best *sites.SiteSnapshot
	for i := range snaps {
		s := &snaps[i]
		if s.Reason == wire.SitesOOM && best != nil {
			continue
		}
		if m.epoch >= 0 {
			if s.Epoch != nil && *s.Epoch == m.epoch && (best == nil || s.Reason == wire.SitesEpochEnd || best.Reason != wire.SitesEpochEnd) {
				best = s
			}
		} else if s.TNS <= m.t {
			best = s
		}
	}
	if best == nil {
		return sites.SiteSnapshot{}, false
	}
	return *best, true
}

// printSitesSummary writes (or with --json returns as JSON) where memory
// is held on each GPU with site snapshots, as memrec analyze does.
func printSitesSummary(o *sitesOptions, db *storage.DB, run storage.Run, budget *storage.DecodeBudget) error {
	w := o.io.Out
	rep, err := analysis.Analyze(db, run, analysis.Options{Budget: budget})
	if err != nil {
		return err
	}
	// A GPU's where, with the rows left out of it past the budget.
	type where struct {
		*sites.Where
		LeftOut int `json:"site_rows_left_out,omitempty"`
	}
	var out []where
	var left leftOutRows
	for _, g := range rep.GPUs {
		if o.gpu >= 0 && g.GPU != o.gpu {
			continue
		}
		if g.SiteRowsLeftOut > 0 {
			left.add(sites.LeftOut{Rows: g.SiteRowsLeftOut, Err: g.SiteRowsLeftOutWhy()})
		}
		if g.Where == nil {
			continue
		}
		out = append(out, where{g.Where, g.SiteRowsLeftOut})
		if !o.json {
			fmt.Fprintf(w, "== %s\n", g.Label())
			if g.Leak.HeldBy != nil {
				fmt.Fprintf(w, "Leak: %s\n", g.Leak.SentenceFor(g.Label()))
			}
			printWhere(w, rep, g.Where, o.top)
		}
	}
	left.note(o.io.Err)
	if len(out) == 0 {
		if left.rows > 0 {
			return fmt.Errorf("run %q: no site snapshot read within the decoding budget", run.Name)
		}
		return noSites(run, o.gpu)
	}
	if o.json {
		return writeJSON(o, out)
	}
	return nil
}

// leftOutRows sums the site rows a command left out past its decoding
// budget, to say so once.
type leftOutRows struct {
	rows int
	why  error // the first
}

func (l *leftOutRows) add(lo sites.LeftOut) {
	if lo.Rows == 0 {
		return
	}
	if l.rows == 0 {
		l.why = lo.Err
	}
	l.rows += lo.Rows
}

// note writes the one line that says what was left out; nothing when
// nothing was.
func (l *leftOutRows) note(w io.Writer) {
	if l.rows > 0 {
		fmt.Fprintf(w, "memrec: %d site rows left out (the snapshots from the first of them on are not shown): %v\n", l.rows, l.why)
	}
}

// hasSites says whether run has a site series (of GPU gpu, when gpu >= 0):
// a look at its series table, so that a run without snapshots is told so
// before any of its samples are read.
func hasSites(db *storage.DB, run storage.Run, gpu int) (bool, error) {
	series, err := db.Series(run)
	if err != nil {
		return false, err
	}
	for _, s := range series {
		if s.Kind == storage.SeriesSites && (gpu < 0 || s.GPU == gpu) {
			return true, nil
		}
	}
	return false, nil
}

func noSites(run storage.Run, gpu int) error {
	of := ""
	if gpu >= 0 {
		of = fmt.Sprintf(" of GPU %d", gpu)
	}
	return fmt.Errorf("run %q has no allocation-site snapshots%s (record with --sites, or import a PyTorch snapshot)", run.Name, of)
}

// sitesMoments returns the moment --at or --epoch picks (one), or the two
// moments --diff compares.
func sitesMoments(o *sitesOptions, args []string, run storage.Run, one bool) ([]moment, error) {
	if one {
		m := moment{epoch: o.epoch}
		if o.at != "" {
			var err error
			if m, err = parseMoment(o.at, run); err != nil {
				return nil, fmt.Errorf("--at: %w", err)
			}
		}
		return []moment{m}, nil
	}
	var moments []moment
	for _, a := range args[1:] {
		m, err := parseMoment(a, run)
		if err != nil {
			return nil, fmt.Errorf("--diff: %w", err)
		}
		moments = append(moments, m)
	}
	return moments, nil
}

// printSitesDiff writes the top sites of a diff, largest change first.
func printSitesDiff(w io.Writer, d []sites.SiteDelta, top int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, x := range d[:min(len(d), top)] {
		sign := "+"
		if x.Delta < 0 {
			sign = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s%s\t%s → %s\n", x.Site, funcName(x.Func), sign, units.FormatBytes(abs(x.Delta)),
			units.FormatBytes(x.ABytes), units.FormatBytes(x.BBytes))
	}
	tw.Flush()
}

func runSites(o *sitesOptions, args []string) error {
	db, err := o.openRead()
	if err != nil {
		return err
	}
	defer db.Close()
	run, err := db.Run(args[0])
	if err != nil {
		return err
	}
	if ok, err := hasSites(db, run, o.gpu); err != nil || !ok {
		if err == nil {
			err = noSites(run, o.gpu)
		}
		return err
	}
	w := o.io.Out
	one := o.at != "" || o.epoch >= 0
	if one && o.diff {
		return errors.New("--at and --epoch pick one snapshot; --diff compares two: use one or the other")
	}
	// One budget for the command: every GPU's marks and snapshots.
	budget := storage.NewDecodeBudget(storage.DefaultDecodeBudget)
	if !one && !o.diff {
		return printSitesSummary(o, db, run, budget)
	}
	moments, err := sitesMoments(o, args, run, one)
	if err != nil {
		return err
	}
	var found bool
	var js []any
	var left leftOutRows
	defer func() { left.note(o.io.Err) }()
	for _, g := range run.GPUs {
		if o.gpu >= 0 && g.Index != o.gpu {
			continue
		}
		in, err := analysis.SitesInput(db, run, g.Index, budget)
		if err != nil {
			return err
		}
		snaps, lo, err := sites.SiteSnapshots(db, run, g.Index, in)
		if err != nil {
			return err
		}
		left.add(lo)
		if len(snaps) == 0 {
			continue
		}
		var picked []sites.SiteSnapshot
		for _, m := range moments {
			s, ok := m.pick(snaps)
			if !ok {
				break
			}
			picked = append(picked, s)
		}
		if len(picked) < len(moments) {
			continue
		}
		found = true
		since := func(t int64) string { return units.FormatSince(float64(t-run.StartNS) / 1e9) }
		if one {
			s := picked[0]
			if o.json {
				js = append(js, jsonLeftOut(map[string]any{"gpu": g.Index, "snapshot": s}, lo))
				continue
			}
			fmt.Fprintf(w, "== GPU %d at %s (%s, epoch %s): %s live, %s without a stack\n", g.Index, since(s.TNS), s.Reason,
				optInt(s.Epoch), units.FormatBytes(s.LiveBytes), units.FormatBytes(s.UntrackedBytes))
			printSiteFigures(w, "  ", s.Top, o.top)
			continue
		}
		d := sites.DiffSites(picked[0], picked[1])
		if o.json {
			js = append(js, jsonLeftOut(map[string]any{"gpu": g.Index, "a_t_ns": picked[0].TNS, "b_t_ns": picked[1].TNS, "sites": d}, lo))
			continue
		}
		fmt.Fprintf(w, "== GPU %d from %s (%s) to %s (%s): %s live → %s\n", g.Index, since(picked[0].TNS), picked[0].Reason,
			since(picked[1].TNS), picked[1].Reason, units.FormatBytes(picked[0].LiveBytes), units.FormatBytes(picked[1].LiveBytes))
		printSitesDiff(w, d, o.top)
	}
	if !found {
		return fmt.Errorf("run %q has no allocation-site snapshot at the moments asked", run.Name)
	}
	if o.json {
		return writeJSON(o, js)
	}
	return nil
}

// jsonLeftOut adds the rows left out of a GPU's snapshots to its JSON,
// when some were.
func jsonLeftOut(m map[string]any, lo sites.LeftOut) map[string]any {
	if lo.Rows > 0 {
		m["site_rows_left_out"] = lo.Rows
	}
	return m
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func writeJSON(o *sitesOptions, v any) error {
	enc := json.NewEncoder(o.io.Out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
