package analysis

import (
	"math"
	"slices"

	"github.com/memrec/memrec/analysis/growth"
)

// Without step marks, a job can still show its step on the device when it
// gives memory back at every step (torch.cuda.empty_cache() in the loop, a
// framework without a caching allocator): device memory then falls once a
// step, a sawtooth. fallPeriod finds such a period; most PyTorch jobs keep
// their cache and show none, and then nothing is inferred.

// periodWindow is how much of the job fallPeriod reads: its middle minute.
const periodWindow = int64(60e9)

// stepPattern is the regular falls fallPeriod found in a span of device
// memory: their median spacing (the period) and depth.
type stepPattern struct {
	from, to int64 // the span read
	period   int64
	falls    int
	depth    int64
	ok       bool
}

// fallPeriod finds the period of regular falls in a device series (time
// order): a fall is a drop by more than half of the series' range and at
// least 16 MiB, consecutive dropping samples counting as one. It needs at
// least six falls whose spacings lie within 15 % of their median (median
// absolute deviation); the period is that median, and the depth the
// falls' median depth.
func fallPeriod(t, v []int64) stepPattern {
	if len(v) < 3 {
		return stepPattern{}
	}
	lo, hi := slices.Min(v), slices.Max(v)
	f := fallFinder{thr: max(16<<20, (hi-lo)/2)}
	for i := range v {
		f.add(t[i], v[i])
	}
	falls := f.done()
	at := make([]int64, len(falls))
	depths := make([]float64, len(falls))
	for i, x := range falls {
		at[i], depths[i] = x.at, float64(x.depth)
	}
	if len(at) < 6 {
		return stepPattern{falls: len(at)}
	}
	d := make([]float64, len(at)-1)
	for i := range d {
		d[i] = float64(at[i+1] - at[i])
	}
	slices.Sort(d)
	m := growth.Median(d)
	dev := make([]float64, len(d))
	for i, x := range d {
		dev[i] = math.Abs(x - m)
	}
	slices.Sort(dev)
	if m <= 0 || growth.Median(dev) > 0.15*m {
		return stepPattern{falls: len(at)}
	}
	slices.Sort(depths)
	return stepPattern{period: int64(m), falls: len(at), depth: int64(growth.Median(depths)), ok: true}
}

// stepFall is one fall of device memory: the first sample below the level
// it fell from, and how far it fell.
type stepFall struct{ at, depth int64 }

// fallFinder finds the falls of a device series, sample by sample in time
// order: consecutive dropping samples are one fall, from the last sample
// before it to the lowest, and it counts when it drops by more than thr.
type fallFinder struct {
	thr          int64
	out          []stepFall
	prev, top    int64
	at           int64
	have, inFall bool
}

func (f *fallFinder) add(t, v int64) {
	switch {
	case f.have && v < f.prev:
		if !f.inFall {
			f.inFall, f.top, f.at = true, f.prev, t
		}
	case f.inFall:
		f.end()
	}
	f.prev, f.have = v, true
}

// end closes the fall in progress at the last sample taken.
func (f *fallFinder) end() {
	if d := f.top - f.prev; d > f.thr {
		f.out = append(f.out, stepFall{at: f.at, depth: d})
	}
	f.inFall = false
}

// done closes a fall still in progress and returns the falls.
func (f *fallFinder) done() []stepFall {
	if f.inFall {
		f.end()
	}
	return f.out
}
