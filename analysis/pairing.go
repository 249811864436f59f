package analysis

import (
	"math"
	"sort"

	"github.com/memrec/memrec/storage"
)

// This file holds the trackers that place samples in time as a pass
// streams them: the value at each query time (atTimes), the sample
// nearest to each (nearTimes), the extremes within spans (spans), and the
// ten time slices of a run without epochs.

// atTimes records a series' value at sorted query times: the last sample
// at or before each (the value at a mark, docs/analysis.md).
type atTimes struct {
	q    []int64
	vals []int64
	// ages are how long before each query time the sample its value comes
	// from was taken (tAt), in half the bytes of its time; far holds the
	// times of held samples too old for an age.
	ages  []uint32
	far   map[int]int64
	ok    []bool
	p     int
	last  int64
	lastT int64
	has   bool
	// life, when not 0, is how long after its last sample a series still
	// holds its value: past it a time has none (a process's view ends
	// when the process does).
	life int64
}

// newAtTimes makes the tracker of query times q, its values and flags lent
// by cols (nil: new).
func newAtTimes(q []int64, cols *columns) *atTimes {
	ok := cols.bools(len(q))
	clear(ok) // a series without samples is never done: no time has a value
	return &atTimes{q: q, vals: cols.int64s(len(q)), ages: lend[uint32](cols, len(q)), far: map[int]int64{}, ok: ok}
}

func (a *atTimes) add(t, v int64) {
	for a.p < len(a.q) && a.q[a.p] < t {
		a.carry()
	}
	a.last, a.lastT, a.has = v, t, true
}

// addAll takes the next samples (ts[i], vs[i]) in time order: each query
// time before the last of them gets the last sample at or before it.
func (a *atTimes) addAll(ts, vs []int64) {
	if len(ts) == 0 {
		return
	}
	k := 0
	for a.p < len(a.q) && a.q[a.p] < ts[len(ts)-1] {
		q := a.q[a.p]
		// The first sample after q: eight at a time while the eighth is
		// not (a step holds dozens of samples), then one at a time.
		for k+8 <= len(ts) && ts[k+7] <= q {
			k += 8
		}
		for k < len(ts) && ts[k] <= q {
			k++
		}
		if k > 0 {
			a.last, a.lastT, a.has = vs[k-1], ts[k-1], true
		}
		a.carry()
	}
	a.last, a.lastT, a.has = vs[len(vs)-1], ts[len(ts)-1], true
}

func (a *atTimes) done() {
	for a.p < len(a.q) {
		a.carry()
	}
}

// carry gives the next query time the last value, if it is still held.
func (a *atTimes) carry() {
	held := a.has && (a.life == 0 || a.q[a.p]-a.lastT <= a.life)
	a.vals[a.p], a.ok[a.p] = a.last, held
	age := uint64(a.q[a.p] - a.lastT) // the sample is at or before the query time
	a.ages[a.p] = uint32(min(age, farAge))
	if held && age >= farAge {
		a.far[a.p] = a.lastT
	}
	a.p++
}

// farAge marks an age that does not fit in ages.
const farAge = math.MaxUint32

