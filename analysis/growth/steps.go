package growth

import "sort"

// StepMark is one step mark: the step ends at TNS.
type StepMark struct {
	TNS  int64
	Step int
}

// Steps are one rank's step marks, in the order they came. A week of
// training is millions of them a rank, so they are kept as their times and,
// for their numbers, the runs in which each mark's step is the one before's
// plus the same stride (a job's marks are almost always one such run: every
// step, every tenth, or none numbered): 8 bytes a mark, where a StepMark is
// 16. A nil *Steps has no marks.
type Steps struct {
	t    []int64
	runs []stepRun // by first mark; runs[0].i is 0 when there are marks
}

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
func NewSteps(n int) *Steps { return &Steps{t: make([]int64, 0, n)} }

// Add appends the mark of step n at t.
func (s *Steps) Add(t int64, n int) {
	k := len(s.runs)
	switch {
	case k > 0 && len(s.t)-s.runs[k-1].i == 1: // a run's second mark sets its stride
		s.runs[k-1].d = n - s.runs[k-1].n
	case k == 0 || s.stepOf(s.runs[k-1], len(s.t)) != n:
		s.runs = append(s.runs, stepRun{i: len(s.t), n: n})
	}
	s.t = append(s.t, t)
}

// stepOf is the step of mark j in run r.
func (s *Steps) stepOf(r stepRun, j int) int { return r.n + r.d*(j-r.i) }

// Len is how many marks there are.
func (s *Steps) Len() int {
	if s == nil {
		return 0
	}
	return len(s.t)
}

// T is mark i's time.
func (s *Steps) T(i int) int64 { return s.t[i] }

// Step is mark i's step.
func (s *Steps) Step(i int) int {
	k := sort.Search(len(s.runs), func(k int) bool { return s.runs[k].i > i }) - 1
	return s.stepOf(s.runs[k], i)
}

// At is mark i.
func (s *Steps) At(i int) StepMark { return StepMark{TNS: s.t[i], Step: s.Step(i)} }

// Last is the last mark (Len must not be 0).
func (s *Steps) Last() StepMark { return s.At(len(s.t) - 1) }

// Search is the first mark at or after t, or Len where none is.
func (s *Steps) Search(t int64) int {
	n := s.Len()
	return sort.Search(n, func(i int) bool { return s.t[i] >= t })
}
