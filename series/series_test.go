package series

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/memrec/memrec/storage"
)

// randomSeries is n samples 10 ms apart with ±1 ms jitter, a random walk
// with rare large steps (an allocation, a free).
func randomSeries(seed uint64, n int) (t, v []int64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var tt, vv int64 = 1_000_000_000, 1 << 30
	for range n {
		tt += 10_000_000 + rng.Int64N(2_000_000) - 1_000_000
		vv += rng.Int64N(2<<20) - 1<<20
		if rng.IntN(500) == 0 {
			vv += rng.Int64N(1<<30) - 1<<29
		}
		t, v = append(t, tt), append(v, vv)
	}
	return t, v
}

func build(t, v []int64) *Pyramid {
	var p Pyramid
	for i := range t {
		p.AddAll(t[i:i+1], v[i:i+1]) // a sample a call: the buckets span the calls
	}
	return &p
}

// buildMixed builds the pyramid as the viewer does from a file: stored
// summaries' pieces (up to storage.PieceSamples samples each) and, between
// them, runs of samples (the chunks a range cuts, an open chunk).
func buildMixed(t, v []int64) *Pyramid {
	var p Pyramid
	rng := rand.New(rand.NewPCG(9, 9))
	for i := 0; i < len(t); {
		n := min(1+rng.IntN(storage.PieceSamples), len(t)-i)
		if rng.IntN(4) == 0 {
			p.AddAll(t[i:i+n], v[i:i+n])
			i += n
			continue
		}
		b := One(t[i], v[i])
		for j := i + 1; j < i+n; j++ {
			b.merge(One(t[j], v[j]))
		}
		p.AddBucket(b)
		i += n
	}
	return &p
}

// TestBucketsCoverEverySample: at every level the buckets of the whole
// range hold every sample once, in time order, and their min and max are
// the samples' own.
func TestBucketsCoverEverySample(t *testing.T) {
	for _, n := range []int{0, 1, Base - 1, Base, Base + 1, Base * Fan * Fan, 100_003} {
		ts, vs := randomSeries(uint64(n), n)
		for _, p := range []*Pyramid{build(ts, vs), buildMixed(ts, vs)} {
			checkCover(t, p, n, vs)
		}
	}
}

// checkCover is TestBucketsCoverEverySample's check of one pyramid.
func checkCover(t *testing.T, p *Pyramid, n int, vs []int64) {
	t.Helper()
	for k := range 8 {
		var got, lastT int64 = 0, math.MinInt64
		lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
		p.Buckets(k, math.MinInt64, math.MaxInt64, func(b Bucket) {
			if b.T0 <= lastT {
				t.Fatalf("n=%d level %d: bucket at %d after one ending at %d", n, k, b.T0, lastT)
			}
			got, lastT = got+b.N, b.T1
			lo, hi = min(lo, b.Min), max(hi, b.Max)
		})
		if got != int64(n) {
			t.Errorf("n=%d level %d: buckets hold %d samples", n, k, got)
		}
		if n > 0 && (lo != slices.Min(vs) || hi != slices.Max(vs)) {
			t.Errorf("n=%d level %d: range %d..%d, samples %d..%d", n, k, lo, hi, slices.Min(vs), slices.Max(vs))
		}
	}
	if p.Len() != int64(n) {
		t.Errorf("Len %d, added %d", p.Len(), n)
	}
}

// bruteM4 is M4 computed straight from the samples, independently of the
// Reducer: for each column the first, last, min and max sample.
func bruteM4(ts, vs []int64, from, to int64, points int) (lo, hi []int64, has []bool) {
	lo, hi, has = make([]int64, points), make([]int64, points), make([]bool, points)
	for i, tt := range ts {
		if tt < from || tt >= to {
			continue
		}
		c := int((tt - from) * int64(points) / (to - from))
		if !has[c] {
			lo[c], hi[c], has[c] = vs[i], vs[i], true
		}
		lo[c], hi[c] = min(lo[c], vs[i]), max(hi[c], vs[i])
	}
	return lo, hi, has
}

// TestQueryMatchesSamples: a window read sample by sample has, in every
// pixel column, exactly the samples' lowest and highest value; one drawn
// from buckets has every sample's extreme within its column or the next
// (a bucket spans at most two columns, Level keeps it under one).
func TestQueryMatchesSamples(t *testing.T) {
	ts, vs := randomSeries(7, 300_000)
	t.Run("samples", func(t *testing.T) { testQuery(t, ts, vs, build(ts, vs)) })
	t.Run("pieces", func(t *testing.T) { testQuery(t, ts, vs, buildMixed(ts, vs)) })
}

