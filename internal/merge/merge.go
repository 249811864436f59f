// Package merge merges time-ordered streams into one, in time order. Both
// the export of a run (every series of a run as one stream of lines) and
// the analysis (the allocator series of a GPU's processes) read their
// series this way.
package merge

import "container/heap"

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
type ByTime[T any] struct {
	h       heads[T]
	started bool
	err     error
}

type head[T any] struct {
	it    Iterator[T]
	cur   T
	t     int64
	order int
}

type heads[T any] struct {
	items []*head[T]
	time  func(T) int64
}

// New starts a merge of its; it reads the first value of each.
func New[T any](time func(T) int64, its ...Iterator[T]) *ByTime[T] {
	m := &ByTime[T]{h: heads[T]{time: time}}
	for i, it := range its {
		h := &head[T]{it: it, order: i}
		if m.advance(h) {
			m.h.items = append(m.h.items, h)
		}
	}
	heap.Init(&m.h)
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
	h.t = m.h.time(h.cur)
	return true
}

// Next moves to the next value in time order; false at the end or on the
// first error of any input.
func (m *ByTime[T]) Next() bool {
	if m.started && len(m.h.items) > 0 {
		if m.advance(m.h.items[0]) {
			heap.Fix(&m.h, 0)
		} else {
			heap.Pop(&m.h)
		}
	}
	m.started = true
	return m.err == nil && len(m.h.items) > 0
}

// At is the current value.
func (m *ByTime[T]) At() T { return m.h.items[0].cur }

// Source is the index (in New's arguments) of the input At came from.
func (m *ByTime[T]) Source() int { return m.h.items[0].order }

// Err is the first error of any input.
func (m *ByTime[T]) Err() error { return m.err }

func (h heads[T]) Len() int { return len(h.items) }
func (h heads[T]) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.t != b.t {
		return a.t < b.t
	}
	return a.order < b.order
}
func (h heads[T]) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *heads[T]) Push(x any)   { h.items = append(h.items, x.(*head[T])) }
func (h *heads[T]) Pop() any {
	n := len(h.items) - 1
	x := h.items[n]
	h.items = h.items[:n]
	return x
}
