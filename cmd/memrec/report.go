package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/internal/series"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/report"
	"github.com/memrec/memrec/storage"
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
	pageBytes int
}

func addReportFlags(cmd *cobra.Command, o *reportOptions, defOut string) {
	f := cmd.Flags()
	f.StringVarP(&o.out, "output", "o", defOut, "folder to write the report into: new, empty, or a memrec report holding only what memrec wrote (replaced as a whole)")
	f.BoolVar(&o.pngOnly, "png-only", false, "write only the PNG charts")
	f.IntVar(&o.width, "width", 1200, "chart width in pixels")
	f.IntVar(&o.height, "height", 500, "chart height in pixels")
	f.IntVar(&o.pageBytes, "page-bytes", report.DefaultPageBytes, "bound on the timeline data the page embeds: levels each 4× finer are added while they fit")
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
			err := runReport(ctx, o, args[0])
			return stoppedSaying(ctx, o.io.Err, err, "no report was written")
		},
	}
	addReportFlags(cmd, o, "memrec-report")
	addWindowFlags(cmd, &o.window)
	return cmd
}

func runReport(ctx context.Context, o *reportOptions, ref string) error {
	var rep *analysis.Report
	err := untilDone(ctx, func() (err error) {
		rep, err = analyzeRun(o.globals, ref, o.window)
		return err
	})
	if err != nil {
		return err
	}
	if o.pngOnly {
		return writeReport(ctx, o, rep, nil, nil)
	}
	// The page's pyramid of levels, from the run's lines.
	db, err := o.openRead()
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := db.Run(ref)
	if err != nil {
		return err
	}
	if r, err = o.window.apply(db, r); err != nil {
		return err
	}
	x, err := viewer.BuildIndex(db, r)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return writeReport(ctx, o, rep, x, func(k series.Key) series.RawReader { return viewer.LineReader(db, r, k) })
}

// Chart sizes: at least what a chart's axes and legend need, at most a
// 4K screen (3840x2160), where a chart is still seen whole. A chart is an
// RGBA image while it is drawn, 4 bytes a pixel: 33 MB at the largest; an
// unbounded size ran out of memory (100000x100000 is 40 GB an image), and
// 20000x20000 took 65 s and 4.7 GB.
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

type demoOptions struct {
	reportOptions
	duration time.Duration
}

func newDemoCmd(g *globals) *cobra.Command {
	o := &demoOptions{reportOptions: reportOptions{globals: g}}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Record a short simulated run (two GPUs, one leaking), analyse it and write its report",
		Long: `Record a few seconds of a simulated two-GPU training job in which GPU 1 leaks,
analyse it and write its report: what memrec does, on any machine, no GPU needed.
The seconds are the simulated job's, computed as fast as the machine can, so the
demo shows the same on an idle laptop and on a loaded server.`,
		Example: `  memrec demo && xdg-open memrec-demo/index.html`,
		Args:    cobra.NoArgs,
		RunE:    func(cmd *cobra.Command, args []string) error { return runDemo(cmd.Context(), o) },
	}
	addReportFlags(cmd, &o.reportOptions, "memrec-demo")
	durationVar(cmd.Flags(), &o.duration, "duration", 6*time.Second, "how long to record (of the simulated job's time)")
	return cmd
}

func runDemo(ctx context.Context, o *demoOptions) error {
	if err := o.checkSize(); err != nil {
		return err
	}
	if err := report.CheckFolder(o.out); err != nil {
		return outputError(err)
	}
	now := time.Now()
	sim, err := recorder.NewSim(recorder.SimConfig{GPUs: 2, Scenario: recorder.ScenarioLeak}, now)
	if err != nil {
		return err
	}
	db, err := o.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()
	// Two demos in one second are two runs: the second name gets a suffix.
	name, err := db.FreeName("demo-" + now.Format("20060102-150405"))
	if err != nil {
		return err
	}
	fmt.Fprintf(o.io.Out, "recording %s of a simulated 2-GPU job (GPU 1 leaks) into %s as %q...\n", o.duration, db.Path(), name)
	res, err := recorder.Record(ctx, recorder.Options{
		Open:   func(run storage.Run) (recorder.Store, error) { return recorder.DBStore(db, run, o.io.Err) },
		Run:    storage.Run{Name: name, Tags: map[string]string{"source": "sim", "scenario": "leak", "batch_size": "64"}},
		Source: sim, Interval: 10 * time.Millisecond, Procs: true, Duration: o.duration, Log: o.io.Err,
		// A fake clock: every tick of the simulated job is taken, however
		// loaded the machine (a real-time recording misses ticks there and
		// may have too few points to judge the leak).
		Clock: recorder.NewFakeClock(now),
	})
	if err != nil {
		return err
	}
	rep, err := analysis.Analyze(db, res.Run, analysis.Options{})
	if err != nil {
		return err
	}
	for _, g := range rep.GPUs {
		fmt.Fprintf(o.io.Out, "  %s\n", g.Leak.Sentence(g.GPU))
	}
	x, err := viewer.BuildIndex(db, res.Run)
	if err != nil {
		return err
	}
	if err := writeReport(ctx, &o.reportOptions, rep, x, func(k series.Key) series.RawReader { return viewer.LineReader(db, res.Run, k) }); err != nil {
		return stoppedSaying(ctx, o.io.Err, err, "no report was written")
	}
	abs, err := filepath.Abs(o.out)
	if err != nil {
		abs = o.out
	}
	fmt.Fprintf(o.io.Out, "open %s in a browser\n", filepath.Join(abs, "index.html"))
	return nil
}

// outputError names the flag when the report's folder is refused.
func outputError(err error) error {
	if errors.Is(err, report.ErrNotReport) || errors.Is(err, report.ErrNotFolder) || errors.Is(err, report.ErrOtherFiles) {
		return fmt.Errorf("-o: %w", err)
	}
	return err
}
