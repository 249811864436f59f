package analysis

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"sort"
	"testing"

	"github.com/memrec/memrec/analysis/growth"
)

// TestBatchAddsAreTheSampleAdds: the trackers fed a column at a time (and
// spans a block with its extremes) end as they do fed one sample at a time,
// and spans fed a column return its extremes, for random samples cut into random
// blocks, and for spans with gaps, overlaps and none at all. The timeline
// fed a block with its extremes ends as fed one sample at a time too, and
// two trackers of the same spans walked at once (addAll2) end as each fed
// alone.
func TestBatchAddsAreTheSampleAdds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n := rng.IntN(400)
		ts, vs := make([]int64, n), make([]int64, n)
		tt := int64(rng.IntN(50))
		for i := range ts {
			tt += int64(rng.IntN(3)) // repeated times too
			ts[i], vs[i] = tt, rng.Int64N(1000)-500
		}
		end := tt + 5
		var lo, hi []int64
		for x := int64(rng.IntN(20)); x < end+10 && round%7 != 0; {
			w := int64(1 + rng.IntN(30))
			lo, hi = append(lo, x), append(hi, x+w)
			switch rng.IntN(3) {
			case 0:
				x += w // adjacent
			case 1:
				x += w + int64(rng.IntN(20)) // a gap
			default:
				x += max(1, w-int64(rng.IntN(int(w)))) // overlapping
			}
		}
		q := make([]int64, rng.IntN(30))
		for i := range q {
			q[i] = int64(rng.IntN(int(end) + 60))
		}
		slices.Sort(q)
		q = slices.Compact(q)

		var s1, s2, s3 Series
		m1, m2 := newM4(10, end, 1+rng.IntN(40), &s1), newM4(10, end, 1+rng.IntN(40), &s2)
		m2.width = m1.width
		m3 := newM4(10, end, 1, &s3)
		m3.width = m1.width
		sp1, sp2, sp3 := newSpans(lo, hi, keepBoth, nil), newSpans(lo, hi, keepBoth, nil), newSpans(lo, hi, keepBoth, nil)
		lows, highs := newSpans(lo, hi, keepMin, nil), newSpans(lo, hi, keepMax, nil)
		ws := make([]int64, n) // a second column of the same samples
		for i := range ws {
			ws[i] = rng.Int64N(1000) - 500
		}
		wOne, pairV, pairW := newSpans(lo, hi, keepBoth, nil), newSpans(lo, hi, keepBoth, nil), newSpans(lo, hi, keepBoth, nil)
		for i := range ts {
			wOne.add(ts[i], ws[i])
		}
		a1, a2 := newAtTimes(q, nil), newAtTimes(q, nil)
		a1.life, a2.life = 7, 7
		n1, n2 := newNearTimes[int64](q), newNearTimes[int64](q)
		for i := range ts {
			m1.add(ts[i], vs[i])
			sp1.add(ts[i], vs[i])
			a1.add(ts[i], vs[i])
			n1.add(ts[i], vs[i])
		}
		for i := 0; i < n; {
			j := min(n, i+1+rng.IntN(60))
			m2.addAll(ts[i:j], vs[i:j])
			if i < j {
				m3.addBlock(ts[i:j], vs[i:j], slices.Min(vs[i:j]), slices.Max(vs[i:j]))
			}
			bl, bh := slices.Min(vs[i:j]), slices.Max(vs[i:j])
			sp3.addBlock(ts[i:j], vs[i:j], bl, bh)
			for _, s := range []*spans{sp2, lows, highs} {
				if l, h := s.addAll(ts[i:j], vs[i:j]); l != bl || h != bh {
					t.Fatalf("round %d: a block's extremes %d %d from its spans' walk, want %d %d", round, l, h, bl, bh)
				}
			}
			if i < j {
				l, h, l2, h2 := addAll2(pairV, pairW, ts[i:j], vs[i:j], ws[i:j])
				if l != bl || h != bh || l2 != slices.Min(ws[i:j]) || h2 != slices.Max(ws[i:j]) {
					t.Fatalf("round %d: a block's extremes %d %d and %d %d from the paired walk, want %d %d and %d %d",
						round, l, h, l2, h2, bl, bh, slices.Min(ws[i:j]), slices.Max(ws[i:j]))
				}
			}
			a2.addAll(ts[i:j], vs[i:j])
			n2.addAll(ts[i:j], vs[i:j])
			i = j
		}
		m1.flush()
		m2.flush()
		m3.flush()
		a1.done()
		a2.done()
		n1.done()
		n2.done()
		if !reflect.DeepEqual(s1, s2) {
			t.Fatalf("round %d: m4 %v, one by one %v", round, s2, s1)
		}
		if !reflect.DeepEqual(s1, s3) {
			t.Fatalf("round %d: m4 by blocks %v, one by one %v", round, s3, s1)
		}
		if !slices.Equal(sp1.min, sp2.min) || !slices.Equal(sp1.max, sp2.max) {
			t.Fatalf("round %d: spans %v %v, one by one %v %v (lo %v hi %v)", round, sp2.min, sp2.max, sp1.min, sp1.max, lo, hi)
		}
		if !slices.Equal(sp1.min, sp3.min) || !slices.Equal(sp1.max, sp3.max) {
			t.Fatalf("round %d: spans by blocks %v %v, one by one %v %v (lo %v hi %v)", round, sp3.min, sp3.max, sp1.min, sp1.max, lo, hi)
		}
		if !slices.Equal(sp1.min, pairV.min) || !slices.Equal(sp1.max, pairV.max) || !slices.Equal(wOne.min, pairW.min) || !slices.Equal(wOne.max, pairW.max) {
			t.Fatalf("round %d: spans walked in pairs %v %v and %v %v, one by one %v %v and %v %v", round,
				pairV.min, pairV.max, pairW.min, pairW.max, sp1.min, sp1.max, wOne.min, wOne.max)
		}
		if !slices.Equal(sp1.min, lows.min) || !slices.Equal(sp1.max, highs.max) || lows.max != nil || highs.min != nil {
			t.Fatalf("round %d: spans keeping one extreme %v %v, both %v %v", round, lows.min, highs.max, sp1.min, sp1.max)
		}
		for k := range lo {
			if lows.has(k) != sp1.has(k) || highs.has(k) != sp1.has(k) {
				t.Fatalf("round %d: span %d has samples: %v keeping the lowest, %v the highest, %v both", round, k, lows.has(k), highs.has(k), sp1.has(k))
			}
		}
		if !slices.Equal(a1.vals, a2.vals) || !slices.Equal(a1.ages, a2.ages) || !reflect.DeepEqual(a1.far, a2.far) || !slices.Equal(a1.ok, a2.ok) {
			t.Fatalf("round %d: at times %v %v, one by one %v %v", round, a2.vals, a2.ok, a1.vals, a1.ok)
		}
		for i, qt := range q {
			// the last sample at or before the query time, found by a scan
			if k := sort.Search(n, func(k int) bool { return ts[k] > qt }) - 1; a2.ok[i] && (k < 0 || a2.tAt(i) != ts[k]) {
				t.Fatalf("round %d: the sample behind the value at %d is at %d, want the last at or before it", round, qt, a2.tAt(i))
			}
		}
		for i := range q {
			if n1.nearest(i) != n2.nearest(i) {
				t.Fatalf("round %d: nearest to %d: %v, one by one %v", round, q[i], n2.nearest(i), n1.nearest(i))
			}
		}
	}
}

