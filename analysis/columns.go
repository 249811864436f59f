package analysis

import "sync"

// columns lends the arrays of one GPU's analysis that hold a value a step
// (a week of steps is millions a GPU) and that live until its analysis
// ends, and takes them back for the next GPU's. Made afresh for each GPU,
// each came from the kernel zeroed a page at a time (a page fault each)
// or was cleared by the runtime (see bench/README.md, "analyze on long
// runs: one look a sample, columns kept from GPU to GPU"). Arrays that
// die before the analysis ends are not lent: kept, they would raise the
// peak of the next GPU's. What it lends is not cleared. A nil *columns
// lends new arrays. Not safe for concurrent use: each GPU analysed at
// once has its own (columnSets).
type columns struct {
	ints shelf[int64]
	oks  shelf[bool]
}

func (c *columns) int64s(n int) []int64 {
	if c == nil {
		return make([]int64, n)
	}
	return c.ints.take(n)
}

func (c *columns) bools(n int) []bool {
	if c == nil {
		return make([]bool, n)
	}
	return c.oks.take(n)
}

// reclaim takes back every array lent since the last reclaim. Those not
// lent since are let go, so that a shelf holds no more than one GPU used.
func (c *columns) reclaim() {
	c.ints.reclaim()
	c.oks.reclaim()
}

// shelf keeps arrays of T for reuse.
type shelf[T any] struct{ free, lent [][]T }

// take lends an array of n elements: the smallest free one that holds n,
// else a new one with room for a few more, so that it serves the next
// GPU too (ranks' step counts differ by a few steps).
func (s *shelf[T]) take(n int) []T {
	best := -1
	for i, a := range s.free {
		if cap(a) >= n && (best < 0 || cap(a) < cap(s.free[best])) {
			best = i
		}
	}
	var a []T
	if best < 0 {
		a = make([]T, n, n+n/64+16)
	} else {
		a = s.free[best][:n]
		last := len(s.free) - 1
		s.free[best], s.free[last] = s.free[last], nil
		s.free = s.free[:last]
	}
	s.lent = append(s.lent, a)
	return a
}

func (s *shelf[T]) reclaim() {
	clear(s.free)
	s.free = append(s.free[:0], s.lent...)
	clear(s.lent)
	s.lent = s.lent[:0]
}

// columnSets hands columns to the GPUs analysed at once. The set given
// back last is handed out first: it holds the arrays of the GPU just
// analysed, the sizes the next one needs. Safe for concurrent use.
type columnSets struct {
	mu   sync.Mutex
	idle []*columns
}

func (s *columnSets) get() *columns {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1]
		s.idle = s.idle[:n-1]
		return c
	}
	return &columns{}
}

// put takes back c, with every array it lent.
func (s *columnSets) put(c *columns) {
	c.reclaim()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.idle = append(s.idle, c)
}
