package compare

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// compare --by's allocator replay: where it is chosen as the basis, how
// each traced run checks it (as recorded, and to the request that failed
// where a run ran out of memory), and the words and figures it reports.
// The allocator's rules are in package replay (allocreplay.go), the
// scaling to other values and the ends of the interval in its allocscale.go.

// ReplayFigures say how compare --by replayed the caching allocator: the
// requests of run HighRun (at HighValue) scaled on the line through the
// matching requests of run LowRun (at LowValue), Matched of Requests
// matched. Checks replay each traced run as it was: the segments the
// replay took against those the allocator took. At the value without
// headroom (MaxFittingValueNoHeadroom) the replay stranded StrandedBytes
// at the peak and released its cache Retries times. BeyondTraceBytes is
// how much the highest run's per-step peak over the whole run exceeded
// its trace's (a later step, evaluation): the device is taken as that
// much smaller.
type ReplayFigures struct {
	LowRun           string        `json:"low_run"`
	LowValue         float64       `json:"low_value"`
	HighRun          string        `json:"high_run"`
	HighValue        float64       `json:"high_value"`
	Requests         int           `json:"requests"`
	Matched          int           `json:"matched"`
	Checks           []ReplayCheck `json:"checks"`
	StrandedBytes    int64         `json:"stranded_bytes_at_peak"`
	Retries          int           `json:"retries"`
	BeyondTraceBytes int64         `json:"beyond_trace_bytes,omitempty"`
	// ShapeChosenBytes is the largest request of the higher run that the
	// lower did not make (a workspace a library sized for the shape), at
	// the higher value; the pessimistic end holds it, grown with the
	// value, beyond the replay.
	ShapeChosenBytes int64 `json:"shape_chosen_bytes"`
	// UnmatchedPower is the power of the value an unmatched request grows
	// with, where it is not 1 (a setting other than a batch size whose
	// peak grew faster than the value).
	UnmatchedPower float64 `json:"unmatched_power,omitempty"`
	// FailureChecks are the runs that ran out of memory with a trace,
	// replayed to the request that failed; MarginBytes the most room the
	// replay had to spare at one, taken off the GPU for every value.
	FailureChecks []ReplayFailureCheck `json:"failure_checks,omitempty"`
	MarginBytes   int64                `json:"margin_bytes,omitempty"`
}

// ReplayFailureCheck is one run that ran out of memory, replayed to the
// request that failed on the GPU: MarginBytes 0 where the replay refused
// it too, else the room the replay had to spare.
type ReplayFailureCheck struct {
	Run          string  `json:"run"`
	Value        float64 `json:"value"`
	RequestBytes int64   `json:"request_bytes"`
	MarginBytes  int64   `json:"margin_bytes"`
}

// ReplayCheck is one traced run replayed as recorded.
type ReplayCheck struct {
	Run                string  `json:"run"`
	Value              float64 `json:"value"`
	SegmentBytes       int64   `json:"allocator_segment_bytes"`
	ReplaySegmentBytes int64   `json:"replay_segment_bytes"`
}

