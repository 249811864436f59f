package compare

import (
	"fmt"
	"math"
	"slices"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
)

// Without an allocator trace, compare --by and fit bound what the caching
// allocator holds beyond the per-step peak at the GPU's limit from what the
// probe samples: the largest segment and the inactive split.
//
// At the limit the allocator has given back every cached segment that is
// one free block (a request that finds no room releases them all and
// retries), so what stays beyond the live blocks is free room inside
// segments that still hold one (PyTorch's inactive split) and the rounding
// of segments to 2 MiB. A segment is split where a request smaller than it
// by more than 1 MiB reuses it; room so stranded lies in the segments the
// job's own sizes split, which grow with the batch as its largest segment
// does. So the inactive split the probe saw, in units of the largest
// segment of its run, is how many of its largest segments the job's order
// of requests strands: at small batches the cache, which nothing presses,
// holds the same splits the order of requests makes at the limit, and the
// units carry over to larger batches with the segments. It is taken at
// the run where it was largest, and never more than StrandedSegments.
//
// What the samples do not see: a split made and merged between two
// samples. The probe samples at step marks and a few times a step; a job
// whose largest splits come and go within its backward pass strands more
// at its peak than was seen. The least share any run showed is added for
// it: a split seen at every run's quietest sample is one the job holds
// throughout, and may lie on top of the transient ones at the peak. This
// margin is an assumption, not derived from the allocator's rules;
// docs/analysis.md gives its measured error, and memrec fit checks by
// trial.

// strandedSegments is how many largest segments the allocator may strand
// at the limit, from the points' inactive split (see above): the most
// share of the largest segment a run held, plus the least; the basis
// names the run of the most, "" where a point did not measure it (then
// StrandedSegments).
func strandedSegments(points []TagPoint) (float64, string) {
	k, least, run := -1.0, math.Inf(1), ""
	for _, p := range points {
		if p.MostInactiveSplitBytes == nil || p.LargestSegmentBytes == nil || *p.LargestSegmentBytes <= 0 {
			return replay.StrandedSegments, ""
		}
		s := float64(*p.MostInactiveSplitBytes) / float64(*p.LargestSegmentBytes)
		if s > k {
			k, run = s, p.Run
		}
		least = min(least, s)
	}
	if k < 0 {
		return replay.StrandedSegments, ""
	}
	return min(k+least, replay.StrandedSegments), run
}

// strandedWords says where the count of stranded segments came from.
func strandedWords(run string, k float64) string {
	if run == "" {
		return fmt.Sprintf("%d largest segments bound it where the probe did not measure the inactive split", replay.StrandedSegments)
	}
	if k >= replay.StrandedSegments {
		return fmt.Sprintf("run %q held at least %d largest segments' worth of it in split segments, and %d bound it", run, replay.StrandedSegments, replay.StrandedSegments)
	}
	return fmt.Sprintf("%.2f largest segments: the most any run held in split segments (run %q) plus the least, for splits made and merged between the probe's samples; memrec fit checks by trial", k, run)
}

// Without the largest segment either (probes before it), the room the
// allocator cannot give back at the limit is read from the same samples in
// bytes per unit of the value: large requests get segments of their own
// size (rounded to 2 MiB), which grow with the batch, and a segment is split
// only by a request smaller than it, so the room stranded in split segments
// grows with the batch as they do. A run's stranding is the larger of two
// things the probe sees: the inactive split at its last sample (a split the
// job holds across steps, so at each step's peak too) and how far the
// segments that held live blocks (allocated + inactive split, at once) rose
// above the step's peak (a split seen beside the peak). The pessimistic end
// adds the most any run stranded a unit (or its growth between the two
// largest values, where faster) plus the least, for splits made and merged
// between samples, as the segment rule does; and the segments' rounding.
//
// It adds one more segment of a batch-scaled request besides where the runs
// show splits that come and go with the value: a split the samples saw at
// one value may be missing at another (the allocator serves a request from
// the smallest free block that fits, and while batch-scaled sizes keep their
// order among themselves, they cross fixed sizes and the allocator's size
// thresholds as the value grows, so which block a request splits changes),
// and at the limit such a segment can lie free but for a small live block,
// so the room stranded is the whole segment rather than the part a sample
// saw free. The sign of it is a run that stranded less than a run at a
// smaller value: the same splits at both would strand as much or more at
// the larger value (their room grows with its requests, or stays), so a
// split seen at the smaller value was missing at the larger. Where the
// stranding never fell as the value rose, the runs show no split that comes
// and goes and none is added; a split that first appears between the
// largest value and the limit is then not reserved for, which the interval
// and the notes say. Without the largest segment its size is not known; the
// average segment of the part that grows with the value bounds it from
// below: the need's growth a unit spread over the most segments the run at
// the largest value held (large requests get segments of their own, so
// each batch-scaled request holds at least one). The largest such request
// may be many times the average (a language model's logits), so this is
// not a bound.
//
// What it leaves out: a split no sample saw at all beyond that one segment,
// or any where the stranding never fell; a library that takes a smaller
// workspace where memory is short (the limit then lies above).

