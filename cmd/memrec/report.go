package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/report"
	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/viewer"
)

type reportOptions struct {
	*globals
	window  windowOptions
	out     string
	pngOnly bool
	width   int
	height  int
	// pageBytes bounds the timeline data the page embeds.
	pageBytes  int
	cpuProfile string
}

func addReportFlags(cmd *cobra.Command, o *reportOptions, defOut string) {
	f := cmd.Flags()
	f.StringVarP(&o.out, "output", "o", defOut, "folder to write the report into: new, empty, or a memrec report holding only what memrec wrote (replaced as a whole)")
	f.BoolVar(&o.pngOnly, "png-only", false, "write only the PNG charts")
	f.IntVar(&o.width, "width", 1200, "chart width in pixels")
	f.IntVar(&o.height, "height", 500, "chart height in pixels")
	f.IntVar(&o.pageBytes, "page-bytes", report.DefaultPageBytes, "bound on the page's size, charts included: its timeline's levels each 4× finer are added while they fit")
}

func newReportCmd(g *globals) *cobra.Command {
	o := &reportOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "report RUN",
		Short: "Write PNG charts and a self-contained HTML page for a run",
		Example: `  memrec report bs64 -o bs64-report && xdg-open bs64-report/index.html
  memrec report bs64 --png-only --width 1600 --height 600`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.checkSize(); err != nil {
				return err
			}
			// The first Ctrl-C stops the report: at once during the
			// analysis, else before the next chart or file; nothing is
			// written, what was is removed, and memrec exits 130 (143 for
			// SIGTERM).
			ctx := cmd.Context()
			err := profiled(o.cpuProfile, func() error { return runReport(ctx, o, args[0]) })
			return stoppedSaying(ctx, o.io.Err, err, "no report was written")
		},
	}
	addReportFlags(cmd, o, "memrec-report")
	addWindowFlags(cmd, &o.window)
	addCPUProfileFlag(cmd, &o.cpuProfile)
	return cmd
}

// analyzeForReport is the report's analysis (a variable for the test of a
// signal that comes while it runs).
var analyzeForReport = analysis.Analyze

func runReport(ctx context.Context, o *reportOptions, ref string) error {
	db, r, err := openRun(o.globals, ref, o.window)
	if err != nil {
		return err
	}
	defer db.Close()
	// The analysis, which reads every device and allocator sample, hands
	// them to the page's pyramid of levels as it goes (a second read of
	// a long run is a large part of the report's time: bench/README.md,
	// "Figures moved from comments"). The pyramid needs no more: the page
	// draws the device and allocator lines from it, the marks and the
	// budget from the analysis. The first signal does not wait for it.
	var rep *analysis.Report
	var x *series.Index
	err = untilDone(ctx, func() error {
		var opts analysis.Options
		if !o.pngOnly { // a page of PNGs only has no pyramid
			x = series.NewIndex(0)
			opts.Lines = x
		}
		a, err := analyzeForReport(db, r, opts)
		rep = a
		return err
	})
	if err != nil {
		return err
	}
	if o.pngOnly {
		return writeReport(ctx, o, rep, nil, nil)
	}
	return writeReport(ctx, o, rep, x, func(k series.Key) series.RawReader { return viewer.LineReader(db, r, k) })
}

// Chart sizes: at least what a chart's axes and legend need, at most a
// 4K screen (3840x2160), where a chart is still seen whole. A chart is an
// RGBA image while it is drawn, 4 bytes a pixel: 33 MB at the largest; an
// unbounded size runs out of memory (100000x100000 is 40 GB an image), and
// far below that one chart already takes a minute.
const (
	minChartWidth, minChartHeight = 200, 150
	maxChartWidth, maxChartHeight = 3840, 2160
)

// checkSize refuses chart sizes out of bounds, before any work.
func (o *reportOptions) checkSize() error {
	if o.width < minChartWidth || o.height < minChartHeight || o.width > maxChartWidth || o.height > maxChartHeight {
		return fmt.Errorf("--width/--height %dx%d: charts are %dx%d to %dx%d pixels", o.width, o.height,
			minChartWidth, minChartHeight, maxChartWidth, maxChartHeight)
	}
	return nil
}

// maxPageBytes bounds --page-bytes.
const maxPageBytes = 256 << 20

func writeReport(ctx context.Context, o *reportOptions, rep *analysis.Report, lines *series.Index, raw func(series.Key) series.RawReader) error {
	if o.pageBytes < 0 || o.pageBytes > maxPageBytes {
		return fmt.Errorf("--page-bytes %d: want 0 (the default, %d) to %d (a browser holds the page's data several times over while it parses it)", o.pageBytes, report.DefaultPageBytes, maxPageBytes)
	}
	if err := o.checkSize(); err != nil {
		return err
	}
	path, err := report.Write(o.out, rep, report.Options{Width: o.width, Height: o.height, PNGOnly: o.pngOnly, Lines: lines, Raw: raw, PageBytes: o.pageBytes, Context: ctx})
	if err != nil {
		return outputError(err)
	}
	fmt.Fprintf(o.io.Out, "report of %s written: %s\n", rep.Run, path)
	return nil
}

// outputError names the flag when the report's folder is refused.
func outputError(err error) error {
	if errors.Is(err, report.ErrNotReport) || errors.Is(err, report.ErrNotFolder) || errors.Is(err, report.ErrOtherFiles) {
		return fmt.Errorf("-o: %w", err)
	}
	return err
}
