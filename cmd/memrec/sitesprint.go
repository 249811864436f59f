package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/analysis/units"
)

// printWhere prints a GPU's allocation sites: the growing ones first, under
// a heading that says they grow, then the biggest steady holders at the end.
func printWhere(w io.Writer, rep *analysis.Report, wh *sites.Where, n int) {
	fmt.Fprintf(w, "Where (%d allocation-site snapshots):\n", wh.Snapshots)
	if len(wh.Growing) > 0 {
		fmt.Fprintln(w, "  Growing: live bytes that rise from snapshot to snapshot")
		if n := wh.Growing[0].SampledEvery; n > 1 {
			fmt.Fprintf(w, "  (estimated: the probe kept stacks on one step in %.3g, so each site's growth counts %.3g times)\n", n, n)
		}
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		for _, g := range wh.Growing[:min(n, len(wh.Growing))] {
			rate := ""
			if g.BytesPerStep != nil {
				rate = units.FormatBytes(int64(*g.BytesPerStep)) + "/step"
			} else if g.BytesPerEpoch != nil {
				rate = units.FormatBytes(int64(*g.BytesPerEpoch)) + "/epoch"
			} else {
				rate = units.FormatBytes(int64(g.BytesPerHour)) + "/hour"
			}
			fmt.Fprintf(tw, "    %s\t%s\t+%s\t%s\t%.0f %% of the growth\t%s\n", g.Site, funcName(g.Func),
				units.FormatBytes(g.GrowthBytes), rate, 100*g.Share, strings.Join(g.Stack, " < "))
		}
		tw.Flush()
	} else {
		fmt.Fprintln(w, "  Growing: no site grows")
	}
	if e := wh.AtEnd; e != nil {
		fmt.Fprintf(w, "  Biggest steady holders at the end (%s, %s): %s live, %s without a stack\n", sinceStart(rep, e.TNS), e.Reason,
			units.FormatBytes(e.LiveBytes), units.FormatBytes(e.UntrackedBytes))
		var steady []sites.SiteFigure
		for _, f := range e.Top {
			if !growing(wh, f) {
				steady = append(steady, f)
			}
		}
		printSiteFigures(w, "    ", steady, n)
	}
	if p := wh.AtPeak; p != nil && wh.AtEnd != nil && p.TNS != wh.AtEnd.TNS {
		fmt.Fprintf(w, "  At the peak snapshot (%s, %s): %s live\n", sinceStart(rep, p.TNS), p.Reason, units.FormatBytes(p.LiveBytes))
		printSiteFigures(w, "    ", p.Top, n)
	}
	if wh.Bad > 0 {
		fmt.Fprintf(w, "  %d snapshot entries made no sense and were dropped\n", wh.Bad)
	}
}

func growing(wh *sites.Where, f sites.SiteFigure) bool {
	for _, g := range wh.Growing {
		if g.File == f.File && g.Line == f.Line {
			return true
		}
	}
	return false
}

func funcName(f string) string {
	if f == "" {
		return ""
	}
	return "`" + f + "`"
}

// printSiteFigures prints up to n sites, one a line.
func printSiteFigures(w io.Writer, indent string, fs []sites.SiteFigure, n int) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, f := range fs[:min(n, len(fs))] {
		fmt.Fprintf(tw, "%s%s\t%s\t%s\t%d blocks\t%.0f %%\t%s\n", indent, f.Site, funcName(f.Func), units.FormatBytes(f.LiveBytes),
			f.LiveBlocks, 100*f.Share, strings.Join(f.Stack, " < "))
	}
	tw.Flush()
}
