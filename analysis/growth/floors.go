package growth

import "math"

// FloorReducer takes a series' floors one at a time, in time order, and
// keeps only what the growth rule reads of them: the lowest floor of each
// block of reduceBlock(n, maxTrendPoints) (reduce's points, against x and
// against seconds since the start), how many blocks begin in the warm-up,
// and the first and last floor. A series that is judged and not kept is
// then never held whole: a week of steps is millions of floors a series.
// Not safe for concurrent use.
type FloorReducer struct {
	k, left int                  // floors a block, and left in the current one
	x       func(at int) float64 // the x of the floor Add took at at
	startNS int64
	warm    Warmup
	lo      int64 // the lowest floor of the current block
	x0, xt  []float64
	y       []float64
	// Of the floors so far: how many (counted a block at a time), how
	// many blocks begin at or before the warm-up's end, the first one's
	// time, and the last one's time and bytes.
	n, warmBlocks   int
	firstNS, lastNS int64
	lastBytes       int64
}

// NewFloorReducer readies a FloorReducer for n floors (all it will be
// given), which x tells the x of (the floor Add took at at, called once
// a block), judged against warm-up w; startNS is the run's start.
func NewFloorReducer(n int, x func(at int) float64, w Warmup, startNS int64) *FloorReducer {
	return newFloorReducer(n, maxTrendPoints, x, w, startNS)
}

func newFloorReducer(n, max int, x func(at int) float64, w Warmup, startNS int64) *FloorReducer {
	k := reduceBlock(n, max)
	m := n/k + 1
	return &FloorReducer{k: k, x: x, startNS: startNS, warm: w,
		x0: make([]float64, 0, m), xt: make([]float64, 0, m), y: make([]float64, 0, m)}
}

// Add takes the next floor, bytes at time tns; at is what x is called
// with, where the floor begins a block.
func (r *FloorReducer) Add(at int, tns, bytes int64) {
	if r.left == 0 {
		r.startBlock(at, tns)
	}
	r.left--
	r.lo = min(r.lo, bytes)
	r.lastNS, r.lastBytes = tns, bytes
}

// startBlock ends the block before (its lowest is its y) and begins one
// at the floor at at, at time tns.
func (r *FloorReducer) startBlock(at int, tns int64) {
	r.endBlock()
	if r.n == 0 {
		r.firstNS = tns
	}
	if tns <= r.warm.EndNS {
		r.warmBlocks++
	}
	r.x0, r.xt = append(r.x0, r.x(at)), append(r.xt, float64(tns-r.startNS)/1e9)
	r.left, r.lo = r.k, math.MaxInt64
	r.n += r.k // counted a block at a time; Growth takes off what was left
}

func (r *FloorReducer) endBlock() {
	if len(r.y) < len(r.x0) {
		r.y = append(r.y, float64(r.lo))
	}
}

// Growth is GrowthOfFloors of the floors Add took, which came in time
// order. The rule skips the blocks that begin in the warm-up: those whose
// first floor is at or before its end, as many as a skip of
// warmBlocks·k floors skips.
func (r *FloorReducer) Growth(quantity string, perStep bool) Growth {
	skip := -1
	if r.warm.ByEpoch {
		skip = r.warmBlocks * r.k
	}
	return r.growth(quantity, perStep, skip)
}

// growth applies the growth rule to the reduced floors, of which skip
// are the warm-up's (-1: the series settles on its own).
func (r *FloorReducer) growth(quantity string, perStep bool, skip int) Growth {
	r.endBlock()
	n := r.n - r.left
	x, xt, y := r.x0, r.xt, r.y
	if !perStep {
		x = xt
	}
	gf := growthOfReduced(x, y, n, skip, minLeakGrowth)
	g := Growth{Quantity: quantity, Trend: gf.kind.String(), kind: gf.kind, fit: gf.fit, perStep: perStep,
		Points: gf.fit.N, SkippedWarmup: gf.skip, JumpsRemoved: gf.jumps, short: tooShortToTell(n, r.firstNS, r.lastNS, perStep)}
	if n > 0 {
		g.lastBytes = r.lastBytes
	}
	if gf.kind == growthTooFew || gf.kind == growthStartup {
		g.Points = max(0, gf.n-gf.skip)
		return g
	}
	// The same points against time: reduced by the same blocks (their
	// minima, at their first point), the same jumps set aside.
	g.perHour = fitPoints(xt[gf.skip:], gf.y[gf.skip:])
	g.GrowthBytes = f64(gf.growth)
	g.PValue = f64(gf.fit.P)
	g.SlopeBytesPerHour = f64(g.perHour.Slope * 3600)
	g.CILowBytesPerHour, g.CIHighBytesPerHour = f64(g.perHour.Lo*3600), f64(g.perHour.Hi*3600)
	if perStep {
		g.SlopeBytesPerStep = f64(gf.fit.Slope)
		g.CILowBytesPerStep, g.CIHighBytesPerStep = f64(gf.fit.Lo), f64(gf.fit.Hi)
	}
	return g
}

// GrowthOfFloors applies the growth rule to floors, against steps when
// perStep (X is the step) and against seconds since start for the slope
// per hour.
func GrowthOfFloors(quantity string, floors []FloorPoint, w Warmup, perStep bool, startNS int64) Growth {
	r := NewFloorReducer(len(floors), func(i int) float64 { return floors[i].X }, w, startNS)
	for i, f := range floors {
		r.Add(i, f.TNS, f.Bytes)
	}
	return r.growth(quantity, perStep, w.skipOf(floors))
}
