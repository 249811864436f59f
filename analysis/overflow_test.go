package analysis

import (
	"math"
	"testing"
	"time"

	"github.com/memrec/memrec/storage"
)

// TestTimeLoopsSurviveExtremeTimes: a run whose times span nearly all of
// int64 (what a database written before times were bounded may hold) is
// cut into a bounded number of ordered slices, in no time.
func TestTimeLoopsSurviveExtremeTimes(t *testing.T) {
	for _, run := range []storage.Run{
		{StartNS: math.MinInt64 + 1, EndNS: math.MaxInt64},
		{StartNS: 1e18, EndNS: math.MaxInt64 - 5, IntervalNS: 1e7},
		{StartNS: 0, EndNS: math.MaxInt64, IntervalNS: math.MaxInt64},
	} {
		done := make(chan struct{})
		var a gpuAnalysis
		var sl []epochSpan
		go func() {
			defer close(done)
			a.run = run
			a.floorSpans()
			sl = timeSlices(run, true)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("run %d..%d: the time loops do not end", run.StartNS, run.EndNS)
		}
		if len(a.flo) == 0 || len(a.flo) > 302 || len(sl) != 10 {
			t.Fatalf("run %d..%d: %d floor spans, %d slices", run.StartNS, run.EndNS, len(a.flo), len(sl))
		}
		for i := range a.flo {
			if a.fhi[i] <= a.flo[i] || i > 0 && a.flo[i] <= a.flo[i-1] {
				t.Fatalf("span %d: %d..%d after %d", i, a.flo[i], a.fhi[i], a.flo[max(i-1, 0)])
			}
		}
		for i, s := range sl {
			if s.end < s.start || i > 0 && s.start < sl[i-1].end {
				t.Fatalf("slice %d: %d..%d", i, s.start, s.end)
			}
		}
	}
}
