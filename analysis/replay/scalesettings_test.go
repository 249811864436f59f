package replay

import (
	"math"
	"testing"

	"github.com/memrec/memrec/storage"
)

// fragmentingTrace is a job at value v whose requests follow by hand: a
// block of 6v MiB freed, then 2v and 3v MiB taken from it (1v left free
// in its segment, split and stranded), then 4.5v MiB.
func fragmentingTrace(v float64) storage.AllocTrace {
	mib := float64(1 << 20)
	return storage.AllocTrace{Ops: []storage.AllocOp{{Size: int64(6 * v * mib)}, {Free: true, Of: 0},
		{Size: int64(2 * v * mib)}, {Size: int64(3 * v * mib)}, {Size: int64(4.5 * v * mib)}}}
}

// TestReplayScaleSettings: the largest value of the fragmenting job under
// each allocator setting against the rules worked by hand. By default the
// 4.5v request takes a segment of its own (rounded to 2 MiB) beside the
// 6v one: v fits while round2(6v) + round2(4.5v) is within the device.
// With expandable segments the three live blocks lie end to end from the
// start of the range, so v fits while the 20 MiB pages under 9.5v are.
func TestReplayScaleSettings(t *testing.T) {
	const capacity = 1000 << 20
	round2 := func(b float64) float64 { return math.Ceil(b/(2<<20)) * (2 << 20) }
	largest := func(fits func(v float64) bool) float64 {
		v := 20.0
		for fits(v + 1) {
			v++
		}
		return v
	}
	mib := float64(1 << 20)
	want := map[string]float64{
		"default": largest(func(v float64) bool {
			return round2(math.Floor(6*v*mib))+round2(math.Floor(4.5*v*mib)) <= capacity
		}),
		"expandable_segments:True": largest(func(v float64) bool {
			return math.Ceil(math.Floor(9.5*v*mib)/(20<<20))*(20<<20) <= capacity
		}),
	}
	if want["expandable_segments:True"] <= want["default"] {
		t.Fatalf("the case does not tell the settings apart: %v", want)
	}
	base := NewReplayScale(10, fragmentingTrace(10), 20, fragmentingTrace(20), true)
	for conf, w := range want {
		cfg, err := ParseAllocSettings(conf)
		if err != nil {
			t.Fatal(err)
		}
		s := base
		s.Settings = cfg
		v, r, ok := s.Largest(func(float64) float64 { return capacity }, true)
		if !ok || v != w || !r.OK {
			t.Errorf("%s: largest %v (ok %v, %+v), want %v", conf, v, ok, r, w)
		}
	}
	if base.Settings.String() != "default" {
		t.Errorf("a scale's settings are %s, want the default", base.Settings)
	}
}
