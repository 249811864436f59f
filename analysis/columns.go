package analysis

import (
	"sync"
	"unsafe"
)

// columns lends the arrays of one GPU's analysis that hold a value a step
// (a week of steps is millions a GPU), and takes them back for the next
// GPU's. Made afresh for each GPU, each came from the kernel zeroed a page
// at a time (a page fault each) or was cleared by the runtime (see
// bench/README.md, "analyze on long runs: one look a sample, columns kept
// from GPU to GPU"). Arrays that live until the analysis ends are lent as
// what they hold (int64s, bools). Those that die before are lent as words
// (lend) and given back when they die (giveBack), so that a later pass of
// the same GPU takes the memory whatever it holds: kept apart, they would
// all be held at once, above the peak of any pass and the collector's
// soft limit (see bench/README.md, "analyze on long runs: memory given
// back within a GPU, two columns a walk, several fields a load"). What
// it lends is not cleared. A nil *columns lends new arrays and takes
// nothing back. Not safe for concurrent use: each GPU analysed at once
// has its own (columnSets).
type columns struct {
	ints  shelf[int64]
	oks   shelf[bool]
	words shelf[uint64]
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

// lend lends an array of n T in c's words, as many more as they hold
// beyond n in its capacity. T must hold no pointers (the words are memory
// the collector does not scan) and be aligned to at most 8 bytes.
func lend[T any](c *columns, n int) []T {
	if c == nil {
		return make([]T, n)
	}
	size := int(unsafe.Sizeof(*new(T)))
	w := c.words.take((n*size + 7) / 8)
	w = w[:cap(w)]
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(w))), len(w)*8/size)[:n]
}

// giveBack takes back a, lent by lend, once nothing reads it: a later
// lend of the same GPU may lend its words again. An array lend did not
// lend (one that append moved) is let go.
func giveBack[T any](c *columns, a []T) {
	if c == nil || cap(a) == 0 {
		return
	}
	c.words.give(unsafe.Pointer(unsafe.SliceData(a[:cap(a)])))
}

// reclaim takes back every array lent since the last reclaim. Those not
// lent since are let go, so that a shelf holds no more than one GPU used.
func (c *columns) reclaim() {
	c.ints.reclaim()
	c.oks.reclaim()
	c.words.reclaim()
}

// shelf keeps arrays of T for reuse: free ones, those lent, and those
// given back (give) since the last reclaim, which a take lends again.
type shelf[T any] struct{ free, lent, back [][]T }

// take lends an array of n elements: the smallest free or given-back one
// that holds n, else a new one with room for a few more, so that it
// serves the next GPU too (ranks' step counts differ by a few steps).
func (s *shelf[T]) take(n int) []T {
	a, ok := pick(&s.back, n)
	if !ok {
		a, ok = pick(&s.free, n)
	}
	if !ok {
		a = make([]T, n, n+n/64+16)
	}
	s.lent = append(s.lent, a)
	return a
}

// pick takes out of list the smallest array that holds n, as n long.
func pick[T any](list *[][]T, n int) ([]T, bool) {
	best := -1
	for i, a := range *list {
		if cap(a) >= n && (best < 0 || cap(a) < cap((*list)[best])) {
			best = i
		}
	}
	if best < 0 {
		return nil, false
	}
	a := (*list)[best][:n]
	remove(list, best)
	return a, true
}

// remove drops list[i], moving the last into its place.
func remove[T any](list *[][]T, i int) {
	last := len(*list) - 1
	(*list)[i], (*list)[last] = (*list)[last], nil
	*list = (*list)[:last]
}

// give takes back the array at base, lent by s, before the reclaim: a
// later take lends it again, and the reclaim keeps it as if still lent.
// An array s did not lend is let go.
func (s *shelf[T]) give(base unsafe.Pointer) {
	for i, l := range s.lent {
		if cap(l) > 0 && unsafe.Pointer(unsafe.SliceData(l[:cap(l)])) == base {
			remove(&s.lent, i)
			s.back = append(s.back, l)
			return
		}
	}
}

func (s *shelf[T]) reclaim() {
	clear(s.free)
	s.free = append(append(s.free[:0], s.lent...), s.back...)
	clear(s.lent)
	s.lent = s.lent[:0]
	clear(s.back)
	s.back = s.back[:0]
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
