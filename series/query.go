package series

import "errors"

// Result is a window of a series reduced to its pixels.
type Result struct {
	T, V []int64
	// Every is how many samples the finest unit drawn holds: 1 when the
	// points are samples, up to Base·Fan^k when they come from level k's
	// buckets (Pyramid.BucketSize).
	Every int64
	// Samples is the number of samples in the window (to a level-0 bucket
	// at each end when it was not read sample by sample).
	Samples int64
}

// ErrNoSamples says a raw reader does not hold the samples of a window
// (the live view keeps only the recent ones); Query then draws buckets.
var ErrNoSamples = errors.New("samples not held")

// RawReader calls add with every sample of [from, to), in time order.
type RawReader func(from, to int64, add func(t, v int64)) error

// Query reduces [from, to) of a series to points columns: from its samples
// when the window holds fewer than Base per column (raw may be nil, or
// answer ErrNoSamples, and then level 0 is drawn), from the coarsest
// pyramid level whose buckets are narrower than a column otherwise.
func Query(p *Pyramid, from, to int64, points int, raw RawReader) (Result, error) {
	n := p.Count(from, to)
	k := p.Level(n, points)
	r := NewReducer(from, to, points)
	if k < 0 && raw != nil {
		err := raw(from, to, func(t, v int64) {
			if t >= from && t < to {
				r.addSample(t, v)
			}
		})
		if err == nil {
			t, v := r.Points()
			return Result{T: t, V: v, Every: 1, Samples: r.Samples()}, nil
		}
		if !errors.Is(err, ErrNoSamples) {
			return Result{}, err
		}
		r = NewReducer(from, to, points)
	}
	k = max(k, 0)
	p.Buckets(k, from, to, r.Add)
	t, v := r.Points()
	return Result{T: t, V: v, Every: p.BucketSize(k), Samples: n}, nil
}