// chooseReplay makes the replay the basis where the two largest values'
// points (the run of the highest step peak at each) have allocator
// traces: theirs are replayed, and each traced run is checked by
// replaying it as recorded (runs below them without a trace, an older
// probe's, hold the need curve only). A
// replay whose segments at a value measured are off the allocator's by
// more than replay.Tolerance is not used (an allocator configured
// otherwise, another version's rules) and the notes say so.
func (by *ByTag) chooseReplay() {
	if by.Basis != "step_peak_allocated" {
		return
	}
	best := map[float64]TagPoint{} // the run of the highest step peak at each value, traced or not
	for _, p := range by.Points {
		if b, ok := best[p.Value]; !ok || *p.StepPeakBytes > *b.StepPeakBytes {
			best[p.Value] = p
		}
	}
	vals := make([]float64, 0, len(best))
	for v := range best {
		vals = append(vals, v)
	}
	sort.Float64s(vals)
	if len(vals) < 2 || vals[0] <= 0 {
		return
	}
	lo, hi := best[vals[len(vals)-2]], best[vals[len(vals)-1]]
	if lo.trace == nil || hi.trace == nil {
		if n := untracedNote(by.Points, lo, hi); n != "" {
			by.leftOut = append(by.leftOut, n)
		}
		return
	}
	allocated := map[string]int64{} // each run's peak allocated, replayed as recorded
	var checks []ReplayCheck
	for _, p := range by.Points {
		if p.trace == nil { // an untraced run below the two: it holds the need curve only
			continue
		}
		r, err := replay.ReplayAllocator(p.trace.Ops, 0)
		if err != nil {
			return
		}
		allocated[p.Run] = r.PeakAllocated
		if capacity := int64(by.Available(0)) + replay.CapacityKnown; by.TotalBytes > 0 && r.PeakReserved > capacity {
			// Near the limit the allocator freed its cache (its own count
			// sums every segment it took): the run went through its
			// steps, so the replay must serve it on the device.
			if c, _ := replay.ReplayAllocator(p.trace.Ops, capacity); !c.OK {
				by.leftOut = append(by.leftOut, fmt.Sprintf("the allocator replay of run %q does not fit on the GPU where the run went through its steps (its allocator is configured otherwise or follows other rules): no replay", p.Run))
				return
			}
		} else if checks = append(checks, ReplayCheck{Run: p.Run, Value: p.Value, SegmentBytes: p.trace.SegmentBytes, ReplaySegmentBytes: r.PeakReserved}); math.Abs(float64(r.PeakReserved-p.trace.SegmentBytes)/float64(max(1, p.trace.SegmentBytes))) > replay.Tolerance {
			by.leftOut = append(by.leftOut, fmt.Sprintf("the allocator replay of run %q took %s of segments where its allocator took %s (more than %.0f %% off: its allocator is configured otherwise or follows other rules): no replay",
				p.Run, units.FormatBytes(r.PeakReserved), units.FormatBytes(p.trace.SegmentBytes), 100*replay.Tolerance))
			return
		}
	}
	s := replay.NewReplayScale(lo.Value, *lo.trace, hi.Value, *hi.trace, replay.IsBatchTag(by.Tag))
	by.replay = &s
	f := &ReplayFigures{LowRun: lo.Run, LowValue: lo.Value, HighRun: hi.Run, HighValue: hi.Value, Requests: s.Requests, Matched: s.Matched, Checks: checks, ShapeChosenBytes: s.Chosen}
	if s.Power != 1 {
		f.UnmatchedPower = s.Power
	}
	if a := allocated[hi.Run]; *hi.StepPeakBytes > a {
		f.BeyondTraceBytes = *hi.StepPeakBytes - a
	}
	by.Replay, by.Basis, by.AllowanceBasis, by.AllowanceFraction, by.SegmentLine, by.RoundingBytes = f, "allocator_replay", "allocator_replay", 0, nil, 0
	by.checkFailures()
	sized := "on the line through its size there and"
	if !s.PerSample() {
		sized = "on the larger of the line through its size there and the power of the value its sizes show, there and"
	}
	by.BasisWords = fmt.Sprintf("the caching allocator replayed over the job's requests: run %q's %d (at %s) "+
		"each sized %s at %s (run %q, %d matched; the others at most 1 MiB kept, larger ones %s), "+
		"against the total less %s the driver reserves and %s PyTorch does not see%s; "+
		"the pessimistic end takes from the device what the steepest reading of the runs' per-step peaks adds to the middle's and the largest request the lower run did not make, grown with the value "+
		"(a workspace a library such as cuDNN sizes for the shape and the free memory: at the larger value it may be another, which the runs cannot show), the optimistic end adds what the flattest takes away; "+
		"%s",
		hi.Run, s.Requests, fmtNum(hi.Value), sized, fmtNum(lo.Value), lo.Run, s.Matched, s.GrownWords(),
		units.FormatBytes(by.DriverReservedBytes), units.FormatBytes(by.UnseenBytes), beyondWords(f.BeyondTraceBytes), checkWords(checks)) + failureWords(f.FailureChecks)
}

func beyondWords(b int64) string {
	if b <= 0 {
		return ""
	}
	return fmt.Sprintf(" and %s by which the run's per-step peak exceeded its trace's (after its third step; at the pessimistic end grown with the value)", units.FormatBytes(b))
}

func checkWords(checks []ReplayCheck) string {
	exact, worst := 0, 0.0
	for _, c := range checks {
		d := float64(c.ReplaySegmentBytes-c.SegmentBytes) / float64(max(1, c.SegmentBytes))
		if d == 0 {
			exact++
		}
		worst = max(worst, math.Abs(d))
	}
	if exact == len(checks) {
		return fmt.Sprintf("replayed as recorded, each of the %d runs took the allocator's segments exactly", len(checks))
	}
	return fmt.Sprintf("replayed as recorded, %d of the %d runs took the allocator's segments exactly, the others within %.1f %% (ties among free blocks of one size go to the lowest address, which the replay cannot know)",
		exact, len(checks), 100*worst)
}

// replayRoom is what the replay may fill of avail bytes: less what the
// higher run's per-step peak exceeded its trace's, and the room the replay
// had to spare where a run ran out of memory (ReplayFigures.MarginBytes).
func (by *ByTag) replayRoom(avail float64) float64 {
	return avail - float64(by.Replay.BeyondTraceBytes) - float64(by.Replay.MarginBytes)
}