// tAt is the time of the sample the value at query time i comes from
// (ok[i] must be true).
func (a *atTimes) tAt(i int) int64 {
	if a.ages[i] == farAge {
		return a.far[i]
	}
	return a.q[i] - int64(a.ages[i])
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

// addAll takes the next samples (ts[i], vs[i]) in time order; with no
// time of its own among them, only the last counts.
func (n *nearTimes[V]) addAll(ts []int64, vs []V) {
	if len(ts) == 0 {
		return
	}
	if n.p < len(n.q) && n.q[n.p] < ts[len(ts)-1] {
		for i, t := range ts {
			n.add(t, vs[i])
		}
		return
	}
	n.last = timed[V]{ts[len(ts)-1], vs[len(vs)-1], true}
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
// maximum, or one of them.
type spans struct {
	lo, hi []int64
	// min and max of each span's samples, nil where not kept (a week of
	// steps is 2.4 million spans: 19 MB a column a GPU); a span without
	// any keeps min at math.MaxInt64 and max at math.MinInt64 (has),
	// which no sample of bytes reaches.
	min, max []int64
	// at is the last span with lo <= the previous sample's t (-1: none), so
	// that samples in time order find theirs by stepping forward, not by a
	// search over every span (a day of steps is 10^5 spans).
	at int
	// apart: no span overlaps the next (steps, slices, epochs), so a
	// sample inside the cursor's span is that span's alone.
	apart bool
}

// What spans keep of each span's samples.
const (
	keepMin = 1 << iota
	keepMax
	keepBoth = keepMin | keepMax
)

// newSpans makes the tracker of spans [lo[i], hi[i]), its columns lent by
// cols (nil: new).
func newSpans(lo, hi []int64, keep int, cols *columns) *spans {
	k := len(lo)
	s := &spans{lo: lo, hi: hi, at: -1, apart: true}
	if keep&keepMin != 0 {
		s.min = cols.int64s(k)
		fill(s.min, math.MaxInt64)
	}
	if keep&keepMax != 0 {
		s.max = cols.int64s(k)
		fill(s.max, math.MinInt64)
	}
	for i := 1; i < k; i++ {
		if hi[i-1] > lo[i] {
			s.apart = false
		}
	}
	return s
}

func fill(s []int64, v int64) {
	for i := range s {
		s[i] = v
	}
}

// put takes samples from lo to hi into span i.
func (s *spans) put(i int, lo, hi int64) {
	if s.min != nil {
		s.min[i] = min(s.min[i], lo)
	}
	if s.max != nil {
		s.max[i] = max(s.max[i], hi)
	}
}

// add places one sample; spans may overlap (epochs do not, but be safe) so
// it checks every span that started at or before t, from a cursor.
func (s *spans) add(t, v int64) {
	i := s.at
	if s.apart && i >= 0 && s.lo[i] <= t && t < s.hi[i] && (i+1 == len(s.lo) || t < s.lo[i+1]) {
		// The common case: the sample is in the span of the one before.
		s.put(i, v, v)
		return
	}
	for i = s.seek(t); i >= 0; i-- {
		if t < s.hi[i] {
			s.put(i, v, v)
		}
		if i > 0 && s.hi[i-1] <= s.lo[i] { // non-overlapping: earlier spans end before
			break
		}
	}
}

// seek moves the cursor to the last span with lo <= t, and returns it (-1:
// none): forward from the previous sample's, or by a search for a sample
// that went back (spans are sorted by lo).
func (s *spans) seek(t int64) int {
	i := s.at
	if i >= 0 && s.lo[i] > t {
		i = sort.Search(len(s.lo), func(i int) bool { return s.lo[i] > t }) - 1
	}
	for i+1 < len(s.lo) && s.lo[i+1] <= t {
		i++
	}
	s.at = i
	return i
}

// addAll places the samples (ts[i], vs[i]), ts ascending (not empty), and
// returns their lowest and highest value, which the spans' walk finds on
// its way. Where spans do not overlap, the samples inside the cursor's
// span are taken as a run, and those between spans as one.
func (s *spans) addAll(ts, vs []int64) (lo, hi int64) {
	if len(s.lo) == 0 || !s.apart {
		for i := range ts {
			s.add(ts[i], vs[i])
		}
		return extremes(vs)
	}
	lo, hi = vs[0], vs[0]
	for i := 0; i < len(ts); {
		c := s.seek(ts[i])
		next := int64(math.MaxInt64) // where the span after the cursor's begins
		if c+1 < len(s.lo) {
			next = s.lo[c+1]
		}
		if c < 0 || ts[i] >= s.hi[c] { // before the first span, or after the cursor's: in none
			j := upTo(ts, i, next)
			l, h := extremes(vs[i:j])
			lo, hi, i = min(lo, l), max(hi, h), j
			continue
		}
		j, l, h := runExtremes(ts, vs, i, min(s.hi[c], next))
		s.put(c, l, h)
		lo, hi, i = min(lo, l), max(hi, h), j
	}
	return lo, hi
}

// addAll2 is s.addAll(ts, vs) and s2.addAll(ts, ws) for two trackers of
// the same spans whose cursors stand at the same span (a device's floors
// and its process's, allocated and reserved floors: the same samples'
// times): the spans are walked once, each run's end found once for both.
// Other trackers are walked one after the other.
func addAll2(s, s2 *spans, ts, vs, ws []int64) (lo, hi, lo2, hi2 int64) {
	if len(s.lo) == 0 || !s.apart || len(s2.lo) != len(s.lo) || &s2.lo[0] != &s.lo[0] || &s2.hi[0] != &s.hi[0] || s2.at != s.at || !s2.apart {
		lo, hi = s.addAll(ts, vs)
		lo2, hi2 = s2.addAll(ts, ws)
		return lo, hi, lo2, hi2
	}
	lo, hi, lo2, hi2 = vs[0], vs[0], ws[0], ws[0]
	for i := 0; i < len(ts); {
		c := s.seek(ts[i])
		next := int64(math.MaxInt64) // where the span after the cursor's begins
		if c+1 < len(s.lo) {
			next = s.lo[c+1]
		}
		if c < 0 || ts[i] >= s.hi[c] { // before the first span, or after the cursor's: in none
			j := upTo(ts, i, next)
			l, h := extremes(vs[i:j])
			l2, h2 := extremes(ws[i:j])
			lo, hi, lo2, hi2, i = min(lo, l), max(hi, h), min(lo2, l2), max(hi2, h2), j
			continue
		}
		j, l, h, l2, h2 := runExtremes2(ts, vs, ws, i, min(s.hi[c], next))
		s.put(c, l, h)
		s2.put(c, l2, h2)
		lo, hi, lo2, hi2, i = min(lo, l), max(hi, h), min(lo2, l2), max(hi2, h2), j
	}
	s2.at = s.at
	return lo, hi, lo2, hi2
}

// runExtremes2 is runExtremes of two columns of the same samples.
func runExtremes2(ts, vs, ws []int64, i int, end int64) (j int, lo, hi, lo2, hi2 int64) {
	if ts[len(ts)-1] < end {
		lo, hi = extremes(vs[i:])
		lo2, hi2 = extremes(ws[i:])
		return len(ts), lo, hi, lo2, hi2
	}
	lo, hi, lo2, hi2, j = vs[i], vs[i], ws[i], ws[i], i+1
	for ts[j] < end { // the last time is at or past end
		lo, hi = min(lo, vs[j]), max(hi, vs[j])
		lo2, hi2 = min(lo2, ws[j]), max(hi2, ws[j])
		j++
	}
	return j, lo, hi, lo2, hi2
}

// runExtremes is the end of the run of samples from i on before end
// (ts[i] < end), and its lowest and highest value. Runs are short (a
// step's samples), so their end is found by a look at each sample that
// also takes its value, not by a search.
func runExtremes(ts, vs []int64, i int, end int64) (j int, lo, hi int64) {
	if ts[len(ts)-1] < end {
		lo, hi = extremes(vs[i:])
		return len(ts), lo, hi
	}
	lo, hi, j = vs[i], vs[i], i+1
	for ts[j] < end { // the last time is at or past end
		lo, hi = min(lo, vs[j]), max(hi, vs[j])
		j++
	}
	return j, lo, hi
}

// extremes is the lowest and highest of xs (not empty). Four running
// pairs, each over every fourth value, let the compares of neighbouring
// values proceed at once rather than each wait on the one before.
func extremes(xs []int64) (lo, hi int64) {
	l0, h0 := xs[0], xs[0]
	l1, h1, l2, h2, l3, h3 := l0, h0, l0, h0, l0, h0
	i := 0
	for ; i+4 <= len(xs); i += 4 {
		x := xs[i : i+4 : i+4]
		l0, h0 = min(l0, x[0]), max(h0, x[0])
		l1, h1 = min(l1, x[1]), max(h1, x[1])
		l2, h2 = min(l2, x[2]), max(h2, x[2])
		l3, h3 = min(l3, x[3]), max(h3, x[3])
	}
	for _, x := range xs[i:] {
		l0, h0 = min(l0, x), max(h0, x)
	}
	return min(l0, l1, l2, l3), max(h0, h1, h2, h3)
}

// addBlock is addAll for samples whose lowest and highest values are lo
// and hi: where they all lie in the span of the sample before (a block of
// samples inside an epoch or a time slice, most of them), that span takes
// lo and hi without a look at each sample.
func (s *spans) addBlock(ts, vs []int64, lo, hi int64) {
	if len(ts) == 0 || len(s.lo) == 0 {
		return
	}
	c, last := s.at, ts[len(ts)-1]
	if s.apart && c >= 0 && s.lo[c] <= ts[0] && last < s.hi[c] && (c+1 == len(s.lo) || last < s.lo[c+1]) {
		s.put(c, lo, hi)
		return
	}
	s.addAll(ts, vs)
}

// upTo is the index of the first of ts[i:] at or after end (ts ascending).
// Most runs are short (a step's samples, a few dozen), so it looks at the
// next linearRun times one by one before it searches the rest.
func upTo(ts []int64, i int, end int64) int {
	n := len(ts)
	if ts[n-1] < end {
		return n
	}
	for k := i; k < min(n, i+linearRun); k++ {
		if ts[k] >= end {
			return k
		}
	}
	i += linearRun // ts[n-1] >= end: the answer is below n
	return i + sort.Search(n-i, func(k int) bool { return ts[i+k] >= end })
}

// linearRun is how many times upTo looks at one by one.
const linearRun = 32

// has says whether span i holds a sample.
func (s *spans) has(i int) bool {
	if s.min != nil {
		return s.min[i] != math.MaxInt64
	}
	return s.max[i] != math.MinInt64
}

func countNonEmpty(s *spans) int {
	n := 0
	for i := range s.lo {
		if s.has(i) {
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
