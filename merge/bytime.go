package merge

// This file is the merge of time-ordered streams (ByTime).

// Iterator is a stream in time order; storage.Iter satisfies it.
type Iterator[T any] interface {
	Next() bool
	At() T
	Err() error
}

// ByTime merges iterators by the time that time returns; equal times come
// out in the order of the iterators. It is itself an Iterator. Each input
// is advanced only when the merge moves past its current value, so a value
// from At stays valid until the next call to Next even when an input
// reuses its buffers. It is not safe for concurrent use.
//
// The inputs' heads are a binary min-heap by (time, order), sifted by
// hand rather than through container/heap: a CSV export merges the
// allocator series of a run, a comparison or two for each of 10^7 samples,
// and the interface's calls cost more than the comparisons.
type ByTime[T any] struct {
	items   []*head[T]
	time    func(T) int64
	started bool
	err     error
}

type head[T any] struct {
	it    Iterator[T]
	cur   T
	t     int64
	order int
}

// New starts a merge of its; it reads the first value of each.
func New[T any](time func(T) int64, its ...Iterator[T]) *ByTime[T] {
	m := &ByTime[T]{time: time}
	for i, it := range its {
		h := &head[T]{it: it, order: i}
		if m.advance(h) {
			m.items = append(m.items, h)
		}
	}
	for i := len(m.items)/2 - 1; i >= 0; i-- {
		m.down(i)
	}
	return m
}

// advance reads h's next value; false at its end (or error, kept in m.err).
func (m *ByTime[T]) advance(h *head[T]) bool {
	if !h.it.Next() {
		if err := h.it.Err(); err != nil && m.err == nil {
			m.err = err
		}
		return false
	}
	h.cur = h.it.At()
	h.t = m.time(h.cur)
	return true
}

// Next moves to the next value in time order; false at the end or on the
// first error of any input.
func (m *ByTime[T]) Next() bool {
	if m.started && len(m.items) > 0 {
		if !m.advance(m.items[0]) {
			last := len(m.items) - 1
			m.items[0] = m.items[last]
			m.items[last] = nil
			m.items = m.items[:last]
		}
		if len(m.items) > 0 {
			m.down(0)
		}
	}
	m.started = true
	return m.err == nil && len(m.items) > 0
}

// down moves the head at i down to its place.
func (m *ByTime[T]) down(i int) {
	items := m.items
	n := len(items)
	h := items[i]
	for {
		c := 2*i + 1
		if c >= n {
			break
		}
		if r := c + 1; r < n && before(items[r], items[c]) {
			c = r
		}
		if !before(items[c], h) {
			break
		}
		items[i] = items[c]
		i = c
	}
	items[i] = h
}

// before orders heads by time, then by input.
func before[T any](a, b *head[T]) bool {
	return a.t < b.t || a.t == b.t && a.order < b.order
}

// At is the current value.
func (m *ByTime[T]) At() T { return m.items[0].cur }

// Source is the index (in New's arguments) of the input At came from.
func (m *ByTime[T]) Source() int { return m.items[0].order }

// Err is the first error of any input.
func (m *ByTime[T]) Err() error { return m.err }
