package merge

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/memrec/memrec/storage"
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

// Errors of Runs a caller can test with errors.Is.
var (
	ErrSameHost   = errors.New("two runs were recorded on the same host")
	ErrOtherJob   = errors.New("runs belong to different jobs")
	ErrGPUOverlap = errors.New("runs share a GPU")
	ErrMerged     = errors.New("run is already a merge of several hosts")
	ErrNoInput    = errors.New("nothing to merge")
)

// Input is one node's run. DB may be shared by several inputs.
type Input struct {
	File string // for messages
	DB   *storage.DB
	Run  storage.Run
}

// Options configure Runs.
type Options struct {
	// Name of the merged run; "" uses the job, or else the first run's name.
	Name string
	// Replace deletes a stored run of the same name instead of refusing.
	Replace bool
}

// Runs writes the runs of in as one run into db, in one transaction:
// either the whole merged run is written or nothing is. The runs must be
// of one job (the same Run.Job), from different hosts, with no GPU (by
// UUID) in two of them; otherwise nothing is written and the error wraps
// ErrOtherJob, ErrSameHost or ErrGPUOverlap and names the files. GPUs are
// numbered in input order (the first run's GPUs first); each keeps its host
// and NVML index (GPU.Host, GPU.HostGPU). Every time of input k is moved by
// Hosts[k].OffsetNS onto the first input's clock. db must not be one of the
// inputs' databases. It blocks until done, or until ctx is done: it then
// returns ctx's error and nothing is written. The inputs are only read, by
// storage's iterators, and may be read by others meanwhile.
func Runs(ctx context.Context, db *storage.DB, in []Input, opts Options) (storage.Run, error) {
	if len(in) < 2 {
		return storage.Run{}, fmt.Errorf("%w: give at least two runs", ErrNoInput)
	}
	if err := checkMergeable(in); err != nil {
		return storage.Run{}, err
	}
	hosts, err := alignClocks(ctx, in)
	if err != nil {
		return storage.Run{}, err
	}
	out, gpuMap := mergedRun(in, hosts, opts)
	runs, err := db.Load(func(l *storage.Loader) error {
		if _, err := l.Start(out, opts.Replace); err != nil {
			return err
		}
		return writeMerged(ctx, l, in, hosts, gpuMap)
	})
	if err != nil {
		return storage.Run{}, err
	}
	return runs[0], nil
}

// mergedRun returns the record of the merged run (its name, span, tags and
// GPUs renumbered in input order) and, per input, the map from its GPU
// indexes to the merged ones.
func mergedRun(in []Input, hosts []storage.HostInfo, opts Options) (storage.Run, []map[int]int) {
	out := storage.Run{Name: opts.Name, Job: in[0].Run.Job, Hosts: hosts, StartNS: storage.MaxTime, IntervalNS: in[0].Run.IntervalNS, Complete: true}
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
		slices.SortFunc(gpus, func(a, b storage.GPU) int { return a.Index - b.Index })
		gpuMap[k] = map[int]int{}
		for _, g := range gpus {
			gpuMap[k][g.Index] = len(out.GPUs)
			out.GPUs = append(out.GPUs, storage.GPU{Index: len(out.GPUs), UUID: g.UUID, Name: g.Name, TotalBytes: g.TotalBytes, Host: r.Host, HostGPU: g.Index})
		}
	}
	if out.EndNS < out.StartNS {
		out.EndNS = out.StartNS
	}
	return out, gpuMap
}

// writeMerged writes every input's rows, moved onto the first input's clock
// and merged by time, into the run l has started.
func writeMerged(ctx context.Context, l *storage.Loader, in []Input, hosts []storage.HostInfo, gpuMap []map[int]int) error {
	var its []Iterator[rowSource]
	var owner []int // input of each iterator
	for k, inp := range in {
		series, err := inp.DB.Series(inp.Run)
		if err != nil {
			return fmt.Errorf("%s: %w", inp.File, err)
		}
		its = append(its, inputRows(inp, series, hosts[k].OffsetNS, gpuMap[k])...)
		for len(owner) < len(its) {
			owner = append(owner, k)
		}
	}
	m := New(func(r rowSource) int64 { return r.time() }, its...)
	for n := 0; m.Next(); n++ {
		if n%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if err := m.At().writeTo(l); err != nil {
			return fmt.Errorf("%s: %w", in[owner[m.Source()]].File, err)
		}
	}
	return m.Err()
}

// cancelEvery is how many rows the merge writes between two looks at its
// context.
const cancelEvery = 1024

