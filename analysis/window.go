package analysis

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// BoundKind says how a window bound names its moment.
type BoundKind uint8

const (
	BoundNone    BoundKind = iota // no bound: the run's start or end
	BoundSeconds                  // seconds since the run's start
	BoundTime                     // an absolute time
	BoundClock                    // a time of day, local time: its first occurrence at or after the run's start
	BoundEpoch                    // an epoch: its start (from) or its end (to)
	BoundStep                     // a step: its start (from) or its end (to)
)

func (k BoundKind) String() string {
	switch k {
	case BoundSeconds:
		return "seconds"
	case BoundTime:
		return "time"
	case BoundClock:
		return "clock"
	case BoundEpoch:
		return "epoch"
	case BoundStep:
		return "step"
	}
	return "none"
}

// Bound is one end of a window, as a user names it. The zero value is no
// bound.
type Bound struct {
	Kind    BoundKind
	Seconds float64       // BoundSeconds
	TimeNS  int64         // BoundTime: Unix ns
	Clock   time.Duration // BoundClock: since local midnight
	N       int           // BoundEpoch, BoundStep
}

// Errors of Window a caller can test with errors.Is.
var (
	ErrNoSuchMark  = errors.New("the run has no such mark")
	ErrEmptyWindow = errors.New("the window is empty")
	// ErrNoEpochMarks is an epoch bound on a run without epoch marks (it
	// is also ErrNoSuchMark). Epochs inferred from device memory do not
	// serve as bounds: finding them reads the whole job, where a window
	// must cost what the window holds, and their bounds are estimates.
	ErrNoEpochMarks = fmt.Errorf("%w: the run has no epoch marks", ErrNoSuchMark)
)

// Window resolves from and to against a run and returns the run restricted
// to [from, to] (storage.Run.Within): what analysis, report and export then
// read. An epoch or step bound reads the run's marks to find it; a time
// bound reads nothing. A step is the span from the previous step mark (or
// its epoch's start) to its own mark; steps are named by the number on
// their marks when those increase over the whole run, else by their
// position in it (0 the first), since most scripts restart the count each
// epoch. Marks of rank 0, or unranked, are used.
func Window(db *storage.DB, run storage.Run, from, to Bound) (storage.Run, error) {
	if from.Kind == BoundNone && to.Kind == BoundNone {
		return run, nil
	}
	var mi *markIndex
	needMarks := from.Kind == BoundEpoch || from.Kind == BoundStep || to.Kind == BoundEpoch || to.Kind == BoundStep
	if needMarks {
		var err error
		// The index is let go when Window returns, before any analysis
		// reads the run: a budget of its own bounds it.
		if mi, err = loadMarks(db, run, storage.NewDecodeBudget(storage.DefaultDecodeBudget), nil); err != nil {
			return run, err
		}
	}
	lo, err := resolveBound(run, mi, from, false)
	if err != nil {
		return run, fmt.Errorf("from: %w", err)
	}
	hi, err := resolveBound(run, mi, to, true)
	if err != nil {
		return run, fmt.Errorf("to: %w", err)
	}
	if hi <= lo || lo > run.EndNS || hi <= run.StartNS {
		return run, fmt.Errorf("%w: from %s to %s of a run of %s", ErrEmptyWindow,
			describeAt(run, lo), describeAt(run, hi), units.FormatDuration(run.Duration().Seconds()))
	}
	return run.Within(lo, hi), nil
}

func describeAt(run storage.Run, t int64) string {
	switch t {
	case storage.MinTime:
		return "the start"
	case storage.MaxTime:
		return "the end"
	}
	return units.FormatSince(float64(t-run.StartNS) / 1e9)
}

// resolveBound turns a bound into Unix ns: the window is [from, to), so an
// end bound that names a mark gives the mark's time + 1 ns (the mark is in).
func resolveBound(run storage.Run, mi *markIndex, b Bound, end bool) (int64, error) {
	switch b.Kind {
	case BoundNone:
		if end {
			return storage.MaxTime, nil
		}
		return storage.MinTime, nil
	case BoundSeconds:
		if !finite(b.Seconds) || math.Abs(b.Seconds) > 1e9 {
			return 0, fmt.Errorf("%g s is not a time in a run", b.Seconds)
		}
		return run.StartNS + int64(math.Round(b.Seconds*1e9)), nil
	case BoundTime:
		return b.TimeNS, nil
	case BoundClock:
		start := time.Unix(0, run.StartNS).Local()
		day := time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, time.Local)
		t := day.Add(b.Clock)
		if t.UnixNano() < run.StartNS-int64(time.Second) { // a second of slack: 14:03:00 for a run started 14:03:00.4
			t = day.AddDate(0, 0, 1).Add(b.Clock)
		}
		return t.UnixNano(), nil
	case BoundEpoch:
		if len(mi.epochs) == 0 {
			return 0, fmt.Errorf("epoch %d: %w", b.N, ErrNoEpochMarks)
		}
		for _, e := range mi.epochs {
			if e.n == b.N {
				if end {
					return e.end + 1, nil
				}
				return e.start, nil
			}
		}
		return 0, fmt.Errorf("%w: epoch %d (the run has %d epochs)", ErrNoSuchMark, b.N, len(mi.epochs))
	case BoundStep:
		steps := mi.stepsFor(0)
		i := stepIndex(steps, b.N)
		if i < 0 {
			return 0, fmt.Errorf("%w: step %d (the run has %d step marks)", ErrNoSuchMark, b.N, steps.Len())
		}
		if end {
			return steps.T(i) + 1, nil
		}
		// A step starts where the one before it ended, or where its
		// epoch started, whichever is later.
		start := run.StartNS
		if i > 0 {
			start = steps.T(i-1) + 1
		}
		for _, e := range mi.epochs {
			if e.start <= steps.T(i) && e.start > start {
				start = e.start
			}
		}
		return start, nil
	}
	return 0, fmt.Errorf("unknown bound kind %d", b.Kind)
}

// stepIndex finds step n among step marks: by the number on the marks when
// those increase over the run, else by position. It returns -1 if none.
func stepIndex(steps *growth.Steps, n int) int {
	count := steps.Len()
	increasing := count > 0
	for i := 1; i < count && increasing; i++ {
		increasing = steps.Step(i) > steps.Step(i-1)
	}
	if increasing && steps.Step(0) != storage.None {
		for i := range count {
			if steps.Step(i) == n {
				return i
			}
		}
		return -1
	}
	if n < 0 || n >= count {
		return -1
	}
	return n
}

// windowLookBack is how far before a window its last samples are looked
// for: a value at the window's start older than this is not known.
const windowLookBack = 60e9
