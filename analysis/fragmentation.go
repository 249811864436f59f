package analysis

import "github.com/memrec/memrec/analysis/growth"

// This file holds the allocator's fragmentation figures: the cached-free
// and inactive-split shares summed as samples come, the waste at the peak,
// and the decimation of their series for drawing.

// add counts one sample's fragmentation and stuck share into f; Mean and
// StuckMean hold sums until summarizeFrag.
func (f *Frag) add(frag, stuck float64) {
	f.Samples++
	f.Final = frag
	f.Mean += frag
	f.StuckMean += stuck
	f.Max = max(f.Max, frag)
	f.StuckMax = max(f.StuckMax, stuck)
}

// summarizeFrag finishes the summary that add kept, with the 95th
// percentile of frags (which it sorts).
func summarizeFrag(sum *Frag, frags []float64) *Frag {
	f := *sum
	f.Mean /= float64(f.Samples)
	f.StuckMean /= float64(f.Samples)
	f.P95 = growth.SelectQuantile(frags, 0.95)
	return &f
}

// peakWaste summarises 1 − peak allocated / reserved as samples come.
type peakWaste struct {
	n           int
	sum, lo, hi float64
}

func (w *peakWaste) add(v float64) {
	if w.n == 0 || v < w.lo {
		w.lo = v
	}
	if w.n == 0 || v > w.hi {
		w.hi = v
	}
	w.n++
	w.sum += v
}

// into sets the waste at the peak in f, and the figures' plain names.
func (w *peakWaste) into(f *Frag) {
	f.CachedFreeMean, f.InactiveSplitMean = f.Mean, f.StuckMean
	if w.n > 0 {
		f.PeakWasteMean, f.PeakWasteMin, f.PeakWasteMax = f64(w.sum/float64(w.n)), f64(w.lo), f64(w.hi)
	}
}

// halveFrag keeps the higher point of each pair, in place.
func halveFrag(s []FragPoint) []FragPoint {
	n := 0
	for i := 0; i < len(s); i += 2 {
		p := s[i]
		if i+1 < len(s) && s[i+1].Frag > p.Frag {
			p = s[i+1]
		}
		s[n] = p
		n++
	}
	return s[:n]
}

// decimateFrag keeps at most about 4·width points of the fragmentation
// series (the highest of each run of points), for drawing.
func decimateFrag(gr *GPUReport, width int) {
	limit := 4 * width
	if len(gr.FragSeries) <= limit {
		return
	}
	k := (len(gr.FragSeries) + limit - 1) / limit
	var out []FragPoint
	for i := 0; i < len(gr.FragSeries); i += k {
		best := gr.FragSeries[i]
		for _, p := range gr.FragSeries[i:min(i+k, len(gr.FragSeries))] {
			if p.Frag > best.Frag {
				best = p
			}
		}
		out = append(out, best)
	}
	gr.FragSeries = out
}
