package compare

import (
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/replay/replaytest"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// TestCompareBySeqLenReplaysEachRequestsGrowth is compare --by seq_len of
// two probe runs of the toy transformer (replaytest.SynthAttention) with their
// allocator traces: the replay is the basis, each request grows as its
// two runs show, and the value without headroom is the limit of the
// job's own trace on that GPU or within 3 % below it; by a batch-size tag
// the same runs would be read on their lines.
func TestCompareBySeqLenReplaysEachRequestsGrowth(t *testing.T) {
	g := &analysistest.Gen{}
	for _, s := range []int64{1024, 2048} {
		tr := replaytest.SynthAttention(s)
		r, _ := replay.ReplayAllocator(tr.Ops, 0)
		g.TracedRun("s", "seq_len", s, tr, r.PeakAllocated)
	}
	by := byTagOf(t, g.String(), "seq_len", "s1024", "s2048")
	if by.Basis != "allocator_replay" || by.MaxFittingValueNoHeadroom == nil {
		t.Fatalf("basis %q, value %v: %v", by.Basis, by.MaxFittingValueNoHeadroom, by.leftOut)
	}
	if p := by.Replay.UnmatchedPower; p < 1.5 || p > 2 { // the peak grew 2^1.6 from 1024 to 2048
		t.Errorf("unmatched power %v", p)
	}
	if !strings.Contains(by.BasisWords, "the power of the value its sizes show") || !strings.Contains(by.BasisWords, "grown with the value to the power 1.6") {
		t.Errorf("basis words %q", by.BasisWords)
	}
	capacity := int64(by.Available(0))
	lo := replaytest.LimitOf(replaytest.SynthAttention, 2048, 20000, capacity)
	if v := *by.MaxFittingValueNoHeadroom; v > float64(lo) || v < 0.97*float64(lo) {
		t.Errorf("seq_len up to %v without headroom, the limit %d: %s", v, lo, by.IntervalWords)
	}
}

// TestReplayGrowsWhatLaterStepsAdded: runs whose per-step peak, over the
// whole run, exceeded their three-step traces' (an evaluation holding
// 6 MiB a sample more) are projected with that excess grown with the
// value at the pessimistic end: not above the limit of the job with its
// evaluation, where the excess kept at the higher run's size would be.
func TestReplayGrowsWhatLaterStepsAdded(t *testing.T) {
	g := &analysistest.Gen{}
	for _, b := range []int64{32, 64} {
		r, _ := replay.ReplayAllocator(replaytest.SynthBatch(b, true).Ops, 0)
		g.TracedRun("b", "batch_size", b, replaytest.SynthBatch(b, false), r.PeakAllocated)
	}
	by := byTagOf(t, g.String(), "batch_size", "b32", "b64")
	if by.Basis != "allocator_replay" || by.Replay.BeyondTraceBytes != 64*replaytest.EvalMiB<<20 || by.MaxFittingValueNoHeadroom == nil {
		t.Fatalf("basis %q, beyond %d, value %v: %v", by.Basis, by.Replay.BeyondTraceBytes, by.MaxFittingValueNoHeadroom, by.leftOut)
	}
	capacity := int64(by.Available(0))
	lo := replaytest.LimitOf(func(b int64) storage.AllocTrace { return replaytest.SynthBatch(b, true) }, 64, 100000, capacity)
	v := *by.MaxFittingValueNoHeadroom
	if v > float64(lo) || v < 0.97*float64(lo) {
		t.Errorf("batch_size up to %v without headroom, the limit with the evaluation %d: %s", v, lo, by.IntervalWords)
	}
	// The excess kept at the higher run's size puts it above.
	kept, _, _ := by.replay.Fitting(*by.Need, by.replayRoom(by.Available(0)), replay.Pessimistic, true)
	if kept <= float64(lo) {
		t.Errorf("with the excess kept at 64's size: %v, not above the limit %d: the test does not tell", kept, lo)
	}
}

// TestMixedTracesSayWhatTheAnswerRestsOn: where one of the two largest
// values' runs has an allocator trace and the other not, there is no
// replay and the notes name the run without one and the runs with one;
// with no trace at all, no such note.
func TestMixedTracesSayWhatTheAnswerRestsOn(t *testing.T) {
	traced, untraced := &analysistest.Gen{}, &analysistest.Gen{}
	for _, b := range []int64{32, 64} {
		r, _ := replay.ReplayAllocator(replaytest.SynthBatch(b, false).Ops, 0)
		traced.TracedRun("b", "batch_size", b, replaytest.SynthBatch(b, false), r.PeakAllocated)
		untraced.TracedRun("b", "batch_size", b, replaytest.SynthBatch(b, false), r.PeakAllocated)
	}
	var without strings.Builder
	for _, l := range strings.SplitAfter(untraced.String(), "\n") {
		if !strings.Contains(l, `"alloc_trace"`) {
			without.WriteString(l)
		}
	}
	// b32 traced (from the first), b64 without (from the second).
	runs := strings.SplitAfterN(traced.String(), `{"type":"run","name":"b64"`, 2)
	rest := strings.SplitAfterN(without.String(), `{"type":"run","name":"b64"`, 2)
	mixed := strings.TrimSuffix(runs[0], `{"type":"run","name":"b64"`) + `{"type":"run","name":"b64"` + rest[1]
	by := byTagOf(t, mixed, "batch_size", "b32", "b64")
	if by.Basis == "allocator_replay" {
		t.Fatalf("replayed with one trace")
	}
	var note string
	for _, n := range by.leftOut {
		if strings.Contains(n, "no allocator replay") {
			note = n
		}
	}
	if !strings.Contains(note, `"b64" (64) has none`) || !strings.Contains(note, `runs with a trace: "b32"`) {
		t.Errorf("the note: %q (notes %q)", note, by.leftOut)
	}
	by = byTagOf(t, without.String(), "batch_size", "b32", "b64")
	for _, n := range by.leftOut {
		if strings.Contains(n, "no allocator replay") {
			t.Errorf("a note without any trace: %q", n)
		}
	}
}
