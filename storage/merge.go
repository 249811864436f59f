package storage

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/internal/merge"
	"github.com/memrec/memrec/storage/wire"
)

// This file joins the runs of one multi-node job, each recorded on its own
// node into its own file, into one run whose GPUs are numbered across the
// nodes and whose times are on one clock.
//
// Clocks: in data-parallel training every rank finishes a step together
// (the gradients' all-reduce waits for the slowest), so the step marks of
// two nodes, paired by step number, differ by the difference of the
// nodes' clocks. The offset of a node is the median of those differences
// over every step both nodes marked; the median ignores the odd step where
// a probe's mark was late.

// Errors of Merge a caller can test with errors.Is.
var (
	ErrSameHost   = errors.New("two runs were recorded on the same host")
	ErrOtherJob   = errors.New("runs belong to different jobs")
	ErrGPUOverlap = errors.New("runs share a GPU")
	ErrMerged     = errors.New("run is already a merge of several hosts")
	ErrNoInput    = errors.New("nothing to merge")
)

// MergeInput is one node's run. DB may be shared by several inputs.
type MergeInput struct {
	File string // for messages
	DB   *DB
	Run  Run
}

// MergeOptions configure DB.Merge.
type MergeOptions struct {
	// Name of the merged run; "" uses the job, or else the first run's name.
	Name string
	// Replace deletes a stored run of the same name instead of refusing.
	Replace bool
}

// Merge writes the runs of in as one run into db, in one transaction:
// either the whole merged run is written or nothing is. The runs must be
// of one job (the same Run.Job), from different hosts, with no GPU (by
// UUID) in two of them; otherwise nothing is written and the error wraps
// ErrOtherJob, ErrSameHost or ErrGPUOverlap and names the files. GPUs are
// numbered in input order (the first run's GPUs first); each keeps its host
// and NVML index (GPU.Host, GPU.HostGPU). Every time of input k is moved by
// Hosts[k].OffsetNS onto the first input's clock. db must not be one of the
// inputs' databases. It blocks until done.
func (db *DB) Merge(in []MergeInput, opts MergeOptions) (Run, error) {
	return db.MergeContext(context.Background(), in, opts)
}

// MergeContext is Merge that stops when ctx is done: it returns ctx's
// error and nothing is written.
func (db *DB) MergeContext(ctx context.Context, in []MergeInput, opts MergeOptions) (Run, error) {
	if len(in) < 2 {
		return Run{}, fmt.Errorf("%w: give at least two runs", ErrNoInput)
	}
	if err := checkMergeable(in); err != nil {
		return Run{}, err
	}
	hosts, err := alignClocks(ctx, in)
	if err != nil {
		return Run{}, err
	}

	out, gpuMap := mergedRun(in, hosts, opts)
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		run, err := createRun(tx, out, opts.Replace)
		if err != nil {
			return err
		}
		out, err = writeMerged(ctx, tx, run, in, hosts, gpuMap)
		return err
	})
	if err != nil {
		return Run{}, err
	}
	return out, nil
}

// mergedRun returns the record of the merged run (its name, span, tags and
// GPUs renumbered in input order) and, per input, the map from its GPU
// indexes to the merged ones.
func mergedRun(in []MergeInput, hosts []HostInfo, opts MergeOptions) (Run, []map[int]int) {
	out := Run{Name: opts.Name, Job: in[0].Run.Job, Hosts: hosts, StartNS: MaxTime, IntervalNS: in[0].Run.IntervalNS, Complete: true}
	if out.Name == "" {
		out.Name = out.Job
	}
	if out.Name == "" {
		out.Name = in[0].Run.Name
	}
	gpuMap := make([]map[int]int, len(in)) // input's index -> merged index
	for k, inp := range in {
		r := inp.Run
		shift := hosts[k].OffsetNS
		out.StartNS = min(out.StartNS, r.StartNS-shift)
		out.EndNS = max(out.EndNS, r.EndNS-shift)
		out.Complete = out.Complete && r.Complete
		for t, v := range r.Tags {
			if out.Tags == nil {
				out.Tags = map[string]string{}
			}
			if _, ok := out.Tags[t]; !ok {
				out.Tags[t] = v
			}
		}
		gpus := slices.Clone(r.GPUs)
		slices.SortFunc(gpus, func(a, b GPU) int { return a.Index - b.Index })
		gpuMap[k] = map[int]int{}
		for _, g := range gpus {
			gpuMap[k][g.Index] = len(out.GPUs)
			out.GPUs = append(out.GPUs, GPU{Index: len(out.GPUs), UUID: g.UUID, Name: g.Name, TotalBytes: g.TotalBytes, Host: r.Host, HostGPU: g.Index})
		}
	}
	if out.EndNS < out.StartNS {
		out.EndNS = out.StartNS
	}
	return out, gpuMap
}

