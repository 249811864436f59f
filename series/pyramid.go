// Package series keeps one time series summarised at every zoom: a pyramid
// of min/max buckets over all of it, and the reduction of samples or
// buckets to a window's pixels (M4: the first, last, lowest and highest
// point of each pixel column). The viewer's database source, the
// recorder's live view and the static report all draw from it, so the
// three show the same points for the same window.
//
// The cost it answers to: a 24-hour run sampled at 100 Hz has 8.64 M
// samples per series; decoding them all for a whole-run window takes
// about a second. The pyramid's level 0 summarises Base samples per
// bucket (72 bytes per 128 samples, 0.56 B a sample), each level above
// Fan buckets of the one below, so a window of any width is answered from
// at most a few thousand buckets, and only windows of fewer than
// Base·points samples read samples at all.
package series

import (
	"sort"
)

// Base is the number of samples of a level-0 bucket, Fan the number of
// buckets of level k that make one of level k+1.
const (
	Base = 128
	Fan  = 4
)

// Bucket summarises consecutive samples of a series: their first and last
// time and value, the lowest and highest value with the time of each, and
// their number. A single sample is a bucket with N = 1.
type Bucket struct {
	T0, T1      int64
	First, Last int64
	Min, Max    int64
	TMin, TMax  int64
	N           int64
}

// One is the bucket of one sample.
func One(t, v int64) Bucket {
	return Bucket{T0: t, T1: t, First: v, Last: v, Min: v, Max: v, TMin: t, TMax: t, N: 1}
}

// merge adds o, which comes after b in time, to b.
func (b *Bucket) merge(o Bucket) {
	if b.N == 0 {
		*b = o
		return
	}
	b.T1, b.Last = o.T1, o.Last
	if o.Min < b.Min {
		b.Min, b.TMin = o.Min, o.TMin
	}
	if o.Max > b.Max {
		b.Max, b.TMax = o.Max, o.TMax
	}
	b.N += o.N
}

// Pyramid summarises a series at every level. Samples are added in time
// order. It is not safe for concurrent use: the recorder's live view
// guards it with its own lock. The zero value is an empty pyramid.
type Pyramid struct {
	levels [][]Bucket // levels[k]: complete buckets of Base·Fan^k samples
	open   []Bucket   // the partial bucket of each level
	kids   []int      // how many buckets of level k-1 open[k] holds
	n      int64
	// leaf is the most samples a level-0 bucket holds: Base, or more
	// where buckets made elsewhere were added (AddBucket: the stored
	// summaries' pieces); a level-k bucket holds up to leaf·Fan^k.
	leaf int64
}

// AddAll adds samples (ts[i], vs[i]), ts ascending and not before the
// previous sample's time (one sample is a slice of one): each level-0
// bucket's share of them is summed in one loop.
func (p *Pyramid) AddAll(ts, vs []int64) {
	if len(p.open) == 0 && len(ts) > 0 {
		p.open, p.kids = make([]Bucket, 1), make([]int, 1)
	}
	for len(ts) > 0 {
		k := min(len(ts), int(Base-p.open[0].N))
		b := Bucket{T0: ts[0], T1: ts[k-1], First: vs[0], Last: vs[k-1], Min: vs[0], Max: vs[0], TMin: ts[0], TMax: ts[0], N: int64(k)}
		for i := 1; i < k; i++ {
			if v := vs[i]; v < b.Min {
				b.Min, b.TMin = v, ts[i]
			} else if v > b.Max {
				b.Max, b.TMax = v, ts[i]
			}
		}
		p.n += int64(k)
		p.open[0].merge(b)
		if p.open[0].N == Base {
			p.complete(0)
		}
		ts, vs = ts[k:], vs[k:]
	}
}

// AddBucket adds a bucket summarised elsewhere (a stored summary's piece:
// its samples are not at hand), after every sample added so far, as a
// level-0 bucket of its own: a partial level-0 bucket of samples before
// it is completed short. Samples and buckets may be added in any mix, in
// time order.
func (p *Pyramid) AddBucket(b Bucket) {
	if b.N <= 0 {
		return
	}
	if len(p.open) == 0 {
		p.open, p.kids = make([]Bucket, 1), make([]int, 1)
	}
	if p.open[0].N > 0 {
		p.complete(0)
	}
	p.leaf = max(p.leaf, b.N)
	p.n += b.N
	p.open[0] = b
	p.complete(0)
}

// Reserve sizes the levels for n samples in all, so that they do not grow
// by copying themselves while that many are added (0: nothing to do). The
// room is made by make, not slices.Grow, which would clear it first: a
// long run's level 0 is most of the index's memory, and each of its
// buckets is written when it is added. The room is backed by memory at
// once (prefault).
func (p *Pyramid) Reserve(n int64) {
	for k, per := 0, int64(Base); n >= per; k, per = k+1, per*Fan {
		if len(p.levels) <= k {
			p.levels = append(p.levels, nil)
		}
		if l, more := p.levels[k], int(n/per); cap(l)-len(l) < more {
			p.levels[k] = append(make([]Bucket, 0, len(l)+more), l...)
			prefault(p.levels[k])
		}
	}
}

