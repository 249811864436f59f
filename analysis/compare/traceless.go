package compare

import (
	"fmt"
	"math"

	"github.com/memrec/memrec/analysis/replay"
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
