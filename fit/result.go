package fit

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/replay"
)

// Result is the search's answer so far: its trials, the bracket and the
// recommended value. Call it once, after Run.
func (s *Search) Result() Result {
	s.finish()
	return s.res
}

// finish fills in the result: the bracket and the recommended value.
func (s *Search) finish() {
	r := &s.res
	r.TrialsUsed = len(r.Trials)
	r.Seconds = time.Since(s.start).Seconds()
	if !math.IsNaN(s.lo) {
		r.LargestRan = ptr(s.lo)
		r.Precision = s.precision()
	}
	if !math.IsNaN(s.hi) {
		r.SmallestFailed = ptr(s.hi)
	}
	r.Recommended = s.recommend()
	if n, gpu, ok := s.shared(); ok {
		shared := fmt.Sprintf("%d processes share GPU %d: each one's allocator keeps a cache the others cannot use, so a value near the limit may run once and fail the next time", n, gpu)
		if !math.IsNaN(s.lo) {
			ran, tried := s.trialsAt(s.lo)
			shared += fmt.Sprintf("; %s ran %d of %d times", Arg(s.lo), ran, tried)
		}
		if flaky := s.ranAndFailed(); len(flaky) > 0 {
			shared += "; ran, then failed: " + strings.Join(flaky, ", ")
		}
		r.Note = strings.TrimPrefix(r.Note+"; "+shared+"; leave the headroom", "; ")
	}
}

// ranAndFailed are the values tried that both ran and failed, ascending.
func (s *Search) ranAndFailed() []string {
	var vs []float64
	for _, t := range s.res.Trials {
		if ran, tried := s.trialsAt(t.Value); t.Repeat < 2 && ran > 0 && ran < tried {
			vs = append(vs, t.Value)
		}
	}
	slices.Sort(vs)
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = Arg(v)
	}
	return out
}

// shared finds a GPU that several processes' allocators shared in a
// trial (the most of them): the ranks of a job that put two on one GPU.
func (s *Search) shared() (n, gpu int, ok bool) {
	for _, r := range s.trials {
		if r == nil {
			continue
		}
		for _, g := range r.GPUs {
			if g.SharedBy > n {
				n, gpu, ok = g.SharedBy, g.GPU, true
			}
		}
	}
	return n, gpu, ok
}

func ptr(v float64) *float64 { return &v }

// ranTrials counts the trials that ran.
func (s *Search) ranTrials() int {
	n := 0
	for _, t := range s.res.Trials {
		if t.Outcome.Ran() {
			n++
		}
	}
	return n
}

// recommend is the largest value whose need, with the whole-run margin,
// fits in what the largest value that ran used at its step peak, less the
// headroom: the need projected through the values that ran (their step
// peaks, the pessimistic reading), never above the largest that ran.
func (s *Search) recommend() *float64 {
	if math.IsNaN(s.lo) {
		return nil
	}
	// The trials' step peaks are of the same few steps; the given runs'
	// (their whole length) only where fewer than two trials ran.
	var total int64
	var xs, ys []float64
	reps := s.trials
	if s.ranTrials() < 2 {
		reps = s.reports()
	}
	for _, r := range reps {
		if r == nil || analysis.RanOutOfMemory(r) {
			continue
		}
		for _, g := range r.GPUs {
			if total == 0 || (g.TotalBytes > 0 && g.TotalBytes < total) {
				total = g.TotalBytes
			}
		}
		v, ok := s.valueOf(r)
		if p := stepPeak(r); ok && p != nil {
			xs, ys = append(xs, v), append(ys, float64(*p))
		}
	}
	if s.loPeak == 0 || total == 0 {
		return ptr(s.lo)
	}
	// The rise beyond the growth scales with the value; the growth is
	// bytes a step whatever the value (WholeRun.Allowance).
	room, margin := float64(s.loPeak)-s.res.Headroom*float64(total), 0.0
	if w := s.res.WholeRun; w != nil {
		margin = w.Fraction
		room -= w.Allowance(room)
	}
	avail := room / (1 + margin)
	var v float64
	newCurve := replay.NewNeedCurve
	if replay.IsBatchTag(s.opt.By) {
		newCurve = replay.NewBatchNeedCurve
	}
	if c, err := newCurve(xs, ys); err == nil {
		v, _ = c.Solve(avail, replay.Pessimistic)
	} else {
		v = s.lo * avail / float64(s.loPeak) // one value: the need taken as proportional to it
	}
	v = math.Min(s.clamp(v), s.lo)
	if v < s.opt.Min || avail <= 0 {
		return nil
	}
	return ptr(v)
}