// complete moves level k's open bucket into the level and into the open
// bucket above it.
func (p *Pyramid) complete(k int) {
	b := p.open[k]
	p.open[k], p.kids[k] = Bucket{}, 0
	if len(p.levels) <= k {
		p.levels = append(p.levels, nil)
	}
	p.levels[k] = append(p.levels[k], b)
	if len(p.open) <= k+1 {
		p.open, p.kids = append(p.open, Bucket{}), append(p.kids, 0)
	}
	p.open[k+1].merge(b)
	p.kids[k+1]++
	if p.kids[k+1] == Fan {
		p.complete(k + 1)
	}
}

// Len is the number of samples added.
func (p *Pyramid) Len() int64 { return p.n }

// Bytes is the memory the buckets take.
func (p *Pyramid) Bytes() int64 {
	var n int
	for _, l := range p.levels {
		n += cap(l)
	}
	return int64(n+len(p.open)) * 72
}

// Span is the first and last sample's time; ok is false when empty.
func (p *Pyramid) Span() (first, last int64, ok bool) {
	if p.n == 0 {
		return 0, 0, false
	}
	if len(p.levels) > 0 && len(p.levels[0]) > 0 {
		first = p.levels[0][0].T0
	} else {
		first = p.open[0].T0
	}
	if p.open[0].N > 0 {
		last = p.open[0].T1
	} else {
		l0 := p.levels[0]
		last = l0[len(l0)-1].T1
	}
	return first, last, true
}

// Count estimates the samples in [from, to): exact to one level-0 bucket
// at each end.
func (p *Pyramid) Count(from, to int64) int64 {
	if n, ok := p.countAll(from, to); ok {
		return n
	}
	var n int64
	p.Buckets(0, from, to, func(b Bucket) { n += b.N })
	return n
}

// countAll is Count of a window that Buckets(0) would give every level-0
// bucket of: the pyramid's length, without visiting them (a report's page
// asks for the whole run, for every line and level). ok is false for any
// other window.
func (p *Pyramid) countAll(from, to int64) (int64, bool) {
	if p.n == 0 {
		return 0, true
	}
	var l0 []Bucket
	if len(p.levels) > 0 {
		l0 = p.levels[0]
	}
	o := p.open[0]
	first := o
	if len(l0) > 0 {
		first = l0[0]
	}
	if first.T1 < from {
		return 0, false
	}
	if o.N == 0 {
		return p.n, l0[len(l0)-1].T0 < to
	}
	// Buckets passes the open bucket over where it starts at the last
	// complete one's end (samples of equal times).
	return p.n, o.T0 < to && (len(l0) == 0 || o.T0 > l0[len(l0)-1].T1)
}

// Buckets calls f, in time order, with the buckets that cover [from, to):
// level k's complete buckets that overlap it, then, after the last of
// them, the finer levels' down to the open level-0 bucket. Buckets at the
// edges may hold samples outside the window (less than one bucket each).
func (p *Pyramid) Buckets(k int, from, to int64, f func(Bucket)) {
	if p.n == 0 {
		return
	}
	covered, after := false, int64(0) // the end of what a coarser level covered
	for l := min(k, len(p.levels)-1); l >= 0; l-- {
		bs := p.levels[l]
		if len(bs) == 0 {
			continue
		}
		i := sort.Search(len(bs), func(i int) bool { return bs[i].T1 >= from && (!covered || bs[i].T0 > after) })
		for ; i < len(bs) && bs[i].T0 < to; i++ {
			f(bs[i])
		}
		covered, after = true, max(after, bs[len(bs)-1].T1)
	}
	if o := p.open[0]; o.N > 0 && o.T1 >= from && o.T0 < to && (!covered || o.T0 > after) {
		f(o)
	}
}

// Level is the coarsest level whose buckets are no wider than a window of
// n samples spread over points pixels; -1 when the window is best read
// sample by sample (fewer samples a pixel than a level-0 bucket holds).
func (p *Pyramid) Level(n int64, points int) int {
	per := n / int64(max(points, 1))
	k := -1
	for size := p.leafSize(); size <= per; size *= Fan {
		k++
	}
	return k
}

// BucketSize is the most samples a level-k bucket holds (1 for k < 0).
func (p *Pyramid) BucketSize(k int) int64 {
	if k < 0 {
		return 1
	}
	s := p.leafSize()
	for ; k > 0; k-- {
		s *= Fan
	}
	return s
}

func (p *Pyramid) leafSize() int64 { return max(p.leaf, Base) }

// LastAt is the last sample at or before t as far as the buckets know it:
// exact is true when it is the last sample of a level-0 bucket that ends
// at or before t; otherwise b is the level-0 bucket that spans t, whose
// samples must be read to find it. ok is false when no sample is at or
// before t.
func (p *Pyramid) LastAt(t int64) (b Bucket, exact, ok bool) {
	if p.n == 0 {
		return Bucket{}, false, false
	}
	if o := p.open[0]; o.N > 0 && o.T0 <= t {
		return o, o.T1 <= t, true
	}
	if len(p.levels) == 0 {
		return Bucket{}, false, false
	}
	l0 := p.levels[0]
	i := sort.Search(len(l0), func(i int) bool { return l0[i].T0 > t }) - 1
	if i < 0 {
		return Bucket{}, false, false
	}
	b = l0[i]
	return b, b.T1 <= t, true
}