// splitLine is the room stranded at the limit against the value, through 0
// (see above), with the runs of its most and least a unit and the average
// segment a unit (its part for one more segment, 0 where the stranding
// never fell as the value rose), given the need's growth a unit; false
// when a point lacks the samples or its value is not above 0.
func splitLine(points []TagPoint, needPerUnit float64) (stranded, bool) {
	hi := -1.0
	var runs [2]string
	var per []float64
	var xs, ys []float64 // the most stranded at each value, ascending
	for _, p := range points {
		if p.LastInactiveSplitBytes == nil || p.MostLiveSegmentBytes == nil || p.StepPeakBytes == nil || p.Value <= 0 {
			return stranded{}, false
		}
		s := float64(max(*p.LastInactiveSplitBytes, *p.MostLiveSegmentBytes-*p.StepPeakBytes, 0))
		if u := s / p.Value; u > hi {
			hi, runs[0] = u, p.Run
		}
		per = append(per, s/p.Value)
		if n := len(xs); n > 0 && xs[n-1] == p.Value {
			ys[n-1] = max(ys[n-1], s)
			continue
		}
		xs, ys = append(xs, p.Value), append(ys, s)
	}
	if hi < 0 {
		return stranded{}, false
	}
	if n := len(xs) - 1; n > 0 {
		hi = max(hi, (ys[n]-ys[n-1])/(xs[n]-xs[n-1]))
	}
	lo := slices.Min(per)
	for _, p := range points {
		if u := float64(max(*p.LastInactiveSplitBytes, *p.MostLiveSegmentBytes-*p.StepPeakBytes, 0)) / p.Value; u == lo {
			runs[1] = p.Run
			break
		}
	}
	st := stranded{runs: runs, fell: fell(ys)}
	if st.fell {
		st.seg = averageSegment(points, needPerUnit)
	}
	st.line = replay.Fit{SlopeBytesPerUnit: hi + lo + st.seg}
	return st, true
}

// stranded is splitLine's reading of the runs.
type stranded struct {
	line replay.Fit
	runs [2]string // the runs of the most and the least stranded a unit
	seg  float64   // the part a unit for one more segment
	fell bool      // a run stranded less than one at a smaller value
}

// fell reports whether the room stranded at some value (ys, ascending by
// value) is less than at the value below: a split seen there was missing
// at the larger value (see above).
func fell(ys []float64) bool {
	for i := 1; i < len(ys); i++ {
		if ys[i] < ys[i-1] {
			return true
		}
	}
	return false
}

// averageSegment is the need's growth a unit over the most segments a run
// at the largest value held: the average size a unit of the segments that
// grow with the value (see above); 0 where none counted its segments.
func averageSegment(points []TagPoint, needPerUnit float64) float64 {
	var segs int64
	last := points[len(points)-1].Value // ascending by value
	for _, p := range points {
		if p.Value == last && p.MostSegments != nil {
			segs = max(segs, *p.MostSegments)
		}
	}
	if segs <= 0 || needPerUnit <= 0 {
		return 0
	}
	return needPerUnit / float64(segs)
}

// splitWords says where the stranded room came from; the part for one
// more segment is named only where it is not zero, and its absence where
// the stranding never fell.
func splitWords(st stranded) string {
	more := ""
	if int64(st.seg) > 0 {
		more = fmt.Sprintf(", plus %s for one more segment of a request that grows with the value (the average segment of that part, which the largest such request may exceed many times)", units.FormatBytes(int64(st.seg)))
	} else if !st.fell {
		more = ", and no segment for a split no run showed: the room stranded never fell as the value rose, so no split seen at one value was missing at a larger one"
	}
	return fmt.Sprintf("%s a unit of the value: the most a unit the allocator held in split segments beside the step's peak or across steps (run %q), plus the least (run %q), for splits made and merged between the probe's samples%s; memrec fit checks by trial",
		units.FormatBytes(int64(st.line.SlopeBytesPerUnit)), st.runs[0], st.runs[1], more)
}

// splitNote is the note where the stranding never fell as the value rose:
// the prediction then reserves nothing for a split that first appears
// nearer the limit (see above).
func splitNote(tag string, points []TagPoint) string {
	return fmt.Sprintf("the room the allocator stranded in split segments never fell as %s rose (runs %q to %q), so the prediction reserves no segment for a split no run showed; "+
		"should one appear between the largest value measured and the limit, the limit lies below the prediction: memrec fit checks by trial",
		tag, points[0].Run, points[len(points)-1].Run)
}
