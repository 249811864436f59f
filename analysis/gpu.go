package analysis

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

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
	q    []int64
	vals []int64
	ok   []bool
	p    int
	last int64
	has  bool
}

func newAtTimes(q []int64) *atTimes {
	return &atTimes{q: q, vals: make([]int64, len(q)), ok: make([]bool, len(q))}
}

func (a *atTimes) add(t, v int64) {
	for a.p < len(a.q) && a.q[a.p] < t {
		a.vals[a.p], a.ok[a.p] = a.last, a.has
		a.p++
	}
	a.last, a.has = v, true
}

func (a *atTimes) done() {
	for ; a.p < len(a.q); a.p++ {
		a.vals[a.p], a.ok[a.p] = a.last, a.has
	}
}

func (a *atTimes) at(i int) *int64 {
	if i < 0 || i >= len(a.q) || !a.ok[i] {
		return nil
	}
	return i64(a.vals[i])
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

// torchAtTime is the allocator view (summed over the GPU's processes) at a time.
type torchAtTime struct {
	allocated, reserved, inactive, retries int64
}

// analyzeGPU analyses one GPU of a run.
func analyzeGPU(db *storage.DB, run storage.Run, g storage.GPU, series []storage.SeriesRef, mi *markIndex, opts Options) (*GPUReport, error) {
	gr := &GPUReport{GPU: g.Index, UUID: g.UUID, Name: g.Name, TotalBytes: g.TotalBytes}
	var torchPIDs, procPIDs []int
	hasDevice := false
	for _, s := range series {
		if s.GPU != g.Index {
			continue
		}
		switch s.Kind {
		case "device":
			hasDevice = true
		case "torch":
			torchPIDs = append(torchPIDs, s.PID)
		case "proc":
			procPIDs = append(procPIDs, s.PID)
		}
	}
	rank := storage.None
	if len(torchPIDs) > 0 {
		it := db.TorchSamples(run, g.Index, torchPIDs[0], storage.MinTime, storage.MaxTime)
		if it.Next() {
			rank = it.At().Rank
		}
	}
	if rank == storage.None {
		if _, ok := mi.steps[g.Index]; ok {
			rank = g.Index
		}
	}
	steps := mi.stepsFor(rank)
	for _, m := range steps {
		gr.Steps = append(gr.Steps, StepMark{TNS: m.T, Step: m.Step})
	}

	// The times at which values are wanted: epoch bounds, OOMs, steps.
	var q []int64
	for _, e := range mi.epochs {
		q = append(q, e.start, e.end)
	}
	slices0 := timeSlices(run, len(mi.epochs) == 0)
	for _, sl := range slices0 {
		q = append(q, sl.start, sl.end)
	}
	ooms := oomsFor(mi, g.Index, rank, len(run.GPUs))
	for _, m := range ooms {
		q = append(q, m.T)
	}
	for _, s := range steps {
		q = append(q, s.T)
	}
	slices.Sort(q)
	q = slices.Compact(q)
	index := func(t int64) int { i, _ := slices.BinarySearch(q, t); return i }

	// Floor spans: one per step (from its mark to the next), or time slices.
	var fx []float64
	var flo, fhi []int64
	per := "step"
	if len(steps) >= 2 {
		for i := 0; i < len(steps); i++ {
			end := mi.endNS + 1
			if i+1 < len(steps) {
				end = steps[i+1].T
			}
			if end <= steps[i].T {
				continue
			}
			fx = append(fx, float64(steps[i].Step))
			flo = append(flo, steps[i].T)
			fhi = append(fhi, end)
		}
	} else {
		per = "time"
		n := 300
		w := max((run.EndNS-run.StartNS)/int64(n), max(run.IntervalNS, 1))
		for t := run.StartNS; t < run.EndNS; t += w {
			fx = append(fx, float64(t-run.StartNS)/1e9)
			flo = append(flo, t)
			fhi = append(fhi, t+w)
		}
	}
	epochLo, epochHi := make([]int64, len(mi.epochs)), make([]int64, len(mi.epochs))
	for i, e := range mi.epochs {
		epochLo[i], epochHi[i] = e.start, e.end+1
	}
	sliceLo, sliceHi := make([]int64, len(slices0)), make([]int64, len(slices0))
	for i, sl := range slices0 {
		sliceLo[i], sliceHi[i] = sl.start, sl.end+1
	}

	start, end := run.StartNS, max(run.EndNS, run.StartNS+1)
	gr.Timeline = Timeline{StartNS: start, EndNS: end, Used: Series{Name: "device used"}, DriverReserved: Series{Name: "driver reserved"},
		Allocated: Series{Name: "allocated"}, Reserved: Series{Name: "reserved"}}

	// Device pass.
	usedAt := newAtTimes(q)
	usedFloors := newSpans(flo, fhi)
	usedEpochs := newSpans(epochLo, epochHi)
	usedSlices := newSpans(sliceLo, sliceHi)
	var lastUsed int64
	if hasDevice {
		tl := newM4(start, end, opts.Width, &gr.Timeline.Used)
		tld := newM4(start, end, opts.Width, &gr.Timeline.DriverReserved)
		driverReserved := false
		it := db.DeviceSamples(run, g.Index, storage.MinTime, storage.MaxTime)
		var peak storage.DeviceSample
		first := true
		for it.Next() {
			s := it.At()
			tld.add(s.T, s.Reserved)
			driverReserved = driverReserved || s.Reserved != 0
			if first || s.Used > peak.Used {
				peak, first = s, false
			}
			usedAt.add(s.T, s.Used)
			usedFloors.add(s.T, s.Used)
			usedEpochs.add(s.T, s.Used)
			usedSlices.add(s.T, s.Used)
			tl.add(s.T, s.Used)
			lastUsed = s.Used
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		tl.flush()
		tld.flush()
		if !driverReserved {
			gr.Timeline.DriverReserved = Series{Name: gr.Timeline.DriverReserved.Name}
		}
		usedAt.done()
		if !first {
			gr.PeakUsedBytes = i64(peak.Used)
			gr.Peaks = append(gr.Peaks, makePeak("device_used", peak.Used, peak.T, mi, steps))
		}
	}

	// Allocator pass: every process of the GPU merged in time order and
	// summed (last value of each process).
	allocAt := newAtTimes(q)
	allocFloors := newSpans(flo, fhi)
	allocEpochs := newSpans(epochLo, epochHi)
	allocSlices := newSpans(sliceLo, sliceHi)
	stepPeaks := newSpans(flo, fhi)
	var torchAt []torchAtTime
	hasTorch := len(torchPIDs) > 0
	if hasTorch {
		torchAt = make([]torchAtTime, len(q))
		tq := 0
		var cur torchAtTime
		last := map[int]storage.TorchSample{}
		tla := newM4(start, end, opts.Width, &gr.Timeline.Allocated)
		tlr := newM4(start, end, opts.Width, &gr.Timeline.Reserved)
		var frags, stucks []float64
		var peakA, peakR, peakS storage.TorchSample
		var sumA, sumR int64
		var firstRetries int64 = -1
		merged := mergeTorch(db, run, g.Index, torchPIDs)
		var popped int64 // samples merged so far
		for merged.Next() {
			s := merged.At()
			popped++
			for tq < len(q) && q[tq] < s.T {
				torchAt[tq] = cur
				tq++
			}
			prev := last[s.PID]
			last[s.PID] = s
			cur.allocated += s.Allocated - prev.Allocated
			cur.reserved += s.Reserved - prev.Reserved
			cur.inactive += s.InactiveSplit - prev.InactiveSplit
			cur.retries += s.AllocRetries - prev.AllocRetries
			sumA, sumR = cur.allocated, cur.reserved
			if firstRetries < 0 {
				firstRetries = cur.retries
			} else if cur.retries > firstRetries && gr.FirstRetryNS == nil {
				gr.FirstRetryNS = i64(s.T)
			}
			if sumA > peakA.Allocated || peakA.T == 0 {
				peakA = storage.TorchSample{T: s.T, Allocated: sumA}
			}
			if sumR > peakR.Reserved || peakR.T == 0 {
				peakR = storage.TorchSample{T: s.T, Reserved: sumR}
			}
			if s.PeakAllocated > peakS.PeakAllocated {
				peakS = s
			}
			allocAt.add(s.T, sumA)
			allocFloors.add(s.T, sumA)
			allocEpochs.add(s.T, sumA)
			allocSlices.add(s.T, sumA)
			stepPeaks.add(s.T, s.PeakAllocated)
			tla.add(s.T, sumA)
			tlr.add(s.T, sumR)
			if sumR > 0 {
				f := float64(sumR-sumA) / float64(sumR)
				st := float64(cur.inactive) / float64(sumR)
				frags = append(frags, f)
				stucks = append(stucks, st)
				gr.FragSeries = append(gr.FragSeries, FragPoint{TNS: s.T, Frag: f, Stuck: st, I: popped - 1})
			}
		}
		if err := merged.Err(); err != nil {
			return nil, err
		}
		for ; tq < len(q); tq++ {
			torchAt[tq] = cur
		}
		allocAt.done()
		tla.flush()
		tlr.flush()
		gr.PeakAllocatedBytes = i64(peakA.Allocated)
		gr.PeakReservedBytes = i64(peakR.Reserved)
		gr.PeakStepBytes = i64(peakS.PeakAllocated)
		gr.Peaks = append(gr.Peaks, makePeak("allocated", peakA.Allocated, peakA.T, mi, steps),
			makePeak("reserved", peakR.Reserved, peakR.T, mi, steps),
			makePeak("step_peak", peakS.PeakAllocated, peakS.T, mi, steps))
		if firstRetries >= 0 {
			gr.AllocRetries = i64(cur.retries - firstRetries)
		}
		if len(frags) > 0 {
			gr.Fragmentation = summarizeFrag(frags, stucks)
		}
		decimateFrag(gr, opts.Width)
	}

	// Per-epoch deltas (or time slices).
	makeDeltas := func(spans []epochSpan, usedS, allocS *spans) []EpochDelta {
		var out []EpochDelta
		for i, e := range spans {
			d := EpochDelta{Epoch: e.n, StartNS: e.start, EndNS: e.end, Open: e.open}
			if hasDevice {
				d.UsedStartBytes, d.UsedEndBytes = usedAt.at(index(e.start)), usedAt.at(index(e.end))
				if d.UsedStartBytes != nil && d.UsedEndBytes != nil {
					d.DeltaUsedBytes = i64(*d.UsedEndBytes - *d.UsedStartBytes)
				}
				if usedS.n[i] > 0 {
					d.PeakUsedBytes = i64(usedS.max[i])
				}
			}
			if hasTorch {
				a, b := torchAt[index(e.start)], torchAt[index(e.end)]
				if allocAt.at(index(e.start)) != nil {
					d.AllocatedStartBytes = i64(a.allocated)
				}
				if allocAt.at(index(e.end)) != nil {
					d.AllocatedEndBytes = i64(b.allocated)
				}
				if d.AllocatedStartBytes != nil && d.AllocatedEndBytes != nil {
					d.DeltaAllocatedBytes = i64(b.allocated - a.allocated)
				}
				if allocS.n[i] > 0 {
					d.PeakAllocatedBytes = i64(allocS.max[i])
				}
			}
			out = append(out, d)
		}
		return out
	}
	gr.Epochs = makeDeltas(mi.epochs, usedEpochs, allocEpochs)
	if gr.Epochs == nil {
		gr.Epochs = []EpochDelta{}
	}
	if len(mi.epochs) == 0 {
		gr.Intervals = makeDeltas(slices0, usedSlices, allocSlices)
	}

	// The leak series: floors of allocated where the probe reported, else
	// of device used.
	basis, floors := "device_used", usedFloors
	if hasTorch && countNonEmpty(allocFloors) >= max(3, countNonEmpty(usedFloors)/2) {
		basis, floors = "allocated", allocFloors
	}
	for i := range fx {
		if floors.n[i] > 0 {
			gr.Floors = append(gr.Floors, FloorPoint{X: fx[i], TNS: flo[i], Bytes: floors.min[i]})
		}
		if stepPeaks.n[i] > 0 && per == "step" {
			gr.StepPeaks = append(gr.StepPeaks, FloorPoint{X: fx[i], TNS: flo[i], Bytes: stepPeaks.max[i]})
		}
	}
	gr.Leak = judgeLeak(gr.Floors, basis, per, mi, run, g, lastUsed, hasDevice)

	// Memory PyTorch does not see: device used minus the allocator's
	// reserved, at each step mark (or query time).
	if hasDevice && hasTorch {
		var u Unseen
		var sum int64
		for i := range q {
			if !usedAt.ok[i] || !allocAt.ok[i] {
				continue
			}
			v := usedAt.vals[i] - torchAt[i].reserved
			sum += v
			u.Samples++
			u.MaxBytes = max(u.MaxBytes, v)
			u.FinalBytes = v
		}
		if u.Samples > 0 {
			u.MeanBytes = sum / int64(u.Samples)
			gr.Unseen = &u
		}
	}

	// OOM post-mortems.
	gr.OOMs = []OOM{}
	for _, m := range ooms {
		i := index(m.T)
		msg, summary, _ := strings.Cut(m.Text, "\n\n")
		o := OOM{TNS: m.T, Message: msg, Summary: summary, Epoch: mi.epochAt(m.T), Step: stepAt(steps, m.T)}
		if hasDevice {
			o.UsedBytes = usedAt.at(i)
		}
		if hasTorch && allocAt.at(i) != nil {
			o.AllocatedBytes, o.ReservedBytes = i64(torchAt[i].allocated), i64(torchAt[i].reserved)
			if torchAt[i].reserved > 0 {
				o.Fragmentation = f64(float64(torchAt[i].reserved-torchAt[i].allocated) / float64(torchAt[i].reserved))
			}
			if gr.AllocRetries != nil {
				o.AllocRetriesRise = i64(torchAt[i].retries - torchAt[0].retries)
			}
		}
		// The largest growth between consecutive floors in the ten before.
		var prev []FloorPoint
		for _, f := range gr.Floors {
			if f.TNS <= m.T {
				prev = append(prev, f)
			}
		}
		if len(prev) > 11 {
			prev = prev[len(prev)-11:]
		}
		for k := 1; k < len(prev); k++ {
			if d := prev[k].Bytes - prev[k-1].Bytes; o.LargestGrowth == nil || d > *o.LargestGrowth {
				o.LargestGrowth = i64(d)
				if per == "step" {
					o.LargestGrowthAt = intp(int(prev[k].X))
				}
			}
		}
		gr.OOMs = append(gr.OOMs, o)
	}

	// Processes.
	for _, pid := range procPIDs {
		it := db.ProcSamples(run, g.Index, pid, storage.MinTime, storage.MaxTime)
		p := Process{PID: pid, Source: "nvml"}
		ser := Series{Name: "pid " + strconv.Itoa(pid)}
		tl := newM4(start, end, opts.Width, &ser)
		for it.Next() {
			s := it.At()
			p.Samples++
			p.PeakBytes = max(p.PeakBytes, s.Used)
			tl.add(s.T, s.Used)
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
		tl.flush()
		gr.Processes = append(gr.Processes, p)
		gr.Timeline.Procs = append(gr.Timeline.Procs, ser)
	}
	return gr, nil
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
	w := (run.EndNS - run.StartNS) / 10
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

func makePeak(what string, v, t int64, mi *markIndex, steps []storage.Mark) Peak {
	return Peak{What: what, Bytes: v, TNS: t, Epoch: mi.epochAt(t), Step: stepAt(steps, t), NearMark: mi.nearestMark(t)}
}

func summarizeFrag(frags, stucks []float64) *Frag {
	f := &Frag{Samples: len(frags), Final: frags[len(frags)-1]}
	var sum, ssum float64
	for i, v := range frags {
		sum += v
		ssum += stucks[i]
		f.Max = max(f.Max, v)
		f.StuckMax = max(f.StuckMax, stucks[i])
	}
	f.Mean = sum / float64(len(frags))
	f.StuckMean = ssum / float64(len(frags))
	sorted := slices.Clone(frags)
	slices.Sort(sorted)
	f.P95 = quantile(sorted, 0.95)
	return f
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
func judgeLeak(floors []FloorPoint, basis, per string, mi *markIndex, run storage.Run, g storage.GPU, lastUsed int64, hasDevice bool) Leak {
	l := Leak{Basis: basis, Per: per, Verdict: VerdictInsufficient}
	// Warm-up: the first epoch when there are later ones, else the first
	// fifth of the run.
	skip := len(floors) / 5
	if len(mi.epochs) >= 2 {
		end0 := mi.epochs[0].end
		skip = sort.Search(len(floors), func(i int) bool { return floors[i].TNS > end0 })
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
			now := lastUsed
			if !hasDevice {
				now = steady[len(steady)-1].Bytes
			}
			l.TimeToFullS = fptr(float64(g.TotalBytes-now) / rate)
		}
	default:
		l.Verdict = VerdictNoLeak
		switch {
		case growth < 1<<20 && slope.Slope > 0:
			l.Reason = "the steady-state floor grows by less than 1 MiB over the run"
		case slope.P >= 0.01:
			l.Reason = "no significant trend in the steady-state floor"
		default:
			l.Reason = "the steady-state floor does not grow"
		}
		if l.JumpsRemoved > 0 {
			l.Reason += "; one-off jumps were set aside"
		}
	}
	return l
}

// mergeTorch merges the allocator series of several processes by time.
func mergeTorch(db *storage.DB, run storage.Run, gpu int, pids []int) *merge.ByTime[storage.TorchSample] {
	its := make([]merge.Iterator[storage.TorchSample], len(pids))
	for i, pid := range pids {
		its[i] = db.TorchSamples(run, gpu, pid, storage.MinTime, storage.MaxTime)
	}
	return merge.New(func(s storage.TorchSample) int64 { return s.T }, its...)
}
