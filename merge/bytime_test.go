package merge

import (
	"cmp"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

type sliceIter struct {
	v   []int64
	i   int
	err error // returned once the values run out
}

func (s *sliceIter) Next() bool { s.i++; return s.i <= len(s.v) }
func (s *sliceIter) At() int64  { return s.v[s.i-1] }
func (s *sliceIter) Err() error {
	if s.i > len(s.v) {
		return s.err
	}
	return nil
}

func TestByTimeOrdersAndBreaksTiesByInput(t *testing.T) {
	t.Parallel()
	a := &sliceIter{v: []int64{1, 4, 4, 9}}
	b := &sliceIter{v: nil}
	c := &sliceIter{v: []int64{0, 4, 10}}
	m := New(func(v int64) int64 { return v }, a, b, c)
	var got []int64
	var from []int
	for m.Next() {
		got = append(got, m.At())
		from = append(from, m.Source())
	}
	if err := m.Err(); err != nil {
		t.Fatal(err)
	}
	// The sorted union; at time 4 input 0's two values come before input 2's.
	if want := []int64{0, 1, 4, 4, 4, 9, 10}; !slices.Equal(got, want) {
		t.Errorf("values %v, want %v", got, want)
	}
	if want := []int{2, 0, 0, 0, 2, 0, 2}; !slices.Equal(from, want) {
		t.Errorf("sources %v, want %v", from, want)
	}
}

func TestByTimeStopsAtAnInputsError(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	a := &sliceIter{v: []int64{1, 2, 3}}
	b := &sliceIter{v: []int64{1}, err: boom}
	m := New(func(v int64) int64 { return v }, a, b)
	n := 0
	for m.Next() {
		n++
	}
	if !errors.Is(m.Err(), boom) {
		t.Errorf("Err() = %v, want boom", m.Err())
	}
	if n > 2 {
		t.Errorf("read %d values past the failed input", n)
	}
}

// TestByTimeMatchesASort: many inputs of random sorted times come out as a
// stable sort of their union by time gives them (ties by input).
func TestByTimeMatchesASort(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 8))
	type tv struct {
		t   int64
		src int
	}
	var want []tv
	var its []Iterator[int64]
	for i := range 37 {
		v := make([]int64, rng.IntN(200))
		for k := range v {
			v[k] = rng.Int64N(500)
		}
		slices.Sort(v)
		for _, x := range v {
			want = append(want, tv{x, i})
		}
		its = append(its, &sliceIter{v: v})
	}
	slices.SortStableFunc(want, func(a, b tv) int { return cmp.Compare(a.t, b.t) })
	m := New(func(v int64) int64 { return v }, its...)
	var got []tv
	for m.Next() {
		got = append(got, tv{m.At(), m.Source()})
	}
	if !slices.Equal(got, want) {
		t.Fatalf("merge of 37 inputs differs from a stable sort (%d values, want %d)", len(got), len(want))
	}
}
