package growth

import (
	"math"
	"sort"
)

// StepMark is one step mark: the step ends at TNS.
type StepMark struct {
	TNS  int64
	Step int
}

// Steps are one rank's step marks, in the order they came. A week of
// training is millions of them a rank, so they are kept as their times and,
// for their numbers, the runs in which each mark's step is the one before's
// plus the same stride (a job's marks are almost always one such run: every
// step, every tenth, or none numbered). A time is 4 bytes: microseconds
// (the store's unit) after the first mark of its block of stepBlock marks,
// whose time is kept whole; marks that do not fit (out of order, a block
// longer than 71 minutes, a time not in whole microseconds) turn every
// time into 8 bytes. A nil *Steps has no marks.
type Steps struct {
	n    int
	base []int64   // the first mark's time of each block
	off  []uint32  // each mark's time after its block's first, µs
	wide []int64   // every mark's time, once one did not fit off (base and off are then nil)
	runs []stepRun // by first mark; runs[0].i is 0 when there are marks
}

// stepBlock is how many marks share a base time.
const stepBlock = 1024

// stepRun: from mark i until the next run, mark j is step n + d·(j − i).
type stepRun struct{ i, n, d int }

// StepsOf makes Steps of the marks, in their order.
func StepsOf(marks ...StepMark) *Steps {
	s := NewSteps(len(marks))
	for _, m := range marks {
		s.Add(m.TNS, m.Step)
	}
	return s
}

// NewSteps makes empty Steps with room for n marks.
func NewSteps(n int) *Steps {
	return &Steps{base: make([]int64, 0, n/stepBlock+1), off: make([]uint32, 0, n)}
}

// Add appends the mark of step n at t.
func (s *Steps) Add(t int64, n int) {
	k := len(s.runs)
	switch {
	case k > 0 && s.n-s.runs[k-1].i == 1: // a run's second mark sets its stride
		s.runs[k-1].d = n - s.runs[k-1].n
	case k == 0 || s.stepOf(s.runs[k-1], s.n) != n:
		s.runs = append(s.runs, stepRun{i: s.n, n: n})
	}
	s.addTime(t)
	s.n++
}

// addTime keeps the time of mark s.n.
func (s *Steps) addTime(t int64) {
	switch {
	case s.wide != nil:
		s.wide = append(s.wide, t)
		return
	case s.n%stepBlock == 0:
		s.base, s.off = append(s.base, t), append(s.off, 0)
		return
	}
	if d := t - s.base[len(s.base)-1]; d >= 0 && d%1000 == 0 && d/1000 <= math.MaxUint32 {
		s.off = append(s.off, uint32(d/1000))
		return
	}
	wide := make([]int64, s.n, max(cap(s.off), s.n+1))
	for i := range wide {
		wide[i] = s.T(i)
	}
	s.wide, s.base, s.off = append(wide, t), nil, nil
}

// stepOf is the step of mark j in run r.
func (s *Steps) stepOf(r stepRun, j int) int { return r.n + r.d*(j-r.i) }

// Len is how many marks there are.
func (s *Steps) Len() int {
	if s == nil {
		return 0
	}
	return s.n
}

// T is mark i's time.
func (s *Steps) T(i int) int64 {
	if s.wide != nil {
		return s.wide[i]
	}
	return s.base[i/stepBlock] + int64(s.off[i])*1000
}

// Step is mark i's step.
func (s *Steps) Step(i int) int {
	k := sort.Search(len(s.runs), func(k int) bool { return s.runs[k].i > i }) - 1
	return s.stepOf(s.runs[k], i)
}

// Run is the run of marks that holds mark i: marks first to end−1 are
// steps n + d·(j − first), so a walk over the marks reads their steps
// without a search each.
func (s *Steps) Run(i int) (first, end, n, d int) {
	k := sort.Search(len(s.runs), func(k int) bool { return s.runs[k].i > i }) - 1
	r, end := s.runs[k], s.n
	if k+1 < len(s.runs) {
		end = s.runs[k+1].i
	}
	return r.i, end, r.n, r.d
}

// At is mark i.
func (s *Steps) At(i int) StepMark { return StepMark{TNS: s.T(i), Step: s.Step(i)} }

// Last is the last mark (Len must not be 0).
func (s *Steps) Last() StepMark { return s.At(s.n - 1) }

// Search is the first mark at or after t, or Len where none is.
func (s *Steps) Search(t int64) int {
	n := s.Len()
	return sort.Search(n, func(i int) bool { return s.T(i) >= t })
}
