// Package growth is the growth rule and the leak rule, on plain numbers.
//
// A series of floors (FloorPoint: the least memory of a step or a time
// slice) is judged by the growth rule (trend.go): the warm-up set aside
// (Warmup, or settle), one-off jumps removed, a Theil–Sen slope with Sen's
// interval and a Mann–Kendall test; a Growth says what it found. The leak
// rule (leak.go, with its thresholds as named constants) judges a GPU from
// the growths of its allocated, reserved and device memory and gives a
// Leak with one Verdict. Steps are the step marks a run's x axis counts.
//
// Nothing here reads the store: callers pass floors in, so the rules can
// be tested against an independent implementation (testdata/ of package
// analysis). Every function is safe for concurrent use; values are plain
// data.
package growth
