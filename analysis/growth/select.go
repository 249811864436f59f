package growth

import (
	"math"
	"slices"
)

// SelectQuantile is quantile of s sorted, without sorting it: the two
// order statistics it interpolates between are found by selection, O(n)
// where a sort of a day's millions of samples is O(n log n). It reorders
// s.
func SelectQuantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	i := int(pos)
	if i >= len(s)-1 {
		return slices.Max(s)
	}
	lo := nthSmallest(s, i)
	hi := slices.Min(s[i+1:]) // after selection, s[i+1:] holds the larger ones
	f := pos - float64(i)
	return lo*(1-f) + hi*f
}

// nthSmallest reorders s so that s[k] is its k-th smallest element (from
// 0), nothing larger before it and nothing smaller after, and returns it.
// It is quickselect with a median-of-three pivot and a three-way split
// made without branches on the data (Lomuto's scheme as Edelkamp and Weiß
// write it): the slopes of a Theil–Sen fit are in random order, and a
// branch on each comparison mispredicted half the time was most of the
// fit's cost.
func nthSmallest(s []float64, k int) float64 {
	lo, hi := 0, len(s) // the part of s that holds rank k
	for hi-lo > 1 {
		part := s[lo:hi]
		a, b, c := part[0], part[len(part)/2], part[len(part)-1]
		pivot := max(min(a, b), min(max(a, b), c))
		less := 0 // part[:less] < pivot
		for i, x := range part {
			part[i], part[less] = part[less], x
			less += b2i(x < pivot)
		}
		if k-lo < less {
			hi = lo + less
			continue
		}
		equal := less // part[less:equal] == pivot: looked for only where k is not below it
		for i, x := range part[less:] {
			part[less+i], part[equal] = part[equal], x
			equal += b2i(x <= pivot)
		}
		if k-lo < equal {
			return pivot
		}
		lo += equal
	}
	return s[k]
}

// b2i is 1 for true: the compiler makes it a flag set, not a branch.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
