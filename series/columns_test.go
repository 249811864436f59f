package series

import (
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/memrec/memrec/storage"
)

// TestColumnsAreTheSamples: an index fed blocks of columns holds the same
// pyramids (and rings) as one fed the same samples one by one, the
// driver's reserve starting where it first is not zero in both.
func TestColumnsAreTheSamples(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 50 {
		n := rng.IntN(3000)
		ts, used, res, alloc := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
		tt := int64(0)
		zeros := rng.IntN(n + 1)
		for i := range ts {
			tt += int64(rng.IntN(3))
			ts[i], used[i], alloc[i] = tt, rng.Int64N(1000), rng.Int64N(1000)
			if i >= zeros {
				res[i] = rng.Int64N(1000)
			}
		}
		ring := rng.IntN(2) * 64
		one, cols := NewIndex(ring), NewIndex(ring)
		for i := range ts {
			one.AddDevice(storage.DeviceSample{T: ts[i], GPU: 1, Used: used[i], Reserved: res[i]})
			one.AddTorch(storage.TorchSample{T: ts[i], GPU: 1, PID: 7, Allocated: alloc[i], Reserved: res[i]})
		}
		for i := 0; i < n; {
			j := min(n, i+1+rng.IntN(300))
			cols.AddDeviceColumns(1, ts[i:j], used[i:j], res[i:j])
			cols.AddTorchColumns(1, 7, ts[i:j], alloc[i:j], res[i:j])
			i = j
		}
		if len(one.lines) != len(cols.lines) {
			t.Fatalf("round %d: %d lines from columns, %d from samples", round, len(cols.lines), len(one.lines))
		}
		for k, l := range one.lines {
			if c := cols.lines[k]; c == nil || !reflect.DeepEqual(*l, *c) {
				t.Fatalf("round %d, line %v: from columns %+v, from samples %+v", round, k, c, l)
			}
		}
	}
}
