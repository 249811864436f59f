package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/report"
	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/viewer"
)

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

// The demo's runs: the job at demoBatch, reported, and at demoSmallBatch,
// the second point compare --by needs to predict the largest batch.
const (
	demoBatch      = 64
	demoSmallBatch = 16
)

// recordDemo records the simulated job at batch into db as name, on a
// fake clock: every tick of the simulated job is taken, however loaded the
// machine (a real-time recording misses ticks there and may have too few
// points to judge the leak).
func recordDemo(ctx context.Context, o *demoOptions, db *storage.DB, sim *recorder.Sim, name string, batch int, now time.Time) (recorder.Result, error) {
	return recorder.Record(ctx, recorder.Options{
		Open:   func(run storage.Run) (recorder.Store, error) { return recorder.DBStore(db, run, o.io.Err) },
		Run:    storage.Run{Name: name, Tags: map[string]string{"source": "sim", "scenario": "leak", recorder.SimBatchTag: strconv.Itoa(batch)}},
		Source: sim, Interval: 10 * time.Millisecond, Procs: true, Duration: o.duration, Log: o.io.Err,
		Clock: recorder.NewFakeClock(now),
	})
}

// demoPrediction records the job again at the small batch and prints what
// compare --by predicts from the two runs: the largest batch that fits.
func demoPrediction(ctx context.Context, o *demoOptions, db *storage.DB, big *analysis.Report, now time.Time) error {
	sim, err := recorder.NewSim(recorder.SimConfig{GPUs: 2, Scenario: recorder.ScenarioLeak, BatchSize: demoSmallBatch}, now)
	if err != nil {
		return err
	}
	name, err := db.FreeName(big.Run + "-bs" + strconv.Itoa(demoSmallBatch))
	if err != nil {
		return err
	}
	res, err := recordDemo(ctx, o, db, sim, name, demoSmallBatch, now)
	if err != nil {
		return err
	}
	small, err := analysis.Analyze(db, res.Run, analysis.Options{})
	if err != nil {
		return err
	}
	c, err := compare.Compare([]*analysis.Report{small, big}, "", compare.Align("step"))
	if err != nil {
		return err
	}
	if err := compare.FitByTag(c, recorder.SimBatchTag, 0.05); err != nil {
		// Too short a demo to have steps: say so, the rest still holds.
		fmt.Fprintf(o.io.Out, "  no prediction of the largest batch: %v\n", err)
		return nil
	}
	fmt.Fprintf(o.io.Out, "  from batch_size %d and %d: %s\n", demoSmallBatch, demoBatch, c.By.Statement)
	fmt.Fprintf(o.io.Out, "  memrec compare --by batch_size %s %s explains it; memrec fit --source sim --sim-gpus 2 --runs %s,%s tries it\n",
		small.Run, big.Run, small.Run, big.Run)
	return nil
}

func runDemo(ctx context.Context, o *demoOptions) error {
	if err := o.checkSize(); err != nil {
		return err
	}
	if err := report.CheckFolder(o.out); err != nil {
		return outputError(err)
	}
	now := time.Now()
	sim, err := recorder.NewSim(recorder.SimConfig{GPUs: 2, Scenario: recorder.ScenarioLeak, BatchSize: demoBatch}, now)
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
	res, err := recordDemo(ctx, o, db, sim, name, demoBatch, now)
	if err != nil {
		return err
	}
	x := series.NewIndex(0) // the report's page index, from the samples the analysis reads
	rep, err := analysis.Analyze(db, res.Run, analysis.Options{Lines: x})
	if err != nil {
		return err
	}
	for _, g := range rep.GPUs {
		fmt.Fprintf(o.io.Out, "  %s\n", g.Leak.Sentence(g.GPU))
	}
	if err := demoPrediction(ctx, o, db, rep, now); err != nil {
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
