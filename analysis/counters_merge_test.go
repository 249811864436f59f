package analysis

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// TestCountersAsMerged: allocatorCounters, which reads each process's
// series on its own, gives what the sums of every sample merged in time
// order give (countersByMerge, the rule as first written), on runs of
// several processes with ties at their first samples, counters that
// rise and restart, and windows that carry samples in.
func TestCountersAsMerged(t *testing.T) {
	fs := wire.Counters(wire.TorchFields)
	for seed := uint64(1); seed <= 12; seed++ {
		db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		runs, err := jsonl.Import(db, []jsonl.Source{{Name: "c", R: strings.NewReader(randomCountersRun(seed))}}, jsonl.ImportOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := runs[0]
		rng := rand.New(rand.NewPCG(seed, 7))
		windows := []storage.Run{r}
		for range 4 {
			a := r.StartNS + rng.Int64N(4e9)
			windows = append(windows, r.Within(a, a+rng.Int64N(4e9)+1))
		}
		for wi, w := range windows {
			rep, err := Analyze(db, w, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rep.GPUs) == 0 {
				continue
			}
			pids := []int{10, 11, 12}
			warm := growthWarmup(t, db, w)
			got, err := allocatorCounters(db, w, 0, pids, &rep.GPUs[0], warm, fs)
			if err != nil {
				t.Fatal(err)
			}
			want, err := countersByMerge(db, w, 0, pids, &rep.GPUs[0], warm, fs)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("seed %d, window %d: %s, merged %s", seed, wi, countersText(got), countersText(want))
			}
		}
		db.Close()
	}
}

// randomCountersRun is 5 s of steps with three processes' allocator
// samples on GPU 0: on 10 ms ticks, so processes often share a time (the
// first one too), each counter rising by small steps and now and then
// back to a lower value (a process restarted).
func randomCountersRun(seed uint64) string {
	rng := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.WriteString(`{"type":"run","name":"c","start_ns":1000000000}` + "\n")
	b.WriteString(`{"type":"gpu","gpu":0,"total_bytes":1000000}` + "\n")
	counts := map[int][4]int64{}
	for tick := int64(0); tick < 500; tick++ {
		t := 1e9 + tick*1e7
		if tick%100 == 0 {
			fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":%d}`+"\n", t, tick/100)
		}
		if tick%10 == 5 {
			fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"step","step":%d}`+"\n", t, tick/10)
		}
		for _, pid := range []int{10, 11, 12} {
			if rng.IntN(3) == 0 {
				continue
			}
			c := counts[pid]
			for i := range c {
				if rng.IntN(50) == 0 {
					c[i] = 0
				} else {
					c[i] += rng.Int64N(3)
				}
			}
			counts[pid] = c
			fmt.Fprintf(&b, `{"type":"torch","t_ns":%d,"gpu":0,"pid":%d,"allocated_bytes":10,"reserved_bytes":20,"alloc_retries":%d,"ooms":%d,"device_allocs":%d,"device_frees":%d}`+"\n",
				t, pid, c[0], c[1], c[2], c[3])
		}
		if tick%100 == 99 {
			fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":%d}`+"\n", t, tick/100)
		}
	}
	return b.String()
}

func countersText(cs []Counter) string {
	var b strings.Builder
	for _, c := range cs {
		per := "-"
		if c.PerStep != nil {
			per = fmt.Sprint(*c.PerStep)
		}
		fmt.Fprintf(&b, "%s %d %s/%d; ", c.Name, c.Total, per, c.Steps)
	}
	return b.String()
}

// countersByMerge is the counters' rule read off every sample of the
// GPU's allocator series merged in time order: the sum of each process's
// rise since its last sample, taken at the first sample and at the rate's
// bounds.
func countersByMerge(db *storage.DB, run storage.Run, gpu int, pids []int, gr *GPUReport, warm growth.Warmup,
	fs []wire.Field[storage.TorchSample]) ([]Counter, error) {
	last := map[int]storage.TorchSample{}
	sum := make([]int64, len(fs))
	take := func(x storage.TorchSample) {
		prev := last[x.PID]
		last[x.PID] = x
		for i, f := range fs {
			sum[i] += f.Get(x) - f.Get(prev)
		}
	}
	if before, ok := run.Before(windowLookBack); ok {
		carried := mergeTorch(db, before, gpu, pids)
		for carried.Next() {
			take(carried.At())
		}
		if err := carried.Err(); err != nil {
			return nil, err
		}
	}
	from, to, steps := rateSpan(gr, warm)
	var base, atFrom, atTo []int64
	it := mergeTorch(db, run, gpu, pids)
	for it.Next() {
		x := it.At()
		if base != nil && atFrom == nil && x.T > from {
			atFrom = slices.Clone(sum)
		}
		if base != nil && atTo == nil && x.T > to {
			atTo = slices.Clone(sum)
		}
		take(x)
		if base == nil {
			base = slices.Clone(sum)
			if x.T > from {
				atFrom = base
			}
			if x.T > to {
				atTo = base
			}
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if base == nil {
		return nil, nil
	}
	if atFrom == nil {
		atFrom = sum
	}
	if atTo == nil {
		atTo = sum
	}
	out := make([]Counter, len(fs))
	for i, f := range fs {
		out[i] = Counter{Name: f.ColumnName(), Total: sum[i] - base[i], Help: f.Help}
		if steps > 0 {
			r := float64(atTo[i]-atFrom[i]) / float64(steps)
			out[i].PerStep, out[i].Steps = &r, steps
		}
	}
	return out, nil
}
