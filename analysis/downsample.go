package analysis

import (
	"math"
	"slices"
	"sort"

	"github.com/memrec/memrec/analysis/growth"
)

// This file holds the downsampling for charts: M4 (per bucket of time the
// first, lowest, highest and last point, so no peak disappears), and the
// decimation of the step peaks for drawing.

// m4 downsamples a stream into buckets of equal time.
type m4 struct {
	start, width        int64
	cur                 int64    // current bucket, -1 before the first point
	n                   int64    // points added so far
	first, lo, hi, last [3]int64 // (t, v, index)
	out                 *Series
	// from, to are the times of the current bucket, [from, to): a point
	// inside them needs no division to find its bucket (empty: from > to).
	from, to int64
}

func newM4(start, end int64, buckets int, out *Series) *m4 {
	w := max((end-start)/int64(buckets), 1)
	return &m4{start: start, width: w, cur: -1, out: out, from: 1, to: 0}
}

func (m *m4) add(t, v int64) {
	p := [3]int64{t, v, m.n}
	m.n++
	if t < m.from || t >= m.to {
		if b := (t - m.start) / m.width; b != m.cur {
			m.flush()
			m.cur = b
			m.first, m.lo, m.hi, m.last = p, p, p, p
			m.from, m.to = 1, 0
			if t >= m.start { // (before start, division truncates toward zero: no simple bounds)
				m.from = m.start + b*m.width
				m.to = m.from + m.width
			}
			return
		}
	}
	if v < m.lo[1] {
		m.lo = p
	}
	if v > m.hi[1] {
		m.hi = p
	}
	m.last = p
}

// addAll adds the points (ts[i], vs[i]), ts ascending: the points inside
// the current bucket are taken as a run, without a test of each one's
// bucket.
func (m *m4) addAll(ts, vs []int64) {
	for i := 0; i < len(ts); {
		t := ts[i]
		if t < m.from || t >= m.to {
			m.add(t, vs[i])
			i++
			continue
		}
		j := upTo(ts, i, m.to)
		run := vs[i:j]
		lo, hi := extremes(run)
		// The first point of the run at a new extreme, as one by one.
		if lo < m.lo[1] {
			k := slices.Index(run, lo)
			m.lo = [3]int64{ts[i+k], lo, m.n + int64(k)}
		}
		if hi > m.hi[1] {
			k := slices.Index(run, hi)
			m.hi = [3]int64{ts[i+k], hi, m.n + int64(k)}
		}
		m.n += int64(j - i)
		m.last = [3]int64{ts[j-1], vs[j-1], m.n - 1}
		i = j
	}
}

// addBlock is addAll for points whose lowest and highest values are lo
// and hi: where they all lie in the current bucket (a block of samples is
// mostly inside one), the bucket takes them without a look at each point.
func (m *m4) addBlock(ts, vs []int64, lo, hi int64) {
	n := len(ts)
	if n == 0 || ts[0] < m.from || ts[n-1] >= m.to {
		m.addAll(ts, vs)
		return
	}
	// The first point at a new extreme, as one by one.
	if lo < m.lo[1] {
		k := slices.Index(vs, lo)
		m.lo = [3]int64{ts[k], lo, m.n + int64(k)}
	}
	if hi > m.hi[1] {
		k := slices.Index(vs, hi)
		m.hi = [3]int64{ts[k], hi, m.n + int64(k)}
	}
	m.n += int64(n)
	m.last = [3]int64{ts[n-1], vs[n-1], m.n - 1}
}

func (m *m4) flush() {
	if m.cur < 0 {
		return
	}
	pts := [][3]int64{m.first, m.lo, m.hi, m.last}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
	var lastT int64 = math.MinInt64
	for _, p := range pts {
		if p[0] == lastT {
			continue
		}
		lastT = p[0]
		m.out.T = append(m.out.T, p[0])
		m.out.V = append(m.out.V, p[1])
		m.out.I = append(m.out.I, p[2])
	}
}

// Downsample keeps, of each of buckets equal spans of t, the first, lowest,
// highest and last point (M4, as the timelines are made): at most 4·buckets
// points, every peak kept. t must be sorted; I of the result indexes t.
func Downsample(name string, t, v []int64, buckets int) Series {
	out := Series{Name: name}
	if len(t) == 0 {
		return out
	}
	m := newM4(t[0], t[len(t)-1]+1, max(buckets, 1), &out)
	for i := range t {
		m.add(t[i], v[i])
	}
	m.flush()
	return out
}

// decimateFloors keeps at most about limit points: of each of limit/4 runs
// of floors the first, lowest, highest and last, in order (M4, so the
// band drawn from them is the band of all of them). They are in a new
// array, so that the caller may reuse pts'.
func decimateFloors(pts []growth.FloorPoint, limit int) []growth.FloorPoint {
	runs := max(1, limit/4)
	if len(pts) <= limit {
		return slices.Clone(pts)
	}
	k := (len(pts) + runs - 1) / runs
	out := make([]growth.FloorPoint, 0, 4*runs)
	for i := 0; i < len(pts); i += k {
		run := pts[i:min(i+k, len(pts))]
		lo, hi := 0, 0
		for j, p := range run {
			if p.Bytes < run[lo].Bytes {
				lo = j
			}
			if p.Bytes > run[hi].Bytes {
				hi = j
			}
		}
		keep := []int{0, lo, hi, len(run) - 1}
		slices.Sort(keep)
		for j, at := range keep {
			if j == 0 || at != keep[j-1] {
				out = append(out, run[at])
			}
		}
	}
	return out
}

// decimatePeaks keeps at most about limit points, the highest of each run.
func decimatePeaks(pts []growth.FloorPoint, limit int) []growth.FloorPoint {
	if len(pts) <= limit {
		return pts
	}
	k := (len(pts) + limit - 1) / limit
	out := make([]growth.FloorPoint, 0, limit)
	for i := 0; i < len(pts); i += k {
		best := pts[i]
		for _, p := range pts[i:min(i+k, len(pts))] {
			if p.Bytes > best.Bytes {
				best = p
			}
		}
		out = append(out, best)
	}
	return out
}

// peakRuns is decimatePeaks for points that come one at a time, n in all:
// it keeps the highest of each run of k as they come, so the points
// decimated away are never held.
type peakRuns struct {
	k, seen int
	out     []growth.FloorPoint
}

func newPeakRuns(n, limit int) *peakRuns {
	k := 1
	if n > limit {
		k = (n + limit - 1) / limit
	}
	return &peakRuns{k: k, out: make([]growth.FloorPoint, 0, (n+k-1)/k)}
}

func (r *peakRuns) add(p growth.FloorPoint) {
	if r.seen%r.k == 0 {
		r.out = append(r.out, p)
	} else if last := &r.out[len(r.out)-1]; p.Bytes > last.Bytes {
		*last = p
	}
	r.seen++
}
