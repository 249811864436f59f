package series

import "math"

// Reducer folds samples or buckets into the pixel columns of a window
// [from, to) and keeps, per column, its first, last, lowest and highest
// point (M4, Jugel et al. 2014): the line drawn through those points is
// the line drawn through every sample, pixel for pixel. A bucket falls in
// the column of its first sample; one that spans two columns is drawn in
// the first (the error is under one bucket, which Level keeps under one
// pixel). It is not safe for concurrent use.
type Reducer struct {
	from, to int64
	cols     []Bucket
	samples  int64
	// The column of the last sample added (addSample), and the times
	// [lo, hi) known to fall in it.
	col    int
	lo, hi int64
}

// NewReducer returns a reducer of [from, to) into points columns.
func NewReducer(from, to int64, points int) *Reducer {
	return &Reducer{from: from, to: max(to, from+1), cols: make([]Bucket, max(points, 1))}
}

// Add adds a bucket (a sample is One(t, v)); buckets come in time order.
func (r *Reducer) Add(b Bucket) {
	r.samples += b.N
	r.cols[r.column(b.T0)].merge(b)
}

// column is the column of a bucket that starts at t.
func (r *Reducer) column(t int64) int {
	c := int(float64(t-r.from) / float64(r.to-r.from) * float64(len(r.cols)))
	return min(max(c, 0), len(r.cols)-1)
}

// addSample is Add(One(t, v)), for the samples of a window read one by
// one, thousands a column: the column is worked out where a sample
// leaves the times known to fall in the last one.
func (r *Reducer) addSample(t, v int64) {
	r.samples++
	if t < r.lo || t >= r.hi {
		r.seek(t)
	}
	c := &r.cols[r.col]
	if c.N == 0 {
		*c = One(t, v)
		return
	}
	c.T1, c.Last = t, v
	if v < c.Min {
		c.Min, c.TMin = v, t
	}
	if v > c.Max {
		c.Max, c.TMax = v, t
	}
	c.N++
}

// seek makes t's column the one addSample adds to, with the times from t
// to the next column's first. column grows with t, so that first time is
// found by stepping from the time a column's width gives, which rounding
// leaves within a few nanoseconds of it.
func (r *Reducer) seek(t int64) {
	r.col, r.lo, r.hi = r.column(t), t, math.MaxInt64
	if r.col == len(r.cols)-1 {
		return
	}
	next := r.from + int64(float64(r.col+1)*(float64(r.to-r.from)/float64(len(r.cols))))
	next = max(next, t+1)
	for range 16 {
		switch {
		case r.column(next) <= r.col:
			next++
		case next-1 > t && r.column(next-1) > r.col:
			next--
		default:
			r.hi = next
			return
		}
	}
	r.hi = t + 1 // far off: t alone is known
}

// Samples is the number of samples the added buckets hold.
func (r *Reducer) Samples() int64 { return r.samples }

// Points returns the columns' points in time order: per column its first
// point, its lowest and highest in the order they came, and its last, a
// point that repeats the one before it left out.
func (r *Reducer) Points() (t, v []int64) {
	add := func(tt, vv int64) {
		if n := len(t); n > 0 && t[n-1] == tt && v[n-1] == vv {
			return
		}
		t, v = append(t, tt), append(v, vv)
	}
	for _, c := range r.cols {
		if c.N == 0 {
			continue
		}
		add(c.T0, c.First)
		if c.TMin <= c.TMax {
			add(c.TMin, c.Min)
			add(c.TMax, c.Max)
		} else {
			add(c.TMax, c.Max)
			add(c.TMin, c.Min)
		}
		add(c.T1, c.Last)
	}
	return t, v
}