func testQuery(t *testing.T, ts, vs []int64, p *Pyramid) {
	raw := func(from, to int64, add func(t, v int64)) error {
		for i := range ts {
			if ts[i] >= from && ts[i] < to {
				add(ts[i], vs[i])
			}
		}
		return nil
	}
	rng := rand.New(rand.NewPCG(3, 3))
	span := ts[len(ts)-1] - ts[0]
	for trial := range 60 {
		points := 100 + rng.IntN(2000)
		w := max(span>>rng.IntN(14), 1_000_000)
		from := ts[0] + rng.Int64N(max(span-w, 1))
		to := from + w
		res, err := Query(p, from, to, points, raw)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi, has := bruteM4(ts, vs, from, to, points)
		col := func(tt int64) int { return min(max(int((tt-from)*int64(points)/(to-from)), 0), points-1) }
		gotLo, gotHi := map[int]int64{}, map[int]int64{}
		for i, tt := range res.T {
			c := col(tt)
			if l, ok := gotLo[c]; !ok || res.V[i] < l {
				gotLo[c] = res.V[i]
			}
			if h, ok := gotHi[c]; !ok || res.V[i] > h {
				gotHi[c] = res.V[i]
			}
		}
		for c := range points {
			if !has[c] {
				continue
			}
			if res.Every == 1 {
				if gotLo[c] != lo[c] || gotHi[c] != hi[c] {
					t.Fatalf("trial %d (every sample): column %d drawn %d..%d, samples %d..%d", trial, c, gotLo[c], gotHi[c], lo[c], hi[c])
				}
				continue
			}
			// From buckets: every sample's value lies within the envelope
			// drawn in its column and its neighbours (a bucket is drawn
			// in the column of its first sample and spans under one).
			envLo, envHi := int64(math.MaxInt64), int64(math.MinInt64)
			for d := -1; d <= 1; d++ {
				if x, ok := gotLo[c+d]; ok {
					envLo = min(envLo, x)
				}
				if x, ok := gotHi[c+d]; ok {
					envHi = max(envHi, x)
				}
			}
			if lo[c] < envLo || hi[c] > envHi {
				t.Fatalf("trial %d (every %d): column %d's samples %d..%d outside the drawn %d..%d", trial, res.Every, c, lo[c], hi[c], envLo, envHi)
			}
		}
		wantEvery := int64(1)
		if n := res.Samples; n/int64(points) >= p.BucketSize(0) {
			wantEvery = p.BucketSize(p.Level(n, points))
		}
		if res.Every != wantEvery {
			t.Errorf("trial %d: %d samples over %d points drawn from units of %d, want %d", trial, res.Samples, points, res.Every, wantEvery)
		}
		if len(res.T) > 4*points {
			t.Errorf("trial %d: %d points for %d columns", trial, len(res.T), points)
		}
	}
}

// TestLastAt: the last sample at or before a time, against a search of
// the samples.
func TestLastAt(t *testing.T) {
	ts, vs := randomSeries(11, 5000)
	p := build(ts, vs)
	for _, q := range []int64{ts[0] - 1, ts[0], ts[1] - 1, ts[Base-1], ts[Base], ts[2500] + 3, ts[len(ts)-1], ts[len(ts)-1] + 1e9} {
		i, found := slices.BinarySearch(ts, q)
		if !found {
			i--
		}
		b, exact, ok := p.LastAt(q)
		if i < 0 {
			if ok {
				t.Errorf("LastAt(%d) found %v before the first sample", q, b)
			}
			continue
		}
		if !ok {
			t.Fatalf("LastAt(%d): nothing, want sample %d", q, i)
		}
		if exact && (b.T1 != ts[i] || b.Last != vs[i]) {
			t.Errorf("LastAt(%d) = (%d, %d), want (%d, %d)", q, b.T1, b.Last, ts[i], vs[i])
		}
		if !exact && (ts[i] < b.T0 || ts[i] > b.T1) {
			t.Errorf("LastAt(%d): bucket %d..%d does not hold sample %d at %d", q, b.T0, b.T1, i, ts[i])
		}
	}
}