// TestDecimateFloorsKeepsTheBand: thinned floors are at most about the
// limit, in order, and keep the first, the last, and each run's lowest and
// highest, so every run's extremes are still drawn.
func TestDecimateFloorsKeepsTheBand(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	pts := make([]growth.FloorPoint, 100_003)
	for i := range pts {
		pts[i] = growth.FloorPoint{X: float64(i), TNS: int64(i), Bytes: rng.Int64N(1 << 30)}
	}
	pts[777].Bytes, pts[99_999].Bytes = -1, 1<<31 // the extremes of all
	got := decimateFloors(pts, 400)
	if len(got) > 400 || got[0] != pts[0] || got[len(got)-1] != pts[len(pts)-1] {
		t.Fatalf("%d points, first %v last %v", len(got), got[0], got[len(got)-1])
	}
	if !slices.IsSortedFunc(got, func(a, b growth.FloorPoint) int { return int(a.X - b.X) }) {
		t.Fatal("not in order")
	}
	if !slices.Contains(got, pts[777]) || !slices.Contains(got, pts[99_999]) {
		t.Fatal("an extreme of all was thinned away")
	}
	if short := pts[:300]; len(decimateFloors(short, 400)) != 300 {
		t.Fatal("floors under the limit were thinned")
	}
}

// TestPeakRunsAsDecimatePeaks: step peaks kept as they come are those
// decimatePeaks keeps of them all, over and under the limit and with ties
// (the first highest of a run is kept).
func TestPeakRunsAsDecimatePeaks(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 399, 400, 401, 6400, 100_003} {
		pts := make([]growth.FloorPoint, n)
		for i := range pts {
			pts[i] = growth.FloorPoint{X: float64(i), TNS: int64(i), Bytes: rng.Int64N(8)}
		}
		r := newPeakRuns(n, 400)
		for _, p := range pts {
			r.add(p)
		}
		if want := decimatePeaks(pts, 400); !slices.Equal(r.out, want) {
			t.Errorf("%d points: %d kept, want decimatePeaks' %d", n, len(r.out), len(want))
		}
	}
}

// TestAtTimesKeepsOldSamplesTimes: the time behind a value is exact where
// the sample is older than an age holds, and where it is not.
func TestAtTimesKeepsOldSamplesTimes(t *testing.T) {
	q := []int64{10, 1e10, 1e10 + 5, 3e10}
	a := newAtTimes(q, nil)
	a.addAll([]int64{1, 7}, []int64{100, 200})
	a.addAll([]int64{1e10 + 1}, []int64{300})
	a.done()
	for i, want := range []int64{7, 7, 1e10 + 1, 1e10 + 1} {
		if !a.ok[i] || a.tAt(i) != want {
			t.Errorf("at %d: sample at %d (held %v), want %d", q[i], a.tAt(i), a.ok[i], want)
		}
	}
}

// TestExtremesAsMinMax: the unrolled extremes give slices.Min and
// slices.Max for every length around their unrolling of four, with the
// extremes at every position.
func TestExtremesAsMinMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 1; n <= 13; n++ {
		for range 50 {
			xs := make([]int64, n)
			for i := range xs {
				xs[i] = rng.Int64N(100) - 50
			}
			lo, hi := extremes(xs)
			if lo != slices.Min(xs) || hi != slices.Max(xs) {
				t.Fatalf("%v: extremes %d %d, want %d %d", xs, lo, hi, slices.Min(xs), slices.Max(xs))
			}
		}
	}
}
