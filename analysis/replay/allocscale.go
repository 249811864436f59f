package replay

import (
	"fmt"
	"math"

	"github.com/memrec/memrec/storage"
)

// ReplayScale is a job's requests to the caching allocator at any value of
// a setting (a batch size, a sequence length), from its traces at two
// values: the higher value's requests, in its order, each sized from its
// size there and the size of the matching request at the lower value, on
// the line through the two; for a setting other than a batch size, on the
// larger of that line and the power of the value the two show (a request
// that grew with the square of a sequence length, an attention's scores,
// grows so on; one that grew less than in proportion keeps to its line).
// A batch's requests are a sample's times the batch, plus what does not
// depend on it: they grow on their line.
//
// The requests of the two runs are matched by their longest common
// subsequence (Myers' diff) under "the same request": of equal size, or
// of a size that grew with the value (within 5 % and 64 KiB of the
// lower's times the values' ratio, or, for a setting other than a batch
// size, times its square). Runs at two batches make the same
// requests in the same order except where a library chose otherwise for
// the shape (cuDNN's workspaces, an algorithm per batch). A request only the
// higher run made keeps its size where it is at most 1 MiB and grows with
// the value otherwise (the pessimistic reading: a workspace of that
// batch's shape); the order of frees is the higher run's.
type ReplayScale struct {
	LowValue, HighValue float64
	// Requests is the higher run's allocations, Matched those matched
	// with the lower run's.
	Requests, Matched int
	// Chosen is the largest request above 1 MiB of the higher run that the
	// lower did not make: one a library sized for the shape.
	Chosen int64

	perSample bool // a batch size: no request grows faster than the value
	// Power is how an unmatched request grows: with the value to this
	// power, 1 for a batch size, for another setting the power the job's
	// peak allocated grew by between the two runs (at least 1).
	Power float64
	ops   []storage.AllocOp // the higher run's
	lower []int64           // per op of ops: the matching request's size at LowValue, or -1
	// Settings is the allocator Largest and Fitting replay the requests
	// under; the zero value is PyTorch's default.
	Settings AllocSettings
}

// NewReplayScale matches the requests of the runs at low and high
// (low < high).
//
// perSample is set for a batch size (IsBatchTag): a sample's requests do
// not grow with the number of samples, so none is matched by the square.
func NewReplayScale(lowValue float64, low storage.AllocTrace, highValue float64, high storage.AllocTrace, perSample bool) ReplayScale {
	var ia, ib []int
	for i, o := range low.Ops {
		if !o.Free {
			ia = append(ia, i)
		}
	}
	for i, o := range high.Ops {
		if !o.Free {
			ib = append(ib, i)
		}
	}
	r := highValue / lowValue
	match := commonSubsequence(len(ia), len(ib), func(i, j int) bool {
		s1, s2 := float64(low.Ops[ia[i]].Size), float64(high.Ops[ib[j]].Size)
		if s1 == s2 {
			return true
		}
		return math.Abs(s2-r*s1) < 0.05*r*s1+64<<10 || !perSample && math.Abs(s2-r*r*s1) < 0.05*r*r*s1+64<<10
	})
	s := ReplayScale{LowValue: lowValue, HighValue: highValue, Requests: len(ib), perSample: perSample, ops: high.Ops, lower: make([]int64, len(high.Ops))}
	for i := range s.lower {
		s.lower[i] = -1
	}
	s.Power = 1
	if !perSample {
		a, errA := ReplayAllocator(low.Ops, 0)
		b, errB := ReplayAllocator(high.Ops, 0)
		if errA == nil && errB == nil && a.PeakAllocated > 0 && b.PeakAllocated > a.PeakAllocated {
			s.Power = max(1, math.Log(float64(b.PeakAllocated)/float64(a.PeakAllocated))/math.Log(r))
		}
	}
	for j, i := range ib {
		if match[j] >= 0 {
			s.lower[i] = low.Ops[ia[match[j]]].Size
			s.Matched++
		} else if size := high.Ops[i].Size; size > replaySmallSize {
			s.Chosen = max(s.Chosen, size)
		}
	}
	return s
}