// BenchmarkQueryWholeDay: a whole 24-hour 100 Hz series (8.64 M samples)
// reduced to 2 000 points from its pyramid.
func BenchmarkQueryWholeDay(b *testing.B) {
	ts, vs := randomSeries(1, 8_640_000)
	p := build(ts, vs)
	b.ReportMetric(float64(p.Bytes())/float64(len(ts)), "B/sample")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Query(p, ts[0], ts[len(ts)-1]+1, 2000, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// TestCount: a window over every sample counts them all; any other counts
// its level-0 buckets' samples, within a bucket of the samples at each end.
func TestCount(t *testing.T) {
	// One series with every sample at the same time: the open bucket
	// starts where the last complete one ends, and Buckets passes it over.
	same := func(n int) ([]int64, []int64) {
		ts, vs := make([]int64, n), make([]int64, n)
		for i := range ts {
			ts[i], vs[i] = 5_000, int64(i)
		}
		return ts, vs
	}
	for _, n := range []int{0, 1, Base - 1, Base + 1, Base * Fan * Fan, 100_003, -(Base + 3)} {
		ts, vs := randomSeries(uint64(n)+7, n)
		distinct := n >= 0
		if !distinct {
			n = -n
			ts, vs = same(n)
		}
		for pi, p := range []*Pyramid{build(ts, vs), buildMixed(ts, vs)} {
			windows := [][2]int64{{math.MinInt64, math.MaxInt64}}
			if n > 0 {
				first, last := ts[0], ts[n-1]
				windows = append(windows, [2]int64{first, last + 1}, [2]int64{first - 5, last + 5},
					[2]int64{first + 1, last + 1}, [2]int64{first, last}, [2]int64{(first + last) / 3, (first + last) / 2},
					[2]int64{last + 1, last + 100})
			}
			for _, w := range windows {
				in := int64(0)
				for _, tt := range ts {
					if tt >= w[0] && tt < w[1] {
						in++
					}
				}
				var buckets int64
				p.Buckets(0, w[0], w[1], func(b Bucket) { buckets += b.N })
				got := p.Count(w[0], w[1])
				switch {
				case distinct && in == int64(n) && got != in:
					t.Errorf("n=%d pyramid %d window %v: Count %d, every sample is %d", n, pi, w, got, in)
				case got != buckets:
					t.Errorf("n=%d pyramid %d window %v: Count %d, its level-0 buckets hold %d", n, pi, w, got, buckets)
				case got < in-2*int64(storage.PieceSamples) || got > in+2*int64(storage.PieceSamples):
					t.Errorf("n=%d pyramid %d window %v: Count %d, %d samples in it", n, pi, w, got, in)
				}
			}
		}
	}
}

// BenchmarkCountWholeDay counts a day's series over the whole run, as a
// report's page does for every line and level.
func BenchmarkCountWholeDay(b *testing.B) {
	ts, vs := randomSeries(1, 8_640_000)
	p := build(ts, vs)
	for b.Loop() {
		if p.Count(ts[0], ts[len(ts)-1]+1) != int64(len(ts)) {
			b.Fatal("not every sample")
		}
	}
}

// TestKeys: every field's key reads back as itself; a budget sample
// becomes its four parts, each at its own value.
func TestKeys(t *testing.T) {
	for f := Used; f <= Buffers; f++ {
		k := Key{Field: f, GPU: 3}
		if f.PerProcess() {
			k.PID = 4711
		}
		got, err := ParseKey(k.String())
		if err != nil || got != k {
			t.Errorf("%v: ParseKey = %v, %v", k, got, err)
		}
	}
	for _, bad := range []string{"gpu0.params", "gpu0.used.7", "gpu-1.used", "cpu0.used", "gpu0.nope.1", "gpu0"} {
		if _, err := ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	x := NewIndex(0)
	x.AddBudget(storage.BudgetSample{T: 10, GPU: 1, PID: 9, Params: 100, Grads: 200, OptimizerState: 400, Buffers: 8})
	want := map[Field]int64{Params: 100, Grads: 200, OptimizerState: 400, Buffers: 8}
	for f, v := range want {
		_, got, ok, err := x.At(Key{Field: f, GPU: 1, PID: 9}, 10, nil)
		if err != nil || !ok || got != v {
			t.Errorf("%v at 10: %d, %v, %v; want %d", f, got, ok, err, v)
		}
	}
}

// TestReserveKeepsTheAnswers: a pyramid sized for its samples beforehand
// (Reserve, more or fewer than come) gives the same buckets at every
// level, span and last samples as one grown as they came, and one sized
// for as many as come does not move its level 0.
func TestReserveKeepsTheAnswers(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 127, 128, 5000, 70000} {
		ts, vs := make([]int64, n), make([]int64, n)
		for i := range ts {
			ts[i], vs[i] = int64(i)*10+int64(rng.IntN(5)), rng.Int64N(1<<30)
		}
		for _, hint := range []int64{int64(n), int64(n) / 3, 4 * int64(n)} {
			var grown, sized Pyramid
			sized.Reserve(hint)
			var l0 *Bucket
			if len(sized.levels) > 0 && cap(sized.levels[0]) > 0 {
				l0 = &sized.levels[0][:1][0]
			}
			for i := 0; i < n; {
				j := min(n, i+1+rng.IntN(700))
				grown.AddAll(ts[i:j], vs[i:j])
				sized.AddAll(ts[i:j], vs[i:j])
				i = j
			}
			if hint == int64(n) && l0 != nil && &sized.levels[0][:1][0] != l0 {
				t.Errorf("n %d: level 0 moved, sized for %d", n, hint)
			}
			gf, gl, gok := grown.Span()
			sf, sl, sok := sized.Span()
			if gf != sf || gl != sl || gok != sok {
				t.Fatalf("n %d, hint %d: span %d..%d %v, want %d..%d %v", n, hint, sf, sl, sok, gf, gl, gok)
			}
			for k := range 8 {
				var a, b []Bucket
				grown.Buckets(k, math.MinInt64, math.MaxInt64, func(x Bucket) { a = append(a, x) })
				sized.Buckets(k, math.MinInt64, math.MaxInt64, func(x Bucket) { b = append(b, x) })
				if !slices.Equal(a, b) {
					t.Fatalf("n %d, hint %d, level %d: %d buckets, want %d the same", n, hint, k, len(b), len(a))
				}
			}
			for _, q := range []int64{-1, 5, int64(n) * 5, int64(n) * 20} {
				gb, ge, gk := grown.LastAt(q)
				sb, se, sk := sized.LastAt(q)
				if gb != sb || ge != se || gk != sk {
					t.Fatalf("n %d, hint %d: LastAt(%d) differs", n, hint, q)
				}
			}
		}
	}
}

// TestAddSampleAsAdd: a window's samples added one by one (addSample, which
// works out a column only where a sample leaves the last one's times) give
// the columns Add(One) gives each sample, at every column's edge: windows
// of a few to many nanoseconds a column, samples on every nanosecond near
// the edges and at random times, before and after the window too.
func TestAddSampleAsAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, w := range []struct {
		from, to int64
		points   int
	}{{0, 10, 3}, {0, 1000, 7}, {5, 1_000_005, 800}, {1e18, 1e18 + 86_400e9, 12800}, {-50, 50, 100}, {0, 1 << 40, 51200}, {3, 4, 5}} {
		var ts []int64
		span := w.to - w.from
		for c := 0; c <= w.points; c++ { // around each column's edge
			edge := w.from + int64(float64(c)*float64(span)/float64(w.points))
			for d := int64(-3); d <= 3; d++ {
				ts = append(ts, edge+d)
			}
		}
		for range 2000 {
			ts = append(ts, w.from-span/10+rng.Int64N(span+span/5+1))
		}
		slices.Sort(ts)
		ts = slices.Compact(ts)
		want, got := NewReducer(w.from, w.to, w.points), NewReducer(w.from, w.to, w.points)
		for i, t := range ts {
			v := rng.Int64N(100) - int64(i%7)
			want.Add(One(t, v))
			got.addSample(t, v)
		}
		if !slices.Equal(want.cols, got.cols) || want.Samples() != got.Samples() {
			for c := range want.cols {
				if want.cols[c] != got.cols[c] {
					t.Errorf("window %+v, column %d: %+v, Add gives %+v", w, c, got.cols[c], want.cols[c])
					break
				}
			}
		}
	}
}

// BenchmarkAddAllDay adds a day's series (8.64 M samples at 100 Hz) in
// blocks of 1 024 samples, as the report's analysis hands them over: a
// random walk, and a training run's sawtooth (a ramp each step, a fall
// at its end), whose new highs come one after another.
func BenchmarkAddAllDay(b *testing.B) {
	const n, block = 8_640_000, 1024
	walkT, walkV := randomSeries(1, n)
	saw := make([]int64, n)
	for i := range saw {
		saw[i] = 1<<30 + int64(i%37)<<22
	}
	for _, c := range []struct {
		name   string
		ts, vs []int64
	}{{"walk", walkT, walkV}, {"sawtooth", walkT, saw}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(n) * 8)
			for b.Loop() {
				var p Pyramid
				p.Reserve(n)
				for i := 0; i < n; i += block {
					j := min(i+block, n)
					p.AddAll(c.ts[i:j], c.vs[i:j])
				}
			}
		})
	}
}
