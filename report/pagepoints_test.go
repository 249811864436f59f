package report

import (
	"math"
	"slices"
	"testing"

	"github.com/memrec/memrec/analysis"
)

// FuzzPackPoints: what packPoints writes, unpackPoints reads back, and
// packedSize says its length.
func FuzzPackPoints(f *testing.F) {
	f.Add(int64(0), int64(0), int64(100_000), int64(-3))
	f.Add(int64(math.MaxInt64), int64(math.MinInt64), int64(1), int64(-1))
	f.Add(int64(86_400_000_000), int64(150<<20), int64(-64), int64(63))
	f.Fuzz(func(t *testing.T, a, b, c, d int64) {
		dt, dv := []int64{a, c, a ^ d}, []int64{b, d, b - c}
		s := packPoints(dt, dv)
		if len(s) != packedSize(dt, dv) {
			t.Errorf("packed %d B, packedSize says %d", len(s), packedSize(dt, dv))
		}
		gt, gv, err := unpackPoints(s)
		if err != nil || !slices.Equal(gt, dt) || !slices.Equal(gv, dv) {
			t.Errorf("%v %v: read back %v %v (%v)", dt, dv, gt, gv, err)
		}
	})
}

// TestUnpackPointsCut: a pair cut short is an error, not a point.
func TestUnpackPointsCut(t *testing.T) {
	for _, s := range []string{"gA==", "AA=="} { // a varint's first byte only; one varint of a pair
		if dt, dv, err := unpackPoints(s); err == nil {
			t.Errorf("%q read as %v %v", s, dt, dv)
		}
	}
}

// TestBaseBuckets: the first level's buckets per line come from the
// budget's share; a page with room keeps PageBuckets, a tight one never
// goes under minPageBuckets.
func TestBaseBuckets(t *testing.T) {
	const size = 1_000_000 // what PageBuckets buckets of every line take
	for _, c := range []struct {
		budget, want int
	}{
		{baseShare * size, PageBuckets},                 // the share holds them
		{baseShare * size * 7 / 8, PageBuckets * 7 / 8}, // 7/8 of the room: 7/8 of the buckets
		{baseShare * size * 3 / 4, PageBuckets * 3 / 4}, // 600: minPageBuckets itself
		{baseShare * size / 2, minPageBuckets},          // less room: the floor
		{0, minPageBuckets},
	} {
		if got := baseBuckets(PageBuckets, size, c.budget); got != c.want {
			t.Errorf("budget %d: %d buckets, want %d", c.budget, got, c.want)
		}
	}
}

// TestPyramidBaseFromBudget: the run's lines share the budget: with
// room, PageBuckets buckets a line; with a budget whose fifth the lines'
// first level at PageBuckets overfills, fewer, and the page's data
// says how many.
func TestPyramidBaseFromBudget(t *testing.T) {
	rep, opts, _ := pyramidRun(t)
	all := func(int) bool { return true }
	wide := pyramidFrom(rep, all, opts, DefaultPageBytes, PageBuckets, 0)
	if wide.Buckets != PageBuckets {
		t.Fatalf("%d buckets", wide.Buckets)
	}
	size := wide.size()
	room := pyramidOf(rep, all, opts, DefaultPageBytes)
	// The epochs are paid first; the lines share what is left.
	budget := baseShare*size*7/8 + wide.epochBytes()
	tight := pyramidOf(rep, all, opts, budget)
	if room.Buckets != PageBuckets || tight.Buckets != PageBuckets*7/8 {
		t.Errorf("first level: %d buckets with room, %d with 7/8 of it (want %d)", room.Buckets, tight.Buckets, PageBuckets*7/8)
	}
	if tight.Bytes > tight.Budget {
		t.Errorf("%d B over the budget of %d B", tight.Bytes, tight.Budget)
	}
}

// TestEpochSetsShared: GPUs with the same epochs share one packed list,
// which reads back as the epochs; a GPU with others gets its own.
func TestEpochSetsShared(t *testing.T) {
	e := func(s, e int64) analysis.EpochDelta { return analysis.EpochDelta{StartNS: s, EndNS: e} }
	same := []analysis.EpochDelta{e(1e9, 5e9), e(5e9, 9e9), e(9_500_000_000, 12e9)}
	rep := &analysis.Report{StartNS: 0, EndNS: 20e9, GPUs: []analysis.GPUReport{
		{GPU: 0, Epochs: same}, {GPU: 1, Epochs: same}, {GPU: 2, Epochs: same[:2]}, {GPU: 3},
	}}
	d := timelineOf(rep, func(int) bool { return true }, PageBuckets)
	if len(d.EpochSets) != 2 {
		t.Fatalf("%d epoch sets, want 2", len(d.EpochSets))
	}
	want := []int{0, 0, 1, -1}
	for i, g := range d.GPUs {
		if g.EpochSet != want[i] {
			t.Errorf("GPU %d: epoch set %d, want %d", g.GPU, g.EpochSet, want[i])
		}
	}
	gap, length, err := unpackPoints(d.EpochSets[0])
	if err != nil {
		t.Fatal(err)
	}
	var end int64
	for i, x := range same {
		start := end + gap[i]
		end = start + length[i]
		if start != x.StartNS/1000 || end != x.EndNS/1000 {
			t.Errorf("epoch %d: %d–%d µs, want %d–%d", i, start, end, x.StartNS/1000, x.EndNS/1000)
		}
	}
}