// checkFailures replays the trace of each run that ran out of memory up
// to the request that failed, on the GPU: where the replay serves it, the
// GPU held that run more than the replay knows, and the room the replay
// had to spare (the least the GPU must be cut by for it to fail too;
// bisected, to 2 MiB) is taken off for every value.
func (by *ByTag) checkFailures() {
	capacity := by.replayRoom(by.Available(0))
	for _, fl := range by.Failed {
		if fl.trace == nil {
			continue
		}
		k := replay.LastFailed(fl.trace.Ops)
		if k < 0 {
			continue
		}
		ops := append(slices.Clone(fl.trace.Ops[:k]), storage.AllocOp{Size: fl.trace.Ops[k].Size})
		fails := func(cut float64) bool {
			if capacity-cut < 1 { // no room (0 is unlimited to ReplayAllocator)
				return true
			}
			r, err := replay.ReplayAllocator(ops, int64(capacity-cut))
			return err != nil || !r.OK
		}
		c := ReplayFailureCheck{Run: fl.Run, Value: fl.Value, RequestBytes: fl.trace.Ops[k].Size}
		if !fails(0) {
			lo, hi := 0.0, capacity
			for hi-lo > 2<<20 {
				if mid := (lo + hi) / 2; fails(mid) {
					hi = mid
				} else {
					lo = mid
				}
			}
			c.MarginBytes = int64(hi)
		}
		by.Replay.FailureChecks = append(by.Replay.FailureChecks, c)
		by.Replay.MarginBytes = max(by.Replay.MarginBytes, c.MarginBytes)
	}
}

func failureWords(checks []ReplayFailureCheck) string {
	var out []string
	for _, c := range checks {
		if c.MarginBytes > 0 {
			out = append(out, fmt.Sprintf("run %q ran out of memory asking for %s where the replay served it with %s to spare: %s is taken off the GPU",
				c.Run, units.FormatBytes(c.RequestBytes), units.FormatBytes(c.MarginBytes), units.FormatBytes(c.MarginBytes)))
		} else {
			out = append(out, fmt.Sprintf("the replay refuses run %q's request of %s that ran out of memory, as the GPU did", c.Run, units.FormatBytes(c.RequestBytes)))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}

// replayFits is the remedies' batch that fits where the replay is the
// basis: its pessimistic end with what a remedy frees added to the GPU;
// nil without a replay.
func (by *ByTag) replayFits() func(plus func(v float64) float64) (float64, bool) {
	if by.replay == nil {
		return nil
	}
	return func(plus func(v float64) float64) (float64, bool) {
		all := func(v float64) float64 { return plus(v) + by.beyondGrowth(v) }
		v, _, ok := by.replay.FittingPlus(*by.Need, by.replayRoom(by.Available(0)), all, replay.Pessimistic, by.integer)
		return by.floorAtHigh(by.Available(0), v, ok)
	}
}

// beyondGrowth is what the pessimistic end takes off the GPU at value v
// beyond replayRoom's: what the higher run's per-step peak exceeded its
// trace's (a later step, evaluation) grown with the value as an unmatched
// request grows, the part above the higher run's value (a negative
// number of bytes: room less).
func (by *ByTag) beyondGrowth(v float64) float64 {
	b := float64(by.Replay.BeyondTraceBytes)
	if b <= 0 || v <= by.replay.HighValue {
		return 0
	}
	return -b * (by.replay.Grown(v) - 1)
}

// floorAtHigh is the replay's answer v (ok: one was found) on avail bytes:
// without headroom (avail at least the GPU's) never below the higher run's
// value, which went through its steps on this GPU.
func (by *ByTag) floorAtHigh(avail, v float64, ok bool) (float64, bool) {
	if avail >= by.Available(0) && (!ok || v < by.replay.HighValue) {
		return by.replay.HighValue, true
	}
	return v, ok
}

func timesWords(n int) string {
	switch n {
	case 0:
		return "never"
	case 1:
		return "once"
	}
	return strconv.Itoa(n) + " times"
}

// untracedNote says which runs the answer rests on where some runs have
// an allocator trace but the two largest values' runs (the replay's pair)
// do not both: the prediction then comes from the figures every run
// records, and a user who traced some runs should know their traces were
// not used. "" where no run has a trace.
func untracedNote(points []TagPoint, lo, hi TagPoint) string {
	var traced []string
	for _, p := range points {
		if p.trace != nil {
			traced = append(traced, fmt.Sprintf("%q", p.Run))
		}
	}
	if len(traced) == 0 {
		return ""
	}
	var without []string
	for _, p := range []TagPoint{lo, hi} {
		if p.trace == nil {
			without = append(without, fmt.Sprintf("%q (%s)", p.Run, strconv.FormatFloat(p.Value, 'f', -1, 64)))
		}
	}
	verb := "have"
	if len(without) == 1 {
		verb = "has"
	}
	return fmt.Sprintf("no allocator replay: the runs of the two largest values must both have a trace, and %s %s none; the prediction rests on the figures without a trace (runs with a trace: %s)",
		strings.Join(without, " and "), verb, strings.Join(traced, ", "))
}
