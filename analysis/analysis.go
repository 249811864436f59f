package analysis

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// Analyze reads a run from the store and analyses every GPU. It streams
// over the chunks (memory grows with the number of marks and steps, not
// with the number of samples).
func Analyze(db *storage.DB, run storage.Run, opts Options) (*Report, error) {
	if opts.Width <= 0 {
		opts.Width = 1600
	}
	rep := newReport(run)
	if opts.Budget == nil {
		opts.Budget = storage.NewDecodeBudget(storage.DefaultDecodeBudget)
	}
	marks, err := loadMarks(db, run, opts.Budget, storage.NewAllocTraceSet(opts.Budget))
	if err != nil {
		return nil, err
	}
	rep.Marks = MarkCounts{Epochs: len(marks.epochs), StepMarks: marks.stepCount, Events: len(marks.events), OOMs: len(marks.ooms)}
	for rank, steps := range marks.steps {
		rep.Marks.Steps = max(rep.Marks.Steps, steps.Len())
		if len(marks.steps) > 1 {
			if rep.Marks.StepsByRank == nil {
				rep.Marks.StepsByRank = map[string]int{}
			}
			rep.Marks.StepsByRank[strconv.Itoa(rank)] = steps.Len()
		}
	}
	rep.Events = marks.other
	if st := marks.stepTime(); finite(st) {
		rep.StepTimeS = &st
	}
	series, err := db.Series(run)
	if err != nil {
		return nil, err
	}
	rep.Notes = append(rep.Notes, runNotes(run, marks)...)
	if opts.Lines != nil {
		opts.Lines.SizeHint(linesSizes(run, series))
	}
	if rep.GPUs, err = analyzeGPUs(db, run, series, marks, opts); err != nil {
		return nil, err
	}
	for _, g := range rep.GPUs {
		if len(g.InferredEpochs) > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d epochs inferred from device memory (inferred_epochs), labelled as such; the time slices are still in intervals",
				g.Label(), len(g.InferredEpochs)))
			if i := slices.Index(rep.Notes, noEpochMarks); i >= 0 {
				rep.Notes[i] = noEpochMarksInferred
			}
		}
		if g.SiteRowsLeftOut > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: %d site rows left out of the analysis (the snapshots from the first of them on are not seen): %v",
				g.Label(), g.SiteRowsLeftOut, g.sitesLeftOutWhy))
		}
		if m := g.AllocTraceMissedBytes; m > 0 {
			rep.Notes = append(rep.Notes, fmt.Sprintf("%s: the allocator reserved %s more than the replay of its trace, which covers the first steps only: later steps made larger requests, so the what-ifs (alloc_trace_what_if) are for the traced steps and may be below what each setting would reserve over the run",
				g.Label(), units.FormatBytes(m)))
		}
		if g.InconsistentSamples > 0 {
			what := fmt.Sprintf("%d allocator samples are", g.InconsistentSamples)
			if g.InconsistentSamples == 1 {
				what = "1 allocator sample is"
			}
			rep.Notes = append(rep.Notes, fmt.Sprintf("GPU %d: %s inconsistent (allocated above reserved, or active below allocated), used as sent",
				g.GPU, what))
		}
	}
	rep.summarize(run, marks)
	return rep, nil
}

// newReport returns a report holding what the run's record says about
// itself, with a note when only a window of it is analysed.
func newReport(run storage.Run) *Report {
	rep := &Report{Run: run.Name, RunID: run.ID, Host: run.Host, Job: run.Job, StartNS: run.StartNS, EndNS: run.EndNS,
		DurationS: run.Duration().Seconds(), Complete: run.Complete, Tags: run.Tags, IntervalNS: run.IntervalNS,
		Recorder: run.Recorder}
	if _, _, ok := run.Window(); ok {
		rep.Window = &WindowSpan{FromNS: run.StartNS, ToNS: run.EndNS,
			FromS: float64(run.StartNS-run.RunStartNS()) / 1e9, ToS: float64(run.EndNS-run.RunStartNS()) / 1e9}
		rep.Notes = append(rep.Notes, fmt.Sprintf("only the window from %.3f s to %.3f s of the run is analysed; times below count from the window's start",
			rep.Window.FromS, rep.Window.ToS))
	}
	return rep
}