// At returns the requests at value v.
func (s ReplayScale) At(v float64) []storage.AllocOp {
	out := make([]storage.AllocOp, len(s.ops))
	copy(out, s.ops)
	for i, o := range s.ops {
		if o.Free {
			continue
		}
		size := float64(o.Size)
		switch lo := s.lower[i]; {
		case lo >= 0:
			line := size + (size-float64(lo))*(v-s.HighValue)/(s.HighValue-s.LowValue)
			if !s.perSample && lo > 0 && size > float64(lo) && v > s.HighValue {
				k := math.Log(size/float64(lo)) / math.Log(s.HighValue/s.LowValue)
				line = max(line, size*math.Pow(v/s.HighValue, k))
			}
			size = line
		case o.Size > replaySmallSize:
			size *= s.Grown(v)
		}
		out[i].Size = max(1, int64(size))
	}
	return out
}

// Grown is how much an unmatched request grows from HighValue to v.
func (s ReplayScale) Grown(v float64) float64 {
	if s.Power == 1 {
		return v / s.HighValue
	}
	return math.Pow(v/s.HighValue, s.Power)
}

// GrownWords says how an unmatched request grows.
func (s ReplayScale) GrownWords() string {
	if s.Power == 1 {
		return "grown with the value"
	}
	return fmt.Sprintf("grown with the value to the power %.2f, as the job's peak", s.Power)
}

// Largest returns the largest value from HighValue up (an integer where
// integer) below which every value's requests replay on a device of
// capacity(v) bytes of segments, and the replay there. Where HighValue does
// not replay, the largest between LowValue and it that does; false when
// not even LowValue does.
//
// Near the limit whether a value fits is not monotone in the value: which
// segments end up split, and how much room they strand, changes with every
// size and with when the allocator frees its cache (a model's requests
// scaled near its limit can fail at one value, pass at the next two and
// fail again: see bench/README.md, "Figures behind the code's
// constants"). A bisection finds one edge;
// the values below it, down to LargestWindow of it, are then tried in up
// to largestProbes steps, and the first failure among them sets the answer.
func (s ReplayScale) Largest(capacity func(v float64) float64, integer bool) (float64, ReplayResult, bool) {
	try := func(v float64) (ReplayResult, bool) {
		c := capacity(v)
		if c < 1 { // no room (ReplayAllocator reads 0 as unlimited)
			return ReplayResult{}, false
		}
		r, err := ReplayAllocatorWith(s.At(v), int64(c), s.Settings)
		return r, err == nil && r.OK
	}
	lo := s.HighValue
	best, ok := try(lo)
	if !ok {
		// Below the higher run's value (less room than it had: headroom,
		// or the pessimistic end): bisected down to the lower's.
		return s.below(try, integer)
	}
	hi := lo * 2
	for {
		r, ok := try(hi)
		if !ok {
			break
		}
		lo, best, hi = hi, r, hi*2
		if hi > MaxTagValue {
			return lo, best, true
		}
	}
	lo, best = bisectReplay(lo, hi, best, try, integer)
	// The window below the edge, from its bottom up: at the first failure
	// there the edge moves to the value tried before it, and the window
	// with it.
	for range largestRounds {
		bottom := max(s.HighValue, lo*(1-LargestWindow))
		step := (lo - bottom) / largestProbes
		if integer {
			bottom, step = math.Ceil(bottom), math.Max(1, math.Ceil(step))
		}
		if step <= 0 {
			break
		}
		moved := false
		for v := bottom; v < lo; v += step {
			if _, ok := try(v); !ok {
				moved = true
				for lo = v - step; lo > s.HighValue; lo -= step {
					if r, ok := try(lo); ok {
						best = r
						break
					}
				}
				break
			}
		}
		if lo <= s.HighValue {
			r, _ := try(s.HighValue)
			return s.HighValue, r, true
		}
		if !moved {
			break
		}
	}
	return lo, best, true
}

// below is Largest between LowValue and HighValue, where HighValue does
// not replay.
func (s ReplayScale) below(try func(v float64) (ReplayResult, bool), integer bool) (float64, ReplayResult, bool) {
	best, ok := try(s.LowValue)
	if !ok {
		return 0, best, false
	}
	v, r := bisectReplay(s.LowValue, s.HighValue, best, try, integer)
	return v, r, true
}

// bisectReplay narrows lo, which replays (its replay best), and hi, which
// does not, to within one (integer) or 1e-4 of lo, and returns the low end
// and its replay.
func bisectReplay(lo, hi float64, best ReplayResult, try func(v float64) (ReplayResult, bool), integer bool) (float64, ReplayResult) {
	for {
		mid := (lo + hi) / 2
		if integer {
			if hi-lo <= 1 {
				break
			}
			mid = math.Floor(mid)
		} else if hi-lo <= lo*1e-4 {
			break
		}
		if r, ok := try(mid); ok {
			lo, best = mid, r
		} else {
			hi = mid
		}
	}
	return lo, best
}

