package analysis

import (
	"math"
	"slices"
	"sort"

	"github.com/memrec/memrec/internal/merge"
	"github.com/memrec/memrec/storage"
)

// Timeline is a GPU's memory downsampled for drawing: per bucket of time
// the first, lowest, highest and last point (M4), so no peak disappears.
type Timeline struct {
	StartNS, EndNS int64
	Used           Series
	DriverReserved Series // NVML's reserved memory; empty where the driver does not report it
	Allocated      Series
	Reserved       Series
	Procs          []Series // one per process (NVML), named "pid N"
}

// Series is a list of points in time order.
type Series struct {
	Name string
	T    []int64
	V    []int64
	// I is each point's position among all the samples of the series
	// before downsampling (0 for the first sample).
	I []int64
}

// m4 downsamples a stream into buckets of equal time.
type m4 struct {
	start, width        int64
	cur                 int64    // current bucket, -1 before the first point
	n                   int64    // points added so far
	first, lo, hi, last [3]int64 // (t, v, index)
	out                 *Series
}

func newM4(start, end int64, buckets int, out *Series) *m4 {
	w := max((end-start)/int64(buckets), 1)
	return &m4{start: start, width: w, cur: -1, out: out}
}

func (m *m4) add(t, v int64) {
	b := (t - m.start) / m.width
	p := [3]int64{t, v, m.n}
	m.n++
	if b != m.cur {
		m.flush()
		m.cur = b
		m.first, m.lo, m.hi, m.last = p, p, p, p
		return
	}
	if v < m.lo[1] {
		m.lo = p
	}
	if v > m.hi[1] {
		m.hi = p
	}
	m.last = p
}

func (m *m4) flush() {
	if m.cur < 0 {
		return
	}
	pts := [][3]int64{m.first, m.lo, m.hi, m.last}
	sort.SliceStable(pts, func(i, j int) bool { return pts[i][0] < pts[j][0] })
	var lastT int64 = math.MinInt64
	for _, p := range pts {
		if p[0] == lastT {
			continue
		}
		lastT = p[0]
		m.out.T = append(m.out.T, p[0])
		m.out.V = append(m.out.V, p[1])
		m.out.I = append(m.out.I, p[2])
	}
}

// Downsample keeps, of each of buckets equal spans of t, the first, lowest,
// highest and last point (M4, as the timelines are made): at most 4·buckets
// points, every peak kept. t must be sorted; I of the result indexes t.
func Downsample(name string, t, v []int64, buckets int) Series {
	out := Series{Name: name}
	if len(t) == 0 {
		return out
	}
	m := newM4(t[0], t[len(t)-1]+1, max(buckets, 1), &out)
	for i := range t {
		m.add(t[i], v[i])
	}
	m.flush()
	return out
}

// atTimes records a series' value at sorted query times: the last sample
// at or before each (the value at a mark, docs/analysis.md).
type atTimes struct {
	q     []int64
	vals  []int64
	ts    []int64 // the time of the sample each value comes from
	ok    []bool
	p     int
	last  int64
	lastT int64
	has   bool
}

func newAtTimes(q []int64) *atTimes {
	return &atTimes{q: q, vals: make([]int64, len(q)), ts: make([]int64, len(q)), ok: make([]bool, len(q))}
}

func (a *atTimes) add(t, v int64) {
	for a.p < len(a.q) && a.q[a.p] < t {
		a.vals[a.p], a.ts[a.p], a.ok[a.p] = a.last, a.lastT, a.has
		a.p++
	}
	a.last, a.lastT, a.has = v, t, true
}

func (a *atTimes) done() {
	for ; a.p < len(a.q); a.p++ {
		a.vals[a.p], a.ts[a.p], a.ok[a.p] = a.last, a.lastT, a.has
	}
}

func (a *atTimes) at(i int) *int64 {
	if i < 0 || i >= len(a.q) || !a.ok[i] {
		return nil
	}
	return i64(a.vals[i])
}

// nearTimes finds, for sorted times, the sample of a series nearest to
// each: it keeps the last sample at or before the time and the first after
// it. The OOM post-mortem takes each view at the OOM from its nearest
// sample, so that figures made of two views describe the same moment.
type nearTimes[V any] struct {
	q             []int64
	before, after []timed[V]
	p             int // the first time whose samples are not yet known
	last          timed[V]
}

// timed is one sample of a series; ok is false where there is none.
type timed[V any] struct {
	t  int64
	v  V
	ok bool
}

func newNearTimes[V any](q []int64) *nearTimes[V] {
	return &nearTimes[V]{q: q, before: make([]timed[V], len(q)), after: make([]timed[V], len(q))}
}

