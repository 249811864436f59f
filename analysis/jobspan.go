package analysis

import (
	"math"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/storage"
)

// This file finds the job in a device trace recorded without the probe:
// the span in which the recorded command holds memory, and the end of its
// warm-up. A recording starts before the job touches the GPU (Python
// imports, data loading: the device shows nothing) and ends after it has
// freed everything, and the first seconds of a job are its warm-up (the
// CUDA context, the weights, the allocator's cache growing to its working
// size). A slope fitted over all of that measures start-up and teardown,
// not the job: on a short recording of a clean run it reads as a steep
// leak (see bench/README.md, "Figures behind the code's constants").

// procSpan is the span in which any of the GPU's processes holds memory,
// from their NVML samples: from the first sample with memory to the last.
// It reads each process's samples from its start to the first with memory,
// and its last minute (procTail) for the last; only a process whose memory
// ended before that is read whole.
func procSpan(db *storage.DB, run storage.Run, gpu int, pids []int) (from, to int64, ok bool, err error) {
	from, to = math.MaxInt64, math.MinInt64
	for _, pid := range pids {
		it := db.ProcSamples(run, gpu, pid, storage.MinTime, storage.MaxTime)
		for it.Next() {
			if s := it.At(); s.Used > 0 {
				from = min(from, s.T)
				break
			}
		}
		if err := it.Err(); err != nil {
			return 0, 0, false, err
		}
		tail := storage.MinTime
		if run.EndNS > storage.MinTime+procTail {
			tail = run.EndNS - procTail
		}
		for _, lo := range []int64{tail, storage.MinTime} {
			last, found := int64(0), false
			it := db.ProcSamples(run, gpu, pid, lo, storage.MaxTime)
			for it.Next() {
				if s := it.At(); s.Used > 0 {
					last, found = s.T, true
				}
			}
			if err := it.Err(); err != nil {
				return 0, 0, false, err
			}
			if found {
				to = max(to, last)
				break
			}
		}
	}
	return from, to, from <= to, nil
}

// procTail is how far before the run's end procSpan first looks for a
// process's last sample with memory.
const procTail = int64(60e9)

// riseAndFall finds the job in floors of device memory (time order) when
// there is no process series: from the first floor of a sustained rise
// above the idle level to the last floor before the final fall. The idle
// level is the lowest floor; the job holds memory while the floors are
// above idle + max(64 MiB, 10 % of the way to the highest floor), and a
// rise is sustained when the next three floors stay above it too. It
// returns the index range [lo, hi] and false if no floor rises.
func riseAndFall(floors []growth.FloorPoint) (lo, hi int, ok bool) {
	if len(floors) == 0 {
		return 0, 0, false
	}
	idle, top := floors[0].Bytes, floors[0].Bytes
	for _, f := range floors {
		idle, top = min(idle, f.Bytes), max(top, f.Bytes)
	}
	level := idle + max(64<<20, (top-idle)/10)
	if top <= level {
		return 0, len(floors) - 1, false
	}
	lo = -1
	for i := range floors {
		sustained := true
		for k := i; k < min(i+4, len(floors)); k++ {
			sustained = sustained && floors[k].Bytes > level
		}
		if sustained {
			lo = i
			break
		}
	}
	if lo < 0 {
		return 0, len(floors) - 1, false
	}
	hi = lo
	for i := len(floors) - 1; i > lo; i-- {
		if floors[i].Bytes > level {
			hi = i
			break
		}
	}
	return lo, hi, true
}

// deviceJobSpan finds the job of a run that has neither process nor
// allocator samples nor epoch marks before the passes, so that the time
// slices of its per-slice table cover the job and not the start-up or the
// teardown: one extra read of the device series, on the floor grid the
// leak uses. A read error is left for the device pass to report.
func (a *gpuAnalysis) deviceJobSpan() {
	run := a.run
	if a.job != nil || a.hasTorch || !a.hasDevice || len(a.mi.epochs) > 0 || run.EndNS <= run.StartNS {
		return
	}
	w := max((run.EndNS-run.StartNS)/300, max(run.IntervalNS, 1))
	var floors []growth.FloorPoint
	it := a.db.DeviceSamples(run, a.g.Index, run.StartNS, run.EndNS+1)
	for it.Next() {
		s := it.At()
		b := run.StartNS + (s.T-run.StartNS)/w*w
		if n := len(floors); n > 0 && floors[n-1].TNS == b {
			floors[n-1].Bytes = min(floors[n-1].Bytes, s.Used)
		} else {
			floors = append(floors, growth.FloorPoint{TNS: b, Bytes: s.Used})
		}
	}
	if it.Err() != nil {
		return
	}
	if lo, hi, ok := riseAndFall(floors); ok {
		a.job = &JobSpan{FromNS: floors[lo].TNS, ToNS: floors[hi].TNS + w, Basis: "device_rise_fall"}
	}
}