// LargestWindow is how far below the edge a bisection finds Largest tries
// the values again, as a share of the edge; largestProbes is in how many
// steps at most, largestRounds how often the window may move down. The
// room the allocator strands changes by up to a few of its largest
// segments between neighbouring values, a few per cent of the value near
// the limit.
const (
	LargestWindow = 0.03
	largestProbes = 96
	largestRounds = 8
)

// commonSubsequence is Myers' O((n+m)·d) diff of two sequences given by
// their lengths and an equality: for each element j of the second, the
// element of the first it is matched to, or -1.
func commonSubsequence(n, m int, eq func(i, j int) bool) []int {
	match := make([]int, m)
	for i := range match {
		match[i] = -1
	}
	limit := n + m
	off := limit + 1
	v := make([]int, 2*limit+3)
	var trace [][]int // v over [-d-1, d+1] after each d
	for d := 0; d <= limit; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || k != d && v[off+k-1] < v[off+k+1] {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && eq(x, y) {
				x++
				y++
			}
			v[off+k] = x
			if x >= n && y >= m {
				trace = append(trace, append([]int(nil), v[off-d-1:off+d+2]...))
				backtrackDiff(trace, n, m, match)
				return match
			}
		}
		trace = append(trace, append([]int(nil), v[off-d-1:off+d+2]...))
	}
	return match
}

func backtrackDiff(trace [][]int, x, y int, match []int) {
	for d := len(trace) - 1; d > 0; d-- {
		at := func(k int) int { return trace[d-1][k+d] } // trace[d-1] covers [-d, d]
		k := x - y
		pk := k - 1
		if k == -d || k != d && at(k-1) < at(k+1) {
			pk = k + 1
		}
		px := at(pk)
		py := px - pk
		for x > px && y > py {
			x, y = x-1, y-1
			match[y] = x
		}
		x, y = px, py
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		match[y] = x
	}
}

// Fitting is the largest value whose requests replay
// within avail bytes at end e of need's interval: at the pessimistic end
// the device is short of what the steepest reading of the runs adds to
// the middle one (the line through the two largest values, which the
// replay's sizes follow) and of Chosen grown with the value, at the
// optimistic end it has what the flattest takes away.
//
// Chosen stands for what the runs cannot show: a library that sizes a
// request for the shape (cuDNN takes the largest workspace among the
// plans that fit in the free memory) may make others at the larger
// value, and their segments, split by later requests, strand room the
// replay does not know of; without Chosen the replay can put the limit
// above a batch that fails (see bench/README.md, "Figures behind the
// code's constants").
func (s ReplayScale) Fitting(need NeedCurve, avail float64, e End, integer bool) (float64, ReplayResult, bool) {
	return s.FittingPlus(need, avail, nil, e, integer)
}

// FittingPlus is Fitting on a device with plus(v) more bytes at value v
// (what a remedy frees there); nil is none.
func (s ReplayScale) FittingPlus(need NeedCurve, avail float64, plus func(v float64) float64, e End, integer bool) (float64, ReplayResult, bool) {
	v, r, ok := s.Largest(func(v float64) float64 {
		a := avail
		if plus != nil {
			a += plus(v)
		}
		lo, mid, hi := need.At(v)
		switch e {
		case Pessimistic:
			if !s.perSample && hi > mid {
				// The requests' own growth (a power of the value) may
				// already hold some of what the steepest reading adds.
				if r, err := ReplayAllocatorWith(s.At(v), 0, s.Settings); err == nil {
					mid = max(mid, float64(r.PeakAllocated))
				}
			}
			return a - max(0, hi-mid) - float64(s.Chosen)*s.Grown(v)
		case Optimistic:
			return a + (mid - lo)
		}
		return a
	}, integer)
	if !ok || e != Pessimistic {
		return v, r, ok
	}
	// Less room is not always a smaller value near the limit (the
	// allocator frees its cache at other moments and packs otherwise): the
	// pessimistic end is never above the middle.
	if vm, rm, okm := s.FittingPlus(need, avail, plus, Middle, integer); okm && vm < v {
		return vm, rm, true
	}
	return v, r, ok
}
