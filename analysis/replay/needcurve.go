package replay

import (
	"errors"
	"math"
	"slices"
	"sort"
	"strings"
)

// NeedCurve projects what a job needs (bytes) at a value of a numeric
// setting (batch size, sequence length, image size) from runs at a few
// values, and says how sure the projection is.
//
// A least-squares line alone hides what the runs show: on real jobs the
// cost of one more unit is not quite the same between small values and
// large ones (fixed workspaces amortised, allocator rounding, attention
// that grows with the square of a sequence). So the curve keeps three
// readings of the runs and projects each:
//
//   - the line through the largest value with the marginal cost between
//     the two largest values (what the job costs where it was last seen:
//     the middle of the interval);
//   - the steepest: the line through the largest value with the highest
//     marginal cost between neighbouring values, the least-squares line,
//     and, where the marginal cost rose from the smallest values to the
//     largest, the parabola through the three largest points (that rise
//     carried on); the highest of them is the pessimistic end. A batch
//     size (PerSample) is not carried on so: every layer's activations,
//     gradients and workspaces per sample are the same at any batch, so a
//     rising marginal cost between small batches is a bounded effect
//     (workspaces chosen per shape, allocator rounding), and its parabola
//     carried far puts the limit well below where the job runs (see
//     bench/README.md, "Figures behind the code's constants"). A
//     setting whose cost per unit truly grows (a sequence length without
//     fused attention, an image's side) keeps it;
//   - the flattest: the lowest marginal cost between neighbouring values
//     and the least-squares line, whichever is lower: the optimistic end.
//
// With two values the three coincide: two runs cannot show a curvature,
// and the interval is then only the allowance's.
type NeedCurve struct {
	// Values are the distinct values measured, ascending; Bytes the need
	// at each (the highest of the runs at that value).
	Values []float64 `json:"values"`
	Bytes  []float64 `json:"bytes"`
	Line   Fit       `json:"line"` // least squares over every point
	// MarginalBytesPerUnit is the cost of one unit between the two largest
	// values; MinMarginal and MaxMarginal the lowest and highest between
	// neighbouring values.
	MarginalBytesPerUnit float64 `json:"marginal_bytes_per_unit"`
	MinMarginal          float64 `json:"min_marginal_bytes_per_unit"`
	MaxMarginal          float64 `json:"max_marginal_bytes_per_unit"`
	// Quadratic is a + b·v + c·v² through the three largest points, set
	// when the marginal cost rose (c > 0).
	Quadratic *[3]float64 `json:"quadratic,omitempty"`
	// Power is k where the need grew faster than the value between the two
	// largest points (bytes ∝ value^k there, k > 1), for a setting other
	// than a batch size: the pessimistic end carries it on, as two points
	// can show (a sequence length's attention scores grow with its square).
	Power float64 `json:"power,omitempty"`
}

// ErrFlatNeed is NewNeedCurve's error when the need does not grow with
// the value: nothing can be projected.
var ErrFlatNeed = errors.New("the need does not grow with the value")

// ErrTooFewTagValues: a need is projected from at least two values.
var ErrTooFewTagValues = errors.New("need runs with at least two different values")

// NewNeedCurve fits the curve to the need measured at each value; values
// may repeat (the highest need at a value is kept). It needs two distinct
// values (ErrTooFewTagValues) and a need that grows between the two
// largest (ErrFlatNeed).
func NewNeedCurve(values, bytes []float64) (NeedCurve, error) {
	return newNeedCurve(values, bytes, false)
}

// NewBatchNeedCurve is NewNeedCurve for a batch size: the need per
// sample does not grow with the batch, so a rising marginal cost is not
// carried on (no Quadratic).
func NewBatchNeedCurve(values, bytes []float64) (NeedCurve, error) {
	return newNeedCurve(values, bytes, true)
}

// IsBatchTag says whether a tag names a batch size (batch_size, batch,
// bs, micro_batch_size, per_device_train_batch_size, ...): a setting whose
// cost per unit is one sample's.
func IsBatchTag(tag string) bool {
	t := strings.ToLower(tag)
	return t == "bs" || strings.Contains(t, "batch")
}

func newNeedCurve(values, bytes []float64, perSample bool) (NeedCurve, error) {
	byValue := map[float64]float64{}
	for i, v := range values {
		if b, ok := byValue[v]; !ok || bytes[i] > b {
			byValue[v] = bytes[i]
		}
	}
	var c NeedCurve
	for v := range byValue {
		c.Values = append(c.Values, v)
	}
	sort.Float64s(c.Values)
	for _, v := range c.Values {
		c.Bytes = append(c.Bytes, byValue[v])
	}
	n := len(c.Values)
	if n < 2 {
		return c, ErrTooFewTagValues
	}
	c.Line = LeastSquares(c.Values, c.Bytes)
	c.MinMarginal, c.MaxMarginal = math.Inf(1), math.Inf(-1)
	for i := 1; i < n; i++ {
		m := (c.Bytes[i] - c.Bytes[i-1]) / (c.Values[i] - c.Values[i-1])
		c.MinMarginal, c.MaxMarginal = min(c.MinMarginal, m), max(c.MaxMarginal, m)
		c.MarginalBytesPerUnit = m
	}
	if c.MarginalBytesPerUnit <= 0 {
		return c, ErrFlatNeed
	}
	if !perSample {
		c.Power = power(c.Values[n-2], c.Bytes[n-2], c.Values[n-1], c.Bytes[n-1])
	}
	if n >= 3 && !perSample {
		x0, x1, x2 := c.Values[n-3], c.Values[n-2], c.Values[n-1]
		y0, y1, y2 := c.Bytes[n-3], c.Bytes[n-2], c.Bytes[n-1]
		m01, m12 := (y1-y0)/(x1-x0), (y2-y1)/(x2-x1)
		first := (c.Bytes[1] - c.Bytes[0]) / (c.Values[1] - c.Values[0])
		if q := (m12 - m01) / (x2 - x0); q > 0 && m12 > first {
			b := m01 - q*(x0+x1)
			c.Quadratic = &[3]float64{y0 - b*x0 - q*x0*x0, b, q}
		}
	}
	return c, nil
}