// add takes the next sample in time order.
func (n *nearTimes[V]) add(t int64, v V) {
	for n.p < len(n.q) && n.q[n.p] < t {
		n.before[n.p], n.after[n.p] = n.last, timed[V]{t, v, true}
		n.p++
	}
	n.last = timed[V]{t, v, true}
}

// done closes the series: the times after its last sample have none after.
func (n *nearTimes[V]) done() {
	for ; n.p < len(n.q); n.p++ {
		n.before[n.p] = n.last
	}
}

// nearest is the sample nearest to the i-th time (the earlier one on a
// tie); ok is false for a series without samples.
func (n *nearTimes[V]) nearest(i int) timed[V] {
	b, a := n.before[i], n.after[i]
	if !a.ok || b.ok && n.q[i]-b.t <= a.t-n.q[i] {
		return b
	}
	return a
}

// within is the sample nearest to the i-th time if it lies at most tol
// from it. Where the nearest lies farther, ok is false and gap is how far.
func (n *nearTimes[V]) within(i int, tol int64) (s timed[V], gap int64) {
	s = n.nearest(i)
	if d := abs64(s.t - n.q[i]); s.ok && d > tol {
		return timed[V]{}, d
	}
	return s, 0
}

// spans tracks, for samples in time order, which of several sorted
// half-open spans [lo, hi) they fall in, keeping each span's minimum and
// maximum.
type spans struct {
	lo, hi   []int64
	min, max []int64
	n        []int
}

func newSpans(lo, hi []int64) *spans {
	k := len(lo)
	s := &spans{lo: lo, hi: hi, min: make([]int64, k), max: make([]int64, k), n: make([]int, k)}
	for i := range s.min {
		s.min[i], s.max[i] = math.MaxInt64, math.MinInt64
	}
	return s
}

// add places one sample; spans may overlap (epochs do not, but be safe) so
// it checks every span that started at or before t, from a cursor.
func (s *spans) add(t, v int64) {
	// spans are sorted by lo; find the last with lo <= t
	i := sort.Search(len(s.lo), func(i int) bool { return s.lo[i] > t }) - 1
	for ; i >= 0; i-- {
		if t < s.hi[i] {
			s.n[i]++
			s.min[i] = min(s.min[i], v)
			s.max[i] = max(s.max[i], v)
		}
		if i > 0 && s.hi[i-1] <= s.lo[i] { // non-overlapping: earlier spans end before
			break
		}
	}
}

func countNonEmpty(s *spans) int {
	n := 0
	for _, c := range s.n {
		if c > 0 {
			n++
		}
	}
	return n
}

// timeSlices cuts a run into ten equal spans, for runs without epochs.
func timeSlices(run storage.Run, want bool) []epochSpan {
	if !want || run.EndNS <= run.StartNS {
		return nil
	}
	var out []epochSpan
	w := int64((uint64(run.EndNS) - uint64(run.StartNS)) / 10) // no overflow for any two times
	for i := 0; i < 10; i++ {
		s := run.StartNS + int64(i)*w
		e := s + w
		if i == 9 {
			e = run.EndNS
		}
		out = append(out, epochSpan{n: i, start: s, end: e})
	}
	return out
}

