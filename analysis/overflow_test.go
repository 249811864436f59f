package analysis

import (
	"fmt"
	"math"
	"slices"
	"strings"
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

// TestInconsistentAllocatorSamplesFlagged: allocator samples with
// allocated above reserved, or active below allocated, are accepted, kept
// as sent, counted per GPU and named in the notes.
func TestInconsistentAllocatorSamplesFlagged(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"run","name":"odd","start_ns":1000000000000000000}` + "\n" + `{"type":"gpu","gpu":0}` + "\n" + `{"type":"gpu","gpu":1}` + "\n")
	// GPU 0: 10 samples, 3 with allocated > reserved and 2 with active < allocated.
	for i := range 10 {
		alloc, res, active := int64(100), int64(200), int64(100)
		switch {
		case i < 3:
			res = 50
		case i < 5:
			active = 40
		}
		fmt.Fprintf(&b, `{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d,"active_bytes":%d}`+"\n", 1000000000000000000+int64(i)*1e8, alloc, res, active)
		fmt.Fprintf(&b, `{"type":"torch","t_ns":%d,"gpu":1,"pid":8,"allocated_bytes":100,"reserved_bytes":200}`+"\n", 1000000000000000000+int64(i)*1e8)
	}
	rep := importFixtures(t, map[string][]byte{"odd.jsonl": []byte(b.String())})["odd"]
	if got := rep.GPUs[0].InconsistentSamples; got != 5 {
		t.Errorf("GPU 0: %d inconsistent samples, want 5", got)
	}
	if got := rep.GPUs[1].InconsistentSamples; got != 0 {
		t.Errorf("GPU 1: %d inconsistent samples, want 0", got)
	}
	want := "GPU 0: 5 allocator samples are inconsistent"
	if !slices.ContainsFunc(rep.Notes, func(n string) bool { return strings.HasPrefix(n, want) }) {
		t.Errorf("notes %q lack %q", rep.Notes, want)
	}
}
