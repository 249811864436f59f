package chunk

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestOffsetTimesIsUnbitsThenSums: the times summed as the fields are read
// are those of reading every field (unbits) and summing after, for every
// width, lengths that end inside and past an 8-byte load, and a delta and
// scale that wrap.
func TestOffsetTimesIsUnbitsThenSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for w := 0; w <= 64; w++ {
		for _, n := range []int{1, 2, 7, 9, 64, 300} {
			data := make([]byte, (n*w+7)/8)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			c, g := rng.Int64N(1<<40)-1<<39, rng.Uint64N(1<<20)
			if w == 64 {
				c, g = rng.Int64(), rng.Uint64() // wrapping sums
			}
			want := make([]int64, n+1)
			want[0] = rng.Int64N(1 << 50)
			unbits(want[1:], data, w)
			for i := 1; i <= n; i++ {
				want[i] = want[i-1] + c + int64(uint64(want[i])*g)
			}
			got := make([]int64, n+1)
			got[0] = want[0]
			offsetTimes(got, data, w, c, g)
			if !slices.Equal(got, want) {
				t.Fatalf("width %d, %d fields: %v, want %v", w, n, got, want)
			}
		}
	}
}

// TestUnbitsIsBitsAt: the fields read several a load are those read one at
// a time from their bit position, for every width and lengths that end
// inside and past an 8-byte load.
func TestUnbitsIsBitsAt(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for w := 0; w <= 64; w++ {
		for _, n := range []int{1, 2, 3, 5, 7, 9, 64, 301} {
			data := make([]byte, (n*w+7)/8)
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			want := make([]int64, n)
			if w > 0 {
				for i := range want {
					want[i] = int64(bitsAt(data, i*w, w) & (^uint64(0) >> (64 - w)))
				}
			}
			got := make([]int64, n)
			for i := range got {
				got[i] = -1 // every field is written
			}
			unbits(got, data, w)
			if !slices.Equal(got, want) {
				t.Fatalf("width %d, %d fields: %v, want %v", w, n, got, want)
			}
		}
	}
}