// writeMerged writes every input's rows, moved onto the first input's clock
// and merged by time, into run inside tx, and returns the run as written.
func writeMerged(ctx context.Context, tx *bolt.Tx, run Run, in []MergeInput, hosts []HostInfo, gpuMap []map[int]int) (Run, error) {
	w := newRunWriter(run)
	var its []merge.Iterator[rowSource]
	var owner []int // input of each iterator
	for k, inp := range in {
		series, err := inp.DB.Series(inp.Run)
		if err != nil {
			return Run{}, fmt.Errorf("%s: %w", inp.File, err)
		}
		its = append(its, inputRows(inp, series, hosts[k].OffsetNS, gpuMap[k])...)
		for len(owner) < len(its) {
			owner = append(owner, k)
		}
	}
	m := merge.New(func(r rowSource) int64 { return r.time() }, its...)
	for n := 0; m.Next(); n++ {
		if n%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return Run{}, err
			}
		}
		if err := m.At().write(w); err != nil {
			return Run{}, fmt.Errorf("%s: %w", in[owner[m.Source()]].File, err)
		}
	}
	if err := m.Err(); err != nil {
		return Run{}, err
	}
	w.sealAll()
	committed, err := w.flush(tx)
	if err != nil {
		return Run{}, err
	}
	committed()
	return w.run, nil
}

// checkMergeable refuses runs that are not the nodes of one job.
func checkMergeable(in []MergeInput) error {
	hosts := map[string]string{} // host -> file
	uuids := map[string]string{} // GPU UUID -> file
	job, jobFile := in[0].Run.Job, in[0].File
	for _, inp := range in {
		r := inp.Run
		if len(r.Hosts) > 0 {
			return fmt.Errorf("%s: run %q: %w (%d hosts); merge the nodes' own runs", inp.File, r.Name, ErrMerged, len(r.Hosts))
		}
		if r.Job != job {
			return fmt.Errorf("%w: %s has job %q, %s has job %q (give every node's recorder the same --job)",
				ErrOtherJob, jobFile, job, inp.File, r.Job)
		}
		if f, ok := hosts[r.Host]; ok {
			return fmt.Errorf("%w: %s and %s were both recorded on %q (nodes that share a host name need record --host)",
				ErrSameHost, f, inp.File, r.Host)
		}
		hosts[r.Host] = inp.File
		for _, g := range r.GPUs {
			if g.UUID == "" {
				continue
			}
			if f, ok := uuids[g.UUID]; ok {
				return fmt.Errorf("%w: %s and %s both recorded GPU %s (record each GPU on one node only, e.g. with --gpus)",
					ErrGPUOverlap, f, inp.File, g.UUID)
			}
			uuids[g.UUID] = inp.File
		}
	}
	return nil
}

// stepKey pairs step marks across nodes: a step number and how many times
// a rank had marked that number before (per-epoch step numbers repeat).
type stepKey struct{ step, seen int }

// stepClock returns, for every step a run marked, the median time at which
// its ranks marked it.
func stepClock(ctx context.Context, inp MergeInput) (map[stepKey]int64, error) {
	seen := map[[2]int]int{} // rank, step -> times seen
	times := map[stepKey][]int64{}
	it := inp.DB.Marks(inp.Run, MinTime, MaxTime)
	for n := 0; it.Next(); n++ {
		if n%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		m := it.At()
		if m.Kind != wire.MarkStep || m.Step == None {
			continue
		}
		rs := [2]int{m.Rank, m.Step}
		k := stepKey{m.Step, seen[rs]}
		seen[rs]++
		times[k] = append(times[k], m.T)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", inp.File, err)
	}
	out := make(map[stepKey]int64, len(times))
	for k, ts := range times {
		out[k] = medianInt(ts)
	}
	return out, nil
}

// alignClocks finds each input's clock offset from the first input's.
func alignClocks(ctx context.Context, in []MergeInput) ([]HostInfo, error) {
	hosts := make([]HostInfo, len(in))
	var ref map[stepKey]int64
	for k, inp := range in {
		r := inp.Run
		hosts[k] = HostInfo{Name: r.Host, Run: r.Name, Job: r.Job, GPUs: len(r.GPUs), Complete: r.Complete, Recorder: r.Recorder}
		clock, err := stepClock(ctx, inp)
		if err != nil {
			return nil, err
		}
		if k == 0 {
			ref = clock
			hosts[k].CommonSteps = len(clock)
			continue
		}
		var diffs []int64
		for _, s := range slices.SortedFunc(maps.Keys(clock), func(a, b stepKey) int {
			if a.step != b.step {
				return a.step - b.step
			}
			return a.seen - b.seen
		}) {
			if t0, ok := ref[s]; ok {
				diffs = append(diffs, clock[s]-t0)
			}
		}
		if len(diffs) == 0 {
			continue // nothing to align on: offset 0, CommonSteps 0
		}
		off := medianInt(slices.Clone(diffs))
		dev := make([]int64, len(diffs))
		for i, d := range diffs {
			dev[i] = max(d-off, off-d)
		}
		hosts[k].OffsetNS, hosts[k].CommonSteps, hosts[k].SpreadNS = off, len(diffs), medianInt(dev)
	}
	return hosts, nil
}