func oomsFor(mi *markIndex, gpu, rank, ngpus int) []storage.Mark {
	var out []storage.Mark
	for _, m := range mi.ooms {
		switch {
		case m.GPU == gpu:
		case m.GPU == storage.None && (m.Rank == rank || ngpus == 1 || m.Rank == storage.None):
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}

func makePeak(what string, v, t int64, mi *markIndex, steps []StepMark) Peak {
	return Peak{What: what, Bytes: v, TNS: t, Epoch: mi.epochAt(t), Step: stepAt(steps, t), NearMark: mi.nearestMark(t)}
}

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
	slices.Sort(frags)
	f.P95 = quantile(frags, 0.95)
	return &f
}

// decimatePeaks keeps at most about limit points, the highest of each run.
func decimatePeaks(pts []FloorPoint, limit int) []FloorPoint {
	if len(pts) <= limit {
		return pts
	}
	k := (len(pts) + limit - 1) / limit
	out := make([]FloorPoint, 0, limit)
	for i := 0; i < len(pts); i += k {
		best := pts[i]
		for _, p := range pts[i:min(i+k, len(pts))] {
			if p.Bytes > best.Bytes {
				best = p
			}
		}
		out = append(out, best)
	}
	return out
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

// judgeLeak fits the floors after the warm-up and gives the verdict.
//
// skip is the number of warm-up floors when the caller found it; with -1
// the warm-up is the first epoch when there are later ones, else the first
// fifth of the floors.
func judgeLeak(floors []FloorPoint, skip int, basis, per string, mi *markIndex, run storage.Run, g storage.GPU, lastUsed int64, hasDevice bool) Leak {
	l := Leak{Basis: basis, Per: per, Verdict: VerdictInsufficient}
	switch {
	case skip >= 0:
	case len(mi.epochs) >= 2:
		end0 := mi.epochs[0].end
		skip = sort.Search(len(floors), func(i int) bool { return floors[i].TNS > end0 })
	default:
		skip = len(floors) / 5
	}
	steady := floors[min(skip, len(floors)):]
	l.SkippedWarmup = min(skip, len(floors))
	l.Points = len(steady)
	if len(steady) < 8 {
		l.Reason = "fewer than 8 steady-state points after the warm-up"
		return l
	}
	x := make([]float64, len(steady))
	xt := make([]float64, len(steady))
	y := make([]float64, len(steady))
	for i, f := range steady {
		x[i], y[i] = f.X, float64(f.Bytes)
		xt[i] = float64(f.TNS-run.StartNS) / 1e9
	}
	byTime := fitTrend(xt, y)
	l.JumpsRemoved = byTime.JumpsTaken
	l.PValue = f64(byTime.P)
	l.SlopeBytesPerHour = f64(byTime.Slope * 3600)
	l.CILowBytesPerHour, l.CIHighBytesPerHour = f64(byTime.Lo*3600), f64(byTime.Hi*3600)
	l.FitIntercept = byTime.Intercept
	slope := byTime
	span := xt[len(xt)-1] - xt[0]
	if per == "step" {
		byStep := fitTrend(x, y)
		l.SlopeBytesPerStep = f64(byStep.Slope)
		l.CILowBytesPerStep, l.CIHighBytesPerStep = f64(byStep.Lo), f64(byStep.Hi)
		l.FitIntercept = byStep.Intercept
		l.PValue = f64(byStep.P)
		l.JumpsRemoved = byStep.JumpsTaken
		slope = byStep
		span = x[len(x)-1] - x[0]
	}
	growth := slope.Slope * span
	switch {
	case slope.P < 0.01 && slope.Slope > 0 && slope.Lo > 0 && growth >= 1<<20:
		l.Verdict = VerdictLeak
		l.Reason = "sustained growth of the steady-state floor (Mann–Kendall p < 0.01, Theil–Sen slope > 0 with its 95 % interval above 0)"
		rate := byTime.Slope // bytes per second
		if rate > 0 && g.TotalBytes > 0 {
			// The last device sample is 0 once the job has exited.
			now := max(lastUsed, steady[len(steady)-1].Bytes)
			l.TimeToFullS = fptr(float64(g.TotalBytes-now) / rate)
		}
	default:
		l.Verdict = VerdictNoLeak
		switch {
		case growth < 1<<20 && slope.Slope > 0:
			l.Reason = "the steady-state floor grows by less than 1 MiB over the run"
		case slope.P >= 0.01:
			l.Reason = "no significant trend in the steady-state floor"
		case slope.Slope > 0:
			l.Reason = "the steady-state floor's rise is not told apart from 0 (its slope's 95 % interval reaches 0)"
		default:
			l.Reason = "the steady-state floor does not grow"
		}
		if l.JumpsRemoved > 0 {
			l.Reason += "; one-off jumps were set aside"
		}
		// The verdict's own fit decides for both slopes; the slope per
		// hour is fitted on its own as well (step times can change), so
		// it must also pass for itself.
		if !slopeBesideNoLeak(slope) {
			l.SlopeBytesPerStep, l.CILowBytesPerStep, l.CIHighBytesPerStep = nil, nil, nil
		}
		if !slopeBesideNoLeak(slope) || !slopeBesideNoLeak(byTime) {
			l.SlopeBytesPerHour, l.CILowBytesPerHour, l.CIHighBytesPerHour = nil, nil, nil
		}
	}
	return l
}

// slopeBesideNoLeak says whether a no_leak verdict may show the slope: a
// slope that is told apart from 0 next to "no leak" reads as a leak. It
// stays when it is 0, or when its 95 % interval holds 0 and the
// Mann–Kendall test finds no trend. Both are needed: memory known to 1 MiB
// (nvidia-smi's logs) is full of ties, and the interval can then end
// exactly at 0 beside a trend the test tells apart (a real log: 6.62 GiB
// per hour, interval [0, 8.88 GiB], p = 1e-6).
func slopeBesideNoLeak(t trend) bool {
	return t.Slope == 0 || t.Lo <= 0 && t.Hi >= 0 && t.P >= 0.01
}

// mergeTorch merges the allocator series of several processes by time.
func mergeTorch(db *storage.DB, run storage.Run, gpu int, pids []int) *merge.ByTime[storage.TorchSample] {
	its := make([]merge.Iterator[storage.TorchSample], len(pids))
	for i, pid := range pids {
		its[i] = db.TorchSamples(run, gpu, pid, storage.MinTime, storage.MaxTime)
	}
	return merge.New(func(s storage.TorchSample) int64 { return s.T }, its...)
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
