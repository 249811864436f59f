package storage

import (
	"testing"

	"github.com/memrec/memrec/storage/wire"
)

// TestStepAtReadsWhatBlockAtReads: over a run of marks of several kinds,
// in a window that cuts its first and last (so a block starts inside its
// chunk), StepAt says a mark is a step exactly where BlockAt's kind is a
// step, with BlockAt's time, step and rank.
func TestStepAtReadsWhatBlockAtReads(t *testing.T) {
	db := openTestDB(t)
	a, err := db.NewAppender(Run{Name: "steps", GPUs: []GPU{{Index: 0}}}, AppendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kinds := []MarkKind{wire.MarkStep, wire.MarkEpochStart, wire.MarkStep, wire.MarkEvent, wire.MarkProbe, wire.MarkEpochEnd}
	const n = 30000
	for i := range n {
		m := Mark{T: int64(i+1) * 1e6, Kind: kinds[i%len(kinds)], Step: i / 2, Epoch: None, Rank: i%3 - 1, GPU: None, PID: None, Code: None}
		if m.Kind != wire.MarkStep {
			m.Text, m.Step, m.Epoch = "note", None, i/1000
		}
		must(t, a.AppendMark(m))
	}
	must(t, a.Close())
	r := a.Run().Within(5e6, (n-5)*1e6)
	it := db.Marks(r, MinTime, MaxTime)
	seen, steps := 0, 0
	for ts := it.NextBlock(); len(ts) > 0; ts = it.NextBlock() {
		for i := range ts {
			m := it.BlockAt(i)
			tt, step, rank, ok := StepAt(it, i)
			if ok != (m.Kind == wire.MarkStep) {
				t.Fatalf("mark at %d of kind %q: StepAt says step %v", m.T, m.Kind, ok)
			}
			if ok && (tt != m.T || step != m.Step || rank != m.Rank) {
				t.Fatalf("step mark %+v: StepAt gives time %d, step %d, rank %d", m, tt, step, rank)
			}
			if ok {
				steps++
			}
			seen++
		}
	}
	must(t, it.Err())
	// The marks at 5 ms up to n-5 ms are in the window.
	wantSeen, wantSteps := 0, 0
	for i := 4; i < n-6; i++ {
		wantSeen++
		if kinds[i%len(kinds)] == wire.MarkStep {
			wantSteps++
		}
	}
	if seen != wantSeen || steps != wantSteps {
		t.Fatalf("read %d marks, %d steps; want %d, %d", seen, steps, wantSeen, wantSteps)
	}
}
