package fit

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/compare"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// Options are what the search is asked: the tag the value is stored
// under, the steps a trial must run, the range and grain of the values, the
// headroom of the recommendation (a fraction of the GPU) and the fit's id.
// A zero Multiple means integers, to 2 %; a zero Max, no bound but Ceiling
// and the GPU's.
type Options struct {
	By       string
	Steps    int
	Min      float64
	Max      float64
	Multiple float64
	Headroom float64
	ID       string
	// Grace is how long a trial has to exit after it is asked to, before
	// its process group is killed.
	Grace time.Duration
	// Budget bounds what analysing the given runs and every trial keeps,
	// together: their reports are all kept to the end (nil: one of
	// storage.DefaultDecodeBudget for the search).
	Budget *storage.DecodeBudget
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// Ceiling is the largest value fit tries, whatever the flags: no batch
// size or length a GPU holds comes near it, and values stay whole numbers
// a float64 holds exactly.
const Ceiling = 1 << 31

// maxValue is the largest value to try: --max; without it the smaller of
// Ceiling and --min plus four times the units the GPU's memory holds
// at the growth per unit the trials measured (once there is one).
func (s *Search) maxValue() (v float64, words string) {
	if s.opt.Max > 0 {
		return s.opt.Max, "--max"
	}
	if s.maxDerived == 0 || s.maxAt != len(s.trials) {
		s.maxAt, s.maxDerived = len(s.trials), Ceiling
		if by := s.byTag(); by != nil && by.Need != nil && by.Need.MarginalBytesPerUnit > 0 {
			if avail := by.Available(0); avail > 0 {
				s.maxDerived = min(Ceiling, s.opt.Min+4*avail/by.Need.MarginalBytesPerUnit)
			}
		}
	}
	if s.maxDerived < Ceiling {
		return s.maxDerived, "four times what the GPU holds at the measured growth per unit; give --max to go further"
	}
	return s.maxDerived, "the ceiling of 2^31"
}

// Search runs the trials: what they showed, and the bracket they make.
// It is not safe for concurrent use; Given, then Run, then Result, once
// each.
type Search struct {
	opt    Options
	db     *storage.DB
	launch Launcher
	start  time.Time
	// Say takes a line of progress (a prediction, why a value is tried);
	// OnTrial each trial as it ends. Either may be nil.
	Say     func(string)
	OnTrial func(Trial)
	res     Result
	// given are the reports of the runs named by --runs; trials those of
	// the trials so far (nil for a trial whose run could not be analysed).
	given  []*analysis.Report
	trials []*analysis.Report
	// lo and hi bracket the limit: the largest value known to run and the
	// smallest known to fail (NaN when none is known yet).
	lo, hi float64
	// loPeak is the step peak of the largest value that ran.
	loPeak int64
	// plan are the values to try next: the prediction's ends; pessimistic
	// is its first, once tried.
	plan        []float64
	pessimistic float64
	// closeAt is the last value held put one precision above the largest
	// that ran, and closings how many such trials ran in a row.
	closeAt  float64
	closings int
	// guessed is the last value tried from a trial's OOM (guess), and
	// confirm is set while the value one precision above it, once it ran,
	// is still to try.
	guessed float64
	confirm bool
	// maxDerived is maxValue's bound without --max, as of maxAt trials.
	maxDerived float64
	maxAt      int
}

// New starts a search in db, each trial launched by launch. Its id is
// opt.ID, else fit- and the time it starts.
func New(db *storage.DB, opt Options, launch Launcher) *Search {
	if opt.Budget == nil {
		opt.Budget = storage.NewDecodeBudget(storage.DefaultDecodeBudget)
	}
	s := &Search{opt: opt, db: db, launch: launch, start: time.Now(), lo: math.NaN(), hi: math.NaN()}
	s.res = Result{ID: opt.ID, By: opt.By, Steps: opt.Steps, Headroom: opt.Headroom}
	if s.res.ID == "" {
		s.res.ID = "fit-" + s.start.Format("20060102-150405")
	}
	return s
}

func (s *Search) say(line string) {
	if s.Say != nil {
		s.Say(line)
	}
}

// Run runs trials until the limit is bracketed to the precision.
func (s *Search) Run(ctx context.Context) error {
	// Two values that ran are needed for a prediction: --min and four
	// times it, where the given runs do not have them.
	for _, v := range []float64{s.opt.Min, 4 * s.opt.Min} {
		if s.ranValues() >= 2 || !math.IsNaN(s.hi) {
			break
		}
		v = s.clamp(v)
		if s.tried(v) {
			continue
		}
		t, err := s.trial(ctx, v)
		if err != nil {
			return err
		}
		if !t.Outcome.Ran() && v == s.clamp(s.opt.Min) {
			return fmt.Errorf("%s=%s does not fit (--min): it ran out of memory at %d steps; try a smaller --min", s.opt.By, Arg(v), t.Steps)
		}
	}
	var step float64 // the bracket's growth, from the prediction's interval
	for {
		v, ok := s.next(&step)
		if !ok {
			if v, ok = s.repeat(); !ok {
				break
			}
		}
		if _, err := s.trial(ctx, v); err != nil {
			return err
		}
	}
	if math.IsNaN(s.lo) { // every value that ran failed when tried again
		return fmt.Errorf("no %s ran every time it was tried, down to %s (--min): the GPU's processes do not fit there reliably; try a smaller --min", s.opt.By, Arg(s.clamp(s.opt.Min)))
	}
	return nil
}

// SharedRuns is how many times the largest value that ran must run, each
// in a fresh process, when several processes share a GPU: their
// allocators each keep a cache the others cannot use, so near the limit a
// value runs or fails by when each one's peak comes (bench/README.md,
// "fit where ranks share a GPU"). A value that fails once is not below the
// limit; three runs in a row make one that fails one time in two unlikely
// (1 in 8) to be taken.
const SharedRuns = 3

// repeat is the largest value that ran, to run once more, where processes
// share a GPU and it has run fewer than SharedRuns times; false otherwise.
func (s *Search) repeat() (float64, bool) {
	if _, _, shared := s.shared(); math.IsNaN(s.lo) || !shared {
		return 0, false
	}
	ran, _ := s.trialsAt(s.lo)
	return s.lo, ran < SharedRuns
}

// trialsAt counts the trials at v, and those of them that ran.
func (s *Search) trialsAt(v float64) (ran, tried int) {
	for _, t := range s.res.Trials {
		if t.Value == v {
			tried++
			if t.Outcome.Ran() {
				ran++
			}
		}
	}
	return ran, tried
}

// ranValues counts the distinct values known to run.
func (s *Search) ranValues() int {
	seen := map[float64]bool{}
	for _, r := range s.reports() {
		if v, ok := s.valueOf(r); ok && !analysis.RanOutOfMemory(r) {
			seen[v] = true
		}
	}
	return len(seen)
}

// precision is how close the bracket must close: --multiple, else 2 % of
// the largest value that ran (at least 1).
func (s *Search) precision() float64 {
	if s.opt.Multiple > 0 {
		return s.opt.Multiple
	}
	return max(1, math.Floor(0.02*s.lo))
}

// clamp snaps v down to the values tried (multiples of --multiple, else
// integers) within --min and --max.
func (s *Search) clamp(v float64) float64 {
	m := s.opt.Multiple
	if m == 0 {
		m = 1
	}
	v = math.Floor(v/m+1e-9) * m
	v = max(v, math.Ceil(s.opt.Min/m-1e-9)*m)
	top, _ := s.maxValue()
	return min(v, math.Floor(top/m+1e-9)*m)
}

// unit is the smallest step between two values tried.
func (s *Search) unit() float64 {
	if s.opt.Multiple > 0 {
		return s.opt.Multiple
	}
	return 1
}

func (s *Search) tried(v float64) bool {
	for _, t := range s.res.Trials {
		if t.Value == v {
			return true
		}
	}
	return false
}

// next picks the next value to try: the prediction's pessimistic end,
// then its optimistic end; then, once a value has failed with the
// allocator's state at its OOM known, the value that state puts the limit
// at (guess), and if that runs, the value one precision above it; then,
// while the limit is not bracketed by a value that ran and one that failed
// close enough, a step of the interval's width beyond the last value (up
// from the largest that ran, but not past where its measured step peak
// fills the GPU, filled; or down from the smallest that failed while the
// largest that ran is more than two steps below it), doubling each time;
// then bisection, or filled where it is below the bracket's middle, until
// the bracket is the precision wide.
func (s *Search) next(step *float64) (float64, bool) {
	u := s.unit()
	haveLo, haveHi := !math.IsNaN(s.lo), !math.IsNaN(s.hi)
	if haveLo && haveHi && s.hi-s.lo <= s.precision() {
		return 0, false
	}
	if top, words := s.maxValue(); haveLo && !haveHi && s.lo >= s.clamp(top) {
		s.res.Note = fmt.Sprintf("%s=%s (%s) ran: the limit is at or above it", s.opt.By, Arg(s.lo), words)
		return 0, false
	}
	inside := func(v float64) bool { return !s.tried(v) && (!haveLo || v > s.lo) && (!haveHi || v < s.hi) }
	if *step == 0 {
		// The prediction, once: its ends are the first values tried, its
		// width the bracket's first step.
		if p := s.predict(); p != nil {
			for _, c := range []*float64{p.Value, p.Optimistic} {
				if c != nil {
					s.plan = append(s.plan, s.clamp(*c))
				}
			}
			if p.Value != nil {
				s.pessimistic = s.clamp(*p.Value)
			}
			if p.Value != nil && p.Optimistic != nil {
				*step = math.Abs(*p.Optimistic - *p.Value)
			}
		}
		if *step < u || math.IsNaN(*step) {
			*step = u
			if haveLo {
				*step = max(u, 0.05*s.lo)
			}
		}
	}
	if v, words, ok := s.held(); ok && inside(v) {
		s.say(words)
		return v, true
	}
	for len(s.plan) > 0 {
		v := s.plan[0]
		s.plan = s.plan[1:]
		if inside(v) {
			return v, true
		}
	}
	// A guess that ran: the value one precision above it closes the
	// bracket if it fails.
	if s.confirm {
		s.confirm = false
		if v := s.clamp(s.lo + s.precision()); haveLo && s.lo == s.guessed && inside(v) {
			return v, true
		}
	}
	if v, words, ok := s.guess(); ok && inside(v) && v != s.guessed {
		s.guessed, s.confirm = v, true
		s.say(words)
		return v, true
	}
	filled, full := s.filled()
	var v float64
	switch {
	case haveHi && (!haveLo || s.hi-s.lo > 2**step):
		v = s.clamp(s.hi - *step)
		*step *= 2
	case haveLo && !haveHi:
		v = s.clamp(s.lo + *step)
		if full {
			v = min(v, filled)
		}
		*step *= 2
	case full && filled < (s.lo+s.hi)/2:
		v = filled // closer than halving the bracket
	default:
		v = s.clamp((s.lo + s.hi) / 2)
	}
	if haveLo && v <= s.lo {
		v = s.lo + u
	}
	if !inside(v) {
		return 0, false
	}
	return v, true
}

// filled is the value where the step peak measured at the largest value
// that ran, grown by the need curve's marginal cost of a unit, reaches the
// GPU's memory (less what the driver reserves and PyTorch does not see):
// the limit is not above it, since the allocator holds at least what it
// allocates. For a job whose allocator packs tightly at its limit it is
// within a few units of the limit, where the bracket's step may be
// hundreds. False without a measured peak, a curve, or memory left.
func (s *Search) filled() (float64, bool) {
	if math.IsNaN(s.lo) || s.loPeak <= 0 {
		return 0, false
	}
	by := s.byTag()
	if by == nil || by.Need == nil || by.Need.MarginalBytesPerUnit <= 0 {
		return 0, false
	}
	left := by.Available(0) - float64(s.loPeak)
	if left <= 0 {
		return 0, false
	}
	return s.clamp(s.lo + left/by.Need.MarginalBytesPerUnit), true
}

// MaxClosing is how many trials in a row held may put one precision
// above the largest value that ran, each of which ran: its reserved
// memory, read as the step's need, was then more than that need, and the
// bracket's own steps take over.
const MaxClosing = 2

// held is where the allocator's reserved memory, at the last trial, which
// ran at the largest value that ran (at or above the prediction's
// pessimistic end) without the allocator ever freeing its cache and
// trying again, grown by the cost of a unit, reaches the GPU's memory.
// Without a retry the allocator never gave back a segment, so what it
// reserved holds at least what the step needed at once: the segments with
// live tensors and the room stranded in them (docs/analysis.md, "The
// allowance"). The cost of a unit is the need curve's
// marginal cost plus the largest segment's growth, the most the stranded
// room grows, so the limit is not below the value held gives, as far as
// the cost stays that: it is tried. Where that is less than one precision
// above the largest that ran, the value one precision above it is tried
// to close the bracket (MaxClosing times in a row). False where the
// allocator retried (its reserved memory was the GPU's, not the need),
// where processes share a GPU, or without a curve or the figures.
func (s *Search) held() (v float64, words string, ok bool) {
	n := len(s.res.Trials)
	if n == 0 || math.IsNaN(s.lo) || s.pessimistic == 0 || s.lo < s.pessimistic {
		return 0, "", false
	}
	last := s.res.Trials[n-1]
	if !last.Outcome.Ran() || last.Value != s.lo || last.ReservedBytes == nil || last.AllocRetries == nil || *last.AllocRetries > 0 {
		return 0, "", false
	}
	if _, _, shared := s.shared(); shared {
		return 0, "", false
	}
	by := s.byTag()
	if by == nil || by.Need == nil || by.Need.MarginalBytesPerUnit <= 0 {
		return 0, "", false
	}
	unit := by.Need.MarginalBytesPerUnit
	if l := by.SegmentLine; l != nil && l.SlopeBytesPerUnit > 0 {
		unit += l.SlopeBytesPerUnit
	}
	if l := by.SplitLine; l != nil && l.SlopeBytesPerUnit > 0 {
		unit += l.SlopeBytesPerUnit
	}
	reserved := float64(*last.ReservedBytes)
	left := by.Available(0) - reserved
	v = s.clamp(s.lo + max(left, 0)/unit)
	said := fmt.Sprintf("at %s=%s the allocator reserved %s and never freed its cache: %s left, at %s a unit,",
		s.opt.By, Arg(s.lo), units.FormatBytes(int64(reserved)), units.FormatBytes(int64(max(left, 0))), units.FormatBytes(int64(unit)))
	if v >= s.lo+s.precision() {
		s.closings = 0
		return v, said + " puts the limit at or above " + Arg(v), true
	}
	if last.Value == s.closeAt {
		s.closings++ // the closing trial before ran
	} else {
		s.closings = 0
	}
	if s.closings >= MaxClosing {
		return 0, "", false
	}
	v = s.clamp(s.lo + s.precision())
	s.closeAt = v
	return v, said + " " + Arg(v) + " should not fit", true
}

// guess is the value where the need curve of the runs and trials so far,
// in its middle, meets the GPU with the allocator's cost measured at the
// OOM of the smallest value that failed (strandedAtOOM) in place of the
// default allowance: the limit as that trial measured it, not bracketed
// but found, and words that say so. False without such a measurement (an
// OOM without an allocator sample beside it, a trial that failed before
// the probe reported) or a curve.
func (s *Search) guess() (v float64, words string, ok bool) {
	if math.IsNaN(s.hi) {
		return 0, "", false
	}
	stranded, measured := -1.0, false
	for _, r := range s.reports() {
		if v, ok := s.valueOf(r); ok && v == s.hi {
			if s, ok := strandedAtOOM(r); ok && s > stranded {
				stranded, measured = s, true
			}
		}
	}
	by := s.byTag()
	if !measured || by == nil || by.Need == nil {
		return 0, "", false
	}
	if v, ok = by.Need.Solve(by.Available(0)/(1+stranded), replay.Middle); !ok || !finite(v) {
		return 0, "", false
	}
	v = s.clamp(v)
	return v, fmt.Sprintf("at the OOM of %s=%s the allocator held %.1f %% beyond what was allocated and asked for: the curve meets the GPU at %s",
		s.opt.By, Arg(s.hi), 100*stranded, Arg(v)), true
}

// reports are the analyses of the given runs, then of the trials, those
// that could be analysed.
func (s *Search) reports() []*analysis.Report {
	var reps []*analysis.Report
	for _, r := range append(append([]*analysis.Report{}, s.given...), s.trials...) {
		if r != nil {
			reps = append(reps, r)
		}
	}
	return reps
}

// byTag is compare --by's fit over the reports (nil with fewer than two,
// or where it cannot be made).
func (s *Search) byTag() *compare.ByTag {
	reps := s.reports()
	if len(reps) < 2 {
		return nil
	}
	c, err := compare.Compare(reps, "", "")
	if err != nil || compare.FitByTag(c, s.opt.By, 0) != nil {
		return nil
	}
	return c.By
}

// predict is compare --by's prediction over the given runs and the trials
// so far, without headroom (nil when none can be made).
func (s *Search) predict() *Prediction {
	by := s.byTag()
	if by == nil || by.MaxFittingValueNoHeadroom == nil {
		return nil
	}
	from := "runs"
	if len(s.trials) > 0 {
		from = "trials"
		if len(s.given) > 0 {
			from = "runs and trials"
		}
	}
	p := Prediction{From: from, Value: by.MaxFittingValueNoHeadroom, Optimistic: by.MaxFittingValueOptimistic, Words: by.IntervalWords}
	if s.res.Prediction == nil {
		s.res.Prediction = &p
		s.predicted(by)
		s.say(fmt.Sprintf("prediction from the %s: %s", from, p.Words))
	}
	return &p
}

func (s *Search) valueOf(r *analysis.Report) (float64, bool) {
	v, err := strconv.ParseFloat(r.Tags[s.opt.By], 64)
	return v, err == nil && finite(v)
}

// ranAt takes a value that ran into the bracket: the largest that ran
// below the smallest that failed. A value at or above a failure that runs
// (where processes share a GPU, the same value can do both) does not
// move it.
func (s *Search) ranAt(v float64, peak *int64) {
	if !math.IsNaN(s.hi) && v >= s.hi {
		return
	}
	if math.IsNaN(s.lo) || v > s.lo {
		s.lo = v
		s.loPeak = 0
	}
	if peak != nil && v == s.lo {
		s.loPeak = max(s.loPeak, *peak)
	}
}

// failedAt takes a value that failed into the bracket. Where it is at or
// below the largest that ran (it ran before and failed now), the bracket's
// low end falls to the largest value below it that ran.
func (s *Search) failedAt(v float64) {
	if math.IsNaN(s.hi) || v < s.hi {
		s.hi = v
	}
	if math.IsNaN(s.lo) || s.lo < s.hi {
		return
	}
	s.lo, s.loPeak = math.NaN(), 0
	for _, r := range s.given {
		if x, ok := s.valueOf(r); ok && !analysis.RanOutOfMemory(r) {
			s.ranAt(x, stepPeak(r))
		}
	}
	for _, t := range s.res.Trials {
		if t.Outcome.Ran() {
			s.ranAt(t.Value, t.StepPeakBytes)
		}
	}
}

// Given takes the analyses of earlier runs of the job, each tagged with
// the value: those bracket the limit as trials would, and a full recording
// among them adds what the whole run needs to the recommendation. A run
// whose tag is not a number, or that failed before its first step without
// running out of memory, is refused.
func (s *Search) Given(reps []*analysis.Report) error {
	for _, r := range reps {
		v, ok := s.valueOf(r)
		if !ok {
			return fmt.Errorf("run %q has %s=%q: not a number", r.Run, s.opt.By, r.Tags[s.opt.By])
		}
		if code, failed := analysis.FailedBeforeAStep(r); failed {
			return fmt.Errorf("run %q exited %d before its first step without running out of memory: it says nothing of what %s=%s needs (see memrec analyze %s)",
				r.Run, code, s.opt.By, Arg(v), r.Run)
		}
		s.given = append(s.given, r)
		if analysis.RanOutOfMemory(r) {
			s.failedAt(v)
		} else {
			s.ranAt(v, stepPeak(r))
		}
	}
	for _, r := range reps {
		if w, ok := analysis.WholeRunMargin(r, s.opt.Steps); ok && (s.res.WholeRun == nil || w.Share() > s.res.WholeRun.Share()) {
			s.res.WholeRun = &w
		}
	}
	return nil
}
