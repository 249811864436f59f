package analysis

import (
	"testing"
	"unsafe"

	"github.com/memrec/memrec/analysis/growth"
)

// TestShelfLendsBackWhatItTook: after a reclaim, take lends the arrays
// lent before (the smallest that holds n, with room for a slightly longer
// column); an array not lent between two reclaims is let go; a nil
// columns lends new arrays.
func TestShelfLendsBackWhatItTook(t *testing.T) {
	var s shelf[int64]
	a, b := s.take(1000), s.take(10)
	if len(a) != 1000 || len(b) != 10 {
		t.Fatalf("lengths %d, %d; want 1000, 10", len(a), len(b))
	}
	s.reclaim()
	small := s.take(9)
	big := s.take(1003) // a rank with a few more steps
	if &small[0] != &b[0] || &big[0] != &a[0] || len(big) != 1003 {
		t.Fatalf("after a reclaim: not the arrays lent before")
	}
	s.reclaim()
	if c := s.take(5); &c[0] != &b[0] {
		t.Fatalf("the smallest free array that holds 5 is not the one lent")
	}
	s.reclaim() // the large array was not lent since the last reclaim
	if len(s.free) != 1 {
		t.Fatalf("%d free arrays after a reclaim that took back one", len(s.free))
	}
	var none *columns
	if x, y := none.int64s(3), none.bools(2); len(x) != 3 || len(y) != 2 {
		t.Fatalf("nil columns lent %d and %d elements, want 3 and 2", len(x), len(y))
	}
}

// TestLendGivesWordsToAnyType: an array lent as words and given back is
// lent again within the same GPU's analysis as another type (the
// fragmentation's float64s become the leak's floors), kept over a
// reclaim, and an array lend did not lend is not taken back.
func TestLendGivesWordsToAnyType(t *testing.T) {
	c := &columns{}
	f := lend[float64](c, 300)
	if len(f) != 300 || cap(f) < 300 {
		t.Fatalf("lend[float64](300): len %d cap %d", len(f), cap(f))
	}
	giveBack(c, f[:0])
	giveBack(c, make([]float64, 10)) // not lent: let go
	p := lend[growth.FloorPoint](c, 100)
	if unsafe.Pointer(&p[0]) != unsafe.Pointer(&f[0]) {
		t.Fatalf("the floors are not in the words given back")
	}
	if len(p) != 100 || cap(p) < 100 {
		t.Fatalf("lend[FloorPoint](100): len %d cap %d", len(p), cap(p))
	}
	giveBack(c, p)
	c.reclaim() // given back since the last reclaim: kept
	if len(c.words.free) != 1 {
		t.Fatalf("%d free arrays after the reclaim, want 1", len(c.words.free))
	}
	if a := lend[uint32](c, 600); unsafe.Pointer(&a[0]) != unsafe.Pointer(&f[0]) {
		t.Fatalf("after a reclaim: not the words given back")
	}
	var none *columns
	if x := lend[growth.FloorPoint](none, 3); len(x) != 3 {
		t.Fatalf("nil columns lent %d floors, want 3", len(x))
	}
	giveBack(none, f)
}