// checkMergeable refuses runs that are not the nodes of one job.
func checkMergeable(in []Input) error {
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
func stepClock(ctx context.Context, inp Input) (map[stepKey]int64, error) {
	seen := map[[2]int]int{} // rank, step -> times seen
	times := map[stepKey][]int64{}
	it := inp.DB.Marks(inp.Run, storage.MinTime, storage.MaxTime)
	for n := 0; it.Next(); n++ {
		if n%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
		}
		m := it.At()
		if m.Kind != wire.MarkStep || m.Step == storage.None {
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
func alignClocks(ctx context.Context, in []Input) ([]storage.HostInfo, error) {
	hosts := make([]storage.HostInfo, len(in))
	var ref map[stepKey]int64
	for k, inp := range in {
		r := inp.Run
		hosts[k] = storage.HostInfo{Name: r.Host, Run: r.Name, Job: r.Job, GPUs: len(r.GPUs), Complete: r.Complete, Recorder: r.Recorder}
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
	Iterator[rowSource]
	time() int64
	writeTo(l *storage.Loader) error
}

// inputRows returns one input's series as row sources.
func inputRows(inp Input, series []storage.SeriesRef, shift int64, gpus map[int]int) []Iterator[rowSource] {
	db, r := inp.DB, inp.Run
	remap := func(g int) int {
		if n, ok := gpus[g]; ok {
			return n
		}
		return storage.None
	}
	const from, to = storage.MinTime, storage.MaxTime
	var its []Iterator[rowSource]
	for _, s := range series {
		switch s.Kind {
		case storage.SeriesDevice:
			its = append(its, &rowIter[storage.DeviceSample]{it: db.DeviceSamples(r, s.GPU, from, to), write: (*storage.Loader).AppendDevice,
				fix: func(v *storage.DeviceSample) int64 {
					v.T -= shift
					v.GPU = remap(v.GPU)
					return v.T
				}})
		case storage.SeriesProc:
			its = append(its, &rowIter[storage.ProcSample]{it: db.ProcSamples(r, s.GPU, s.PID, from, to), write: (*storage.Loader).AppendProc,
				fix: func(v *storage.ProcSample) int64 {
					v.T -= shift
					v.GPU = remap(v.GPU)
					return v.T
				}})
		case storage.SeriesTorch:
			its = append(its, &rowIter[storage.TorchSample]{it: db.TorchSamples(r, s.GPU, s.PID, from, to), write: (*storage.Loader).AppendTorch,
				fix: func(v *storage.TorchSample) int64 {
					v.T -= shift
					v.GPU = remap(v.GPU)
					return v.T
				}})
		case storage.SeriesBudget:
			its = append(its, &rowIter[storage.BudgetSample]{it: db.BudgetSamples(r, s.GPU, s.PID, from, to), write: (*storage.Loader).AppendBudget,
				fix: func(v *storage.BudgetSample) int64 {
					v.T -= shift
					v.GPU = remap(v.GPU)
					v.Optimizer, v.OptimizerKeys, v.DType = strings.Clone(v.Optimizer), strings.Clone(v.OptimizerKeys), strings.Clone(v.DType)
					return v.T
				}})
		case storage.SeriesSites:
			its = append(its, &rowIter[storage.SiteSample]{it: db.SiteSamples(r, s.GPU, s.PID, from, to), write: (*storage.Loader).AppendSiteRow,
				fix: func(v *storage.SiteSample) int64 {
					v.T -= shift
					if v.SinceNS != 0 {
						v.SinceNS -= shift
					}
					v.GPU = remap(v.GPU)
					v.Reason, v.Name, v.File, v.Func, v.Stack = storage.SitesReason(strings.Clone(string(v.Reason))), strings.Clone(v.Name), strings.Clone(v.File), strings.Clone(v.Func), strings.Clone(v.Stack)
					return v.T
				}})
		}
	}
	its = append(its, &rowIter[storage.Mark]{it: db.Marks(r, from, to), write: (*storage.Loader).AppendMark,
		fix: func(v *storage.Mark) int64 {
			v.T -= shift
			if v.GPU != storage.None {
				v.GPU = remap(v.GPU)
			}
			v.Text = strings.Clone(v.Text)
			return v.T
		}})
	return its
}

// rowIter is one series of an input as a rowSource.
type rowIter[T any] struct {
	it    *storage.Iter[T]
	fix   func(*T) int64 // to the merged run's clock and GPU numbers; returns the row's time
	write func(*storage.Loader, T) error
	cur   T
	t     int64
}

func (r *rowIter[T]) Next() bool {
	if !r.it.Next() {
		return false
	}
	r.cur = r.it.At()
	r.t = r.fix(&r.cur)
	return true
}

func (r *rowIter[T]) At() rowSource                   { return r }
func (r *rowIter[T]) Err() error                      { return r.it.Err() }
func (r *rowIter[T]) time() int64                     { return r.t }
func (r *rowIter[T]) writeTo(l *storage.Loader) error { return r.write(l, r.cur) }
