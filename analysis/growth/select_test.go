package growth

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSelectQuantileIsTheSortedOne: selection gives the quantile of the
// sorted values exactly, on random values, many ties, sorted and reversed
// input, and short lists.
func TestSelectQuantileIsTheSortedOne(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for n := 1; n < 3000; n = n*3 + 1 {
		for _, shape := range []string{"random", "ties", "sorted", "reversed"} {
			s := make([]float64, n)
			for i := range s {
				switch shape {
				case "random":
					s[i] = rng.Float64()
				case "ties":
					s[i] = float64(rng.IntN(4)) / 4
				case "sorted":
					s[i] = float64(i)
				case "reversed":
					s[i] = float64(n - i)
				}
			}
			sorted := slices.Sorted(slices.Values(s))
			for _, q := range []float64{0, 0.5, 0.95, 0.999, 1} {
				if got, want := SelectQuantile(slices.Clone(s), q), quantile(sorted, q); got != want {
					t.Errorf("%s n=%d q=%g: %v, sorted %v", shape, n, q, got, want)
				}
			}
		}
	}
}

// TestOrderStatsAreTheSortedOnes: the ranks Theil–Sen reads (the median,
// Sen's interval) by selection equal the sorted values', ties and all.
func TestOrderStatsAreTheSortedOnes(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 2, 3, 10, 101, 1000, 4950} {
		for _, ties := range []bool{false, true} {
			s := make([]float64, n)
			for i := range s {
				if ties {
					s[i] = float64(rng.IntN(5))
				} else {
					s[i] = rng.NormFloat64()
				}
			}
			sorted := slices.Sorted(slices.Values(s))
			ranks := []int{n / 3, 0, n - 1, n / 2, -1, n / 3}
			got := orderStats(slices.Clone(s), ranks)
			for i, r := range ranks {
				want := Median(sorted)
				if r >= 0 {
					want = sorted[r]
				}
				if got[i] != want {
					t.Errorf("n=%d ties=%v rank %d: %v, sorted %v", n, ties, r, got[i], want)
				}
			}
		}
	}
}

// quantile of sorted values (linear interpolation).
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i >= len(s)-1 {
		return s[len(s)-1]
	}
	f := pos - float64(i)
	return s[i]*(1-f) + s[i+1]*f
}

// TestSelectedMedianIsMedian: the quantile 0.5 by selection is, bit for
// bit, Median of the values sorted (the callers that sorted a week of step
// times or of unseen bytes for it now select), for odd and even counts,
// with ties and without.
func TestSelectedMedianIsMedian(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for n := 1; n <= 60; n++ {
		for _, ties := range []bool{false, true} {
			s := make([]float64, n)
			for i := range s {
				if ties {
					s[i] = float64(rng.IntN(4)) * 0.25
				} else {
					s[i] = rng.Float64() * 1e9
				}
			}
			want := Median(slices.Sorted(slices.Values(s)))
			if got := SelectQuantile(slices.Clone(s), 0.5); got != want {
				t.Fatalf("n=%d ties=%v: %v, Median of the sorted values %v", n, ties, got, want)
			}
		}
	}
}