// The note of a run without epoch marks, and its words where epochs were
// inferred from device memory.
const (
	noEpochMarks         = "no epoch marks: per-epoch deltas are replaced by deltas over ten equal time slices"
	noEpochMarksInferred = "no epoch marks: the per-epoch deltas are over the epochs inferred from device memory, and over ten equal time slices (intervals)"
)

// runNotes says what the run lacks (samples, marks, allocator samples) and
// what its source limits, each as a sentence for the report.
func runNotes(run storage.Run, marks *markIndex) []string {
	var notes []string
	if run.Counts.Samples+run.Counts.TorchSamples == 0 {
		notes = append(notes, "the run holds no samples")
	}
	if len(marks.epochs) == 0 {
		notes = append(notes, noEpochMarks)
	}
	if marks.stepCount == 0 {
		notes = append(notes, "no step marks: the leak slope is per hour only, fitted on the floors of time slices")
	}
	if run.Recorder.Source == storage.SourceNvidiaSMI {
		n := "imported from nvidia-smi logs: memory is known to 1 MiB (the logs' resolution), at the logs' interval"
		if run.Recorder.Invalid > 0 {
			n += fmt.Sprintf("; %d values nvidia-smi could not read ([N/A]) were dropped", run.Recorder.Invalid)
		}
		notes = append(notes, n)
	}
	switch {
	case run.Counts.TorchSamples == 0 && len(marks.probe) > 0:
		for _, p := range marks.probe {
			notes = append(notes, "no allocator samples: the probe says "+p+"; allocated, reserved and fragmentation are unknown; the leak is judged on device memory")
		}
	case run.Counts.TorchSamples == 0:
		notes = append(notes, "no allocator samples (no probe): allocated, reserved and fragmentation are unknown; the leak is judged on device memory")
	default:
		// Why there is no allocator trace (its other notes, such as an
		// allocator view missing before CUDA started, say nothing here).
		for _, p := range marks.probe {
			if strings.Contains(p, "allocator trace") {
				notes = append(notes, "the probe says "+p)
			}
		}
	}
	if marks.traceErr != nil {
		notes = append(notes, "an allocator trace is left out: "+marks.traceErr.Error())
	}
	if n := marks.leftOutNote(); n != "" {
		notes = append(notes, n)
	}
	return notes
}

// analyzeGPUs analyses the run's GPUs in parallel, in the order of their
// index: each reads its own series, and the marks are only read.
func analyzeGPUs(db *storage.DB, run storage.Run, series []storage.SeriesRef, marks *markIndex, opts Options) ([]GPUReport, error) {
	gpus := slices.Clone(run.GPUs)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	reports := make([]GPUReport, len(gpus))
	errs := make([]error, len(gpus))
	// A core a pass: a GPU with both device and allocator series keeps two
	// busy (passes) and takes two of the cores' tokens, so that only that
	// many GPUs' per-step columns are held at once; one with a single kind
	// of series takes one. The tokens are taken here, one GPU after the
	// other, so two GPUs never wait on each other's.
	cores := max(1, runtime.GOMAXPROCS(0))
	sem := make(chan struct{}, cores)
	var sets columnSets
	var wg sync.WaitGroup
	for i, g := range gpus {
		w := min(cores, seriesOf(series, g.Index).passCount())
		for range w {
			sem <- struct{}{}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				for range w {
					<-sem
				}
			}()
			cols := sets.get()
			gr, err := analyzeGPU(db, run, g, series, marks, opts, cols)
			sets.put(cols)
			// The GPU's chunks are read: their pages need not count in
			// this process's memory while the next GPUs are analysed.
			db.ReleasePages()
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", g.Label(), err)
				return
			}
			reports[i] = *gr
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return reports, nil
}

// linesSizes is how many samples each device line and each allocator line
// of a run gets, from its counts: the device samples shared by its GPUs,
// the allocator samples by its allocator series (0 where unknown).
func linesSizes(run storage.Run, series []storage.SeriesRef) (device, allocator int64) {
	if n := len(run.GPUs); n > 0 {
		device = run.Counts.Samples / int64(n)
	}
	torch := 0
	for _, s := range series {
		if s.Kind == storage.SeriesTorch {
			torch++
		}
	}
	if torch > 0 {
		allocator = run.Counts.TorchSamples / int64(torch)
	}
	return device, allocator
}
