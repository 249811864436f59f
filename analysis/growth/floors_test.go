package growth

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestFloorReducerIsGrowthOfFloors: floors in time order, taken one at a
// time, are judged as GrowthOfFloors judges them held whole (which finds
// their warm-up by a search), for counts below, at and past a reduction,
// flat and growing series, with and without an epoch warm-up ending at,
// between and past the floors, per step and per second.
func TestFloorReducerIsGrowthOfFloors(t *testing.T) {
	const start = int64(1e15)
	rng := rand.New(rand.NewPCG(9, 10))
	for _, n := range []int{0, 1, 40, 599, 600, 601, 1234, 6001} {
		for _, slope := range []int64{0, 40} {
			floors := make([]FloorPoint, n)
			for i := range floors {
				floors[i] = FloorPoint{X: float64(i), TNS: start + int64(i)*3e8, Bytes: 8e9 + slope*int64(i) + rng.Int64N(1e5)}
			}
			for _, w := range []Warmup{{}, {ByEpoch: true, EndNS: start - 1}, {ByEpoch: true, EndNS: start + int64(n)*1e8}, {ByEpoch: true, EndNS: start + int64(n)*3e8}} {
				for _, perStep := range []bool{true, false} {
					want := GrowthOfFloors("allocated", floors, w, perStep, start)
					r := NewFloorReducer(n, func(i int) float64 { return floors[i].X }, w, start)
					for i, f := range floors {
						r.Add(i, f.TNS, f.Bytes)
					}
					if got := r.Growth("allocated", perStep); !reflect.DeepEqual(got, want) {
						t.Fatalf("%d floors, slope %d, warm-up %+v, per step %v:\n got %+v\nwant %+v", n, slope, w, perStep, got, want)
					}
				}
			}
		}
	}
}