// medianInt sorts v and returns its median (the lower middle for an even
// count); 0 for none.
func medianInt(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	return v[(len(v)-1)/2]
}

// rowSource is one input series during the merge: its current value, on
// the merged run's clock and GPU numbers, ready to be written. At returns
// the series itself, so the merge moves a small interface value, not rows.
type rowSource interface {
	merge.Iterator[rowSource]
	time() int64
	write(w *runWriter) error
}

// inputRows returns one input's series as row sources.
func inputRows(inp MergeInput, series []SeriesRef, shift int64, gpus map[int]int) []merge.Iterator[rowSource] {
	db, r := inp.DB, inp.Run
	remap := func(g int) int {
		if n, ok := gpus[g]; ok {
			return n
		}
		return None
	}
	var its []merge.Iterator[rowSource]
	for _, s := range series {
		switch s.Kind {
		case deviceSchema.name:
			its = append(its, &rowIter[DeviceSample]{it: db.DeviceSamples(r, s.GPU, MinTime, MaxTime), sc: &deviceSchema, fix: func(v *DeviceSample) {
				v.T -= shift
				v.GPU = remap(v.GPU)
			}})
		case procSchema.name:
			its = append(its, &rowIter[ProcSample]{it: db.ProcSamples(r, s.GPU, s.PID, MinTime, MaxTime), sc: &procSchema, fix: func(v *ProcSample) {
				v.T -= shift
				v.GPU = remap(v.GPU)
			}})
		case torchSchema.name:
			its = append(its, &rowIter[TorchSample]{it: db.TorchSamples(r, s.GPU, s.PID, MinTime, MaxTime), sc: &torchSchema, fix: func(v *TorchSample) {
				v.T -= shift
				v.GPU = remap(v.GPU)
			}})
		case budgetSchema.name:
			its = append(its, &rowIter[BudgetSample]{it: db.BudgetSamples(r, s.GPU, s.PID, MinTime, MaxTime), sc: &budgetSchema, fix: func(v *BudgetSample) {
				v.T -= shift
				v.GPU = remap(v.GPU)
				v.Optimizer, v.OptimizerKeys, v.DType = strings.Clone(v.Optimizer), strings.Clone(v.OptimizerKeys), strings.Clone(v.DType)
			}})
		case siteSchema.name:
			its = append(its, &rowIter[SiteSample]{it: db.SiteSamples(r, s.GPU, s.PID, MinTime, MaxTime), sc: &siteSchema, fix: func(v *SiteSample) {
				v.T -= shift
				if v.SinceNS != 0 {
					v.SinceNS -= shift
				}
				v.GPU = remap(v.GPU)
				v.Reason, v.Name, v.File, v.Func, v.Stack = SitesReason(strings.Clone(string(v.Reason))), strings.Clone(v.Name), strings.Clone(v.File), strings.Clone(v.Func), strings.Clone(v.Stack)
			}})
		}
	}
	its = append(its, &rowIter[Mark]{it: db.Marks(r, MinTime, MaxTime), sc: &markSchema, fix: func(v *Mark) {
		v.T -= shift
		if v.GPU != None {
			v.GPU = remap(v.GPU)
		}
		v.Text = strings.Clone(v.Text)
	}})
	return its
}

// rowIter is one series of an input as a rowSource.
type rowIter[T any] struct {
	it  *Iter[T]
	sc  *rowSchema[T]
	fix func(*T) // to the merged run's clock and GPU numbers
	cur T
	t   int64
}

func (r *rowIter[T]) Next() bool {
	if !r.it.Next() {
		return false
	}
	r.cur = r.it.At()
	r.fix(&r.cur)
	r.t = r.sc.time(r.cur)
	return true
}

func (r *rowIter[T]) At() rowSource            { return r }
func (r *rowIter[T]) Err() error               { return r.it.Err() }
func (r *rowIter[T]) time() int64              { return r.t }
func (r *rowIter[T]) write(w *runWriter) error { return appendRow(w, r.sc, r.cur) }
