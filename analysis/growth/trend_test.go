package growth

import (
	"math"
	"slices"
	"testing"
)

// The expected values below come from analysis/testdata/trend_reference.py, an
// independent implementation in plain Python of the same statistics as
// SciPy and pymannkendall define them (Theil–Sen with Sen's interval as
// scipy.stats.theilslopes, intercept as its method="joint"; Mann–Kendall
// with Kendall's tie correction and a continuity correction). Made with
// `python3 analysis/testdata/trend_reference.py` and copied here.
var trendCases = []struct {
	name          string
	x, y          []float64
	slope, lo, hi float64
	intercept     float64
	s             int64
	z, p          float64
}{
	{"ties", seq(1, 12), []float64{5, 5, 6, 6, 6, 8, 7, 9, 9, 9, 12, 11},
		0.5714285714285714, 0.42857142857142855, 0.75, 4.0, 55, 3.77767115396132, 0.0001583017116126304},
	{"noisy", seq(0, 29), noisy(),
		3.04, 2.875, 3.3333333333333335, -0.8200000000000007, 411, 7.314822711435647, 2.577214253137103e-13},
	{"flat", seq(0, 19), flat(),
		0, 0, 0, 4.0, -15, -0.6110100926607788, 0.541192898741999},
	{"uneven", []float64{0, 0.5, 2, 2.5, 4, 7, 7.5, 9, 12}, []float64{1, 2, 2, 4, 3, 8, 7, 9, 13},
		0.9519450800915332, 0.6, 1.2, 1.0, 31, 3.144854510165755, 0.001661694457983511},
}

func seq(a, b int) []float64 {
	var s []float64
	for i := a; i <= b; i++ {
		s = append(s, float64(i))
	}
	return s
}

// noisy is 3·i plus bounded noise, as the reference script makes it.
func noisy() []float64 {
	var y []float64
	for i := range 30 {
		y = append(y, 3*float64(i)+float64((i*37)%11)-5)
	}
	return y
}

// flat is 4 with a 5 every fourth point: no trend, mostly ties.
func flat() []float64 {
	var y []float64
	for i := range 20 {
		v := 4.0
		if i%4 == 0 {
			v = 5
		}
		y = append(y, v)
	}
	return y
}

func near(got, want float64) bool {
	return got == want || math.Abs(got-want) <= 1e-9*math.Max(math.Abs(want), 1e-300)
}

func TestFitTrendAgainstReference(t *testing.T) {
	t.Parallel()
	for _, c := range trendCases {
		got := fitTrend(c.x, c.y)
		if got.JumpsTaken != 0 {
			t.Fatalf("%s: %d jumps removed; the reference cases have none", c.name, got.JumpsTaken)
		}
		for _, f := range []struct {
			what      string
			got, want float64
		}{{"slope", got.Slope, c.slope}, {"lo", got.Lo, c.lo}, {"hi", got.Hi, c.hi}, {"intercept", got.Intercept, c.intercept},
			{"S", float64(got.S), float64(c.s)}, {"Z", got.Z, c.z}, {"p", got.P, c.p}} {
			if !near(f.got, f.want) {
				t.Errorf("%s: %s = %v, reference %v", c.name, f.what, f.got, f.want)
			}
		}
	}
}

func TestRemoveJumpsAgainstReference(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		y     []float64
		want  []float64
		taken int
	}{
		{"one", []float64{10, 10, 11, 10, 10, 110, 110, 111, 110, 110}, []float64{10, 10, 11, 10, 10, 10, 10, 11, 10, 10}, 1},
		{"two", []float64{0, 0, 1, 50, 50, 51, 51, 151, 151, 152}, []float64{0, 0, 1, 1, 1, 2, 2, 2, 2, 3}, 2},
		{"steps", seq(0, 9), seq(0, 9), 0},
	} {
		got, taken := removeJumps(c.y)
		if taken != c.taken || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v (%d taken), reference %v (%d)", c.name, got, taken, c.want, c.taken)
		}
	}
}

// BenchmarkFitPoints is one Theil–Sen fit with its Mann–Kendall test on
// maxTrendPoints points, the most any series is reduced to.
func BenchmarkFitPoints(b *testing.B) {
	x, y := make([]float64, maxTrendPoints), make([]float64, maxTrendPoints)
	for i := range x {
		x[i], y[i] = float64(i), float64((i*7919)%1000+i/3)
	}
	for b.Loop() {
		fitPoints(x, y)
	}
}

// fitTrend fits y against x (x ascending) after reducing it to
// maxTrendPoints and setting its one-off jumps aside. It needs at least 3
// points.
func fitTrend(x, y []float64) trend {
	x, y = reduce(x, y, maxTrendPoints)
	y, jumps := removeJumps(y)
	t := fitPoints(x, y)
	t.JumpsTaken = jumps
	return t
}

// TestFloorReducerAsReduce: the floors reduced as they come are reduce's
// points of their x and bytes, and of their seconds since the start, for
// counts around the block sizes and floors with equal lows.
func TestFloorReducerAsReduce(t *testing.T) {
	const start = int64(1e15)
	for _, n := range []int{0, 1, 7, 50, 51, 99, 100, 101, 1000, 1234} {
		floors := make([]FloorPoint, n)
		x, xt, y := make([]float64, n), make([]float64, n), make([]float64, n)
		for i := range floors {
			b := int64(1000 + (i*7919)%13) // repeats: equal lows in a block
			floors[i] = FloorPoint{X: float64(3 * i), TNS: start + int64(i)*25e7, Bytes: b}
			x[i], xt[i], y[i] = floors[i].X, float64(floors[i].TNS-start)/1e9, float64(b)
		}
		r := newFloorReducer(n, 50, func(i int) float64 { return floors[i].X }, Warmup{}, start)
		for i, f := range floors {
			r.Add(i, f.TNS, f.Bytes)
		}
		r.endBlock()
		gx, gxt, gy := r.x0, r.xt, r.y
		wx, wy := reduce(x, y, 50)
		wxt, _ := reduce(xt, y, 50)
		if !slices.Equal(gx, wx) || !slices.Equal(gy, wy) || !slices.Equal(gxt, wxt) {
			t.Fatalf("%d floors: FloorReducer %v %v %v, reduce %v %v %v", n, gx, gxt, gy, wx, wxt, wy)
		}
	}
}