// power is k where y1/y0 = (x1/x0)^k with k > 1, else 0.
func power(x0, y0, x1, y1 float64) float64 {
	if x0 <= 0 || y0 <= 0 || x1 <= x0 || y1 <= y0 {
		return 0
	}
	if k := math.Log(y1/y0) / math.Log(x1/x0); k > 1 && finite(k) {
		return k
	}
	return 0
}

// Largest is the largest value measured.
func (c NeedCurve) Largest() float64 { return c.Values[len(c.Values)-1] }

// line returns the need at v on the line through the largest point with
// slope m.
func (c NeedCurve) line(m, v float64) float64 {
	n := len(c.Values) - 1
	return c.Bytes[n] + m*(v-c.Values[n])
}

// At returns the need at v: at the optimistic end, in the middle and at
// the pessimistic end of the interval (see NeedCurve).
func (c NeedCurve) At(v float64) (low, mid, high float64) {
	lsq := c.Line.InterceptBytes + c.Line.SlopeBytesPerUnit*v
	mid = c.line(c.MarginalBytesPerUnit, v)
	low = min(mid, c.line(c.MinMarginal, v), lsq)
	high = max(mid, c.line(c.MaxMarginal, v), lsq)
	if q := c.Quadratic; q != nil && v > c.Largest() {
		high = max(high, q[0]+q[1]*v+q[2]*v*v)
	}
	if n := len(c.Values) - 1; c.Power > 1 && v > c.Largest() {
		high = max(high, c.Bytes[n]*math.Pow(v/c.Values[n], c.Power))
	}
	return low, mid, high
}

// Plus returns the curve of the need plus a + b·v at every value v: each
// reading with b added to its cost of a unit (a line stays a line).
func (c NeedCurve) Plus(a, b float64) NeedCurve {
	c.Bytes = slices.Clone(c.Bytes)
	for i, v := range c.Values {
		c.Bytes[i] += a + b*v
	}
	c.Line.InterceptBytes += a
	c.Line.SlopeBytesPerUnit += b
	c.MarginalBytesPerUnit += b
	c.MinMarginal += b
	c.MaxMarginal += b
	if q := c.Quadratic; q != nil {
		c.Quadratic = &[3]float64{q[0] + a, q[1] + b, q[2]}
	}
	if n := len(c.Values) - 1; c.Power > 0 && n >= 1 {
		c.Power = power(c.Values[n-1], c.Bytes[n-1], c.Values[n], c.Bytes[n])
	}
	return c
}

// End picks one end of the interval, or its middle.
type End int

// The ends of a NeedCurve's interval.
const (
	Optimistic End = iota
	Middle
	Pessimistic
)

// Solve returns the largest value whose need at end e is at most avail
// bytes (not rounded), or false when the need there does not grow. Each
// reading is solved exactly: the pessimistic end, the highest of them, is
// reached at the smallest of their answers, the optimistic end at the
// largest.
func (c NeedCurve) Solve(avail float64, e End) (float64, bool) {
	n := len(c.Values) - 1
	xn, yn := c.Values[n], c.Bytes[n]
	onLine := func(m float64) (float64, bool) {
		if m <= 0 {
			return 0, false
		}
		return xn + (avail-yn)/m, true
	}
	var answers []float64
	add := func(v float64, ok bool) {
		if ok && finite(v) {
			answers = append(answers, v)
		}
	}
	add(onLine(c.MarginalBytesPerUnit))
	if e == Middle || avail < yn {
		// Below the largest point only the middle line holds.
		return onLine(c.MarginalBytesPerUnit)
	}
	if l := c.Line; l.SlopeBytesPerUnit > 0 {
		add((avail-l.InterceptBytes)/l.SlopeBytesPerUnit, true)
	}
	if e == Optimistic {
		add(onLine(c.MinMarginal))
		return slices.Max(answers), true
	}
	add(onLine(c.MaxMarginal))
	if q := c.Quadratic; q != nil {
		a, b, cc := q[0]-avail, q[1], q[2]
		add((-b+math.Sqrt(b*b-4*cc*a))/(2*cc), b*b-4*cc*a >= 0)
	}
	if c.Power > 1 && yn > 0 {
		add(xn*math.Pow(avail/yn, 1/c.Power), true)
	}
	return slices.Min(answers), true
}
