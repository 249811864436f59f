package replay_test

import (
	"testing"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/replay/replaytest"
)

// TestReplayFollowsEachRequestsGrowth: for a sequence length, whose
// attention scores grow with its square, each request grows as the two
// runs show (the square for the scores), and one only the higher run made
// (a workspace taken from 1536 on) as the job's peak did: from runs at two
// or three lengths the replay's value is within 3 % below the limit of the
// job's own trace, never above it (before, the scores grew on their line
// and the value was 2.3 times the limit; and where the steepest reading
// left no room the replay ran on an unlimited device).
func TestReplayFollowsEachRequestsGrowth(t *testing.T) {
	const capacity = 80 << 30
	limit := float64(replaytest.LimitOf(replaytest.SynthAttention, 512, 20000, capacity))
	for _, runs := range [][]int64{{1024, 2048}, {512, 1024, 2048}, {256, 512, 1024}} {
		var vals, needs []float64
		for _, s := range runs {
			r, _ := replay.ReplayAllocator(replaytest.SynthAttention(s).Ops, 0)
			vals, needs = append(vals, float64(s)), append(needs, float64(r.PeakAllocated))
		}
		need, err := replay.NewNeedCurve(vals, needs)
		if err != nil {
			t.Fatal(err)
		}
		a, b := runs[len(runs)-2], runs[len(runs)-1]
		s := replay.NewReplayScale(float64(a), replaytest.SynthAttention(a), float64(b), replaytest.SynthAttention(b), false)
		v, _, ok := s.Fitting(need, capacity, replay.Pessimistic, true)
		if !ok || v > limit || v < 0.97*limit {
			t.Errorf("runs at %v: %v (ok %v), the limit %v", runs, v, ok, limit)
		}
		// Every request but the workspaces only the higher run took
		// (one a layer in each of 3 steps) is matched, the scores by the
		// square of the ratio.
		unmatched := 0
		if b >= 1536 && a < 1536 {
			unmatched = 36
		}
		if s.Requests-s.Matched != unmatched {
			t.Errorf("runs at %v: %d of %d requests matched", runs, s.Matched, s.Requests)
		}
	}
}
