package series

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
}

// NewReducer returns a reducer of [from, to) into points columns.
func NewReducer(from, to int64, points int) *Reducer {
	return &Reducer{from: from, to: max(to, from+1), cols: make([]Bucket, max(points, 1))}
}

// Add adds a bucket (a sample is One(t, v)); buckets come in time order.
func (r *Reducer) Add(b Bucket) {
	r.samples += b.N
	c := int(float64(b.T0-r.from) / float64(r.to-r.from) * float64(len(r.cols)))
	c = min(max(c, 0), len(r.cols)-1)
	r.cols[c].merge(b)
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
