package analysis

import "testing"

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
