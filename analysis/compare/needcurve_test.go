package compare

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// curveRuns compares probe runs at the batches given, each step's peak
// allocated peak(b), on probeBatchRuns' 80 GiB GPU (700 MiB unseen, 600
// MiB reserved by the driver), and fits them against batch_size.
func curveRuns(t *testing.T, batches []int, peak func(b int) int64) *ByTag {
	t.Helper()
	return curveRunsBy(t, "batch_size", batches, peak)
}

// curveRunsBy is curveRuns with the runs' values under another tag.
func curveRunsBy(t *testing.T, tag string, batches []int, peak func(b int) int64) *ByTag {
	t.Helper()
	g := &analysistest.Gen{}
	for _, b := range batches {
		probeRun(g, b, peak(b), 0)
	}
	var names []string
	for _, b := range batches {
		names = append(names, "p"+strconv.Itoa(b))
	}
	return byTagOf(t, strings.ReplaceAll(g.String(), `"batch_size":`, strconv.Quote(tag)+":"), tag, names...)
}

// byTagOf is compare --by tag of the runs named, in that order, from a
// recording's lines.
func byTagOf(t *testing.T, jsonl, tag string, names ...string) *ByTag {
	t.Helper()
	reps := analyzeJSONL(t, jsonl)
	var list []*analysis.Report
	for _, n := range names {
		list = append(list, reps[n])
	}
	c, err := Compare(list, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := FitByTag(c, tag, 0); err != nil {
		t.Fatal(err)
	}
	return c.By
}

// countUp is the largest batch v with need(v) × (1 + allowance) + 700 MiB
// ≤ 80 GiB − 600 MiB, found by counting up from 1: an independent
// reading of the formula the fit solves.
func countUp(need func(v float64) float64, allowance float64) float64 {
	v := 0
	for need(float64(v+1))*(1+allowance)+700*MiB <= 80*GiB-600*MiB {
		v++
	}
	return float64(v)
}

// A job whose cost per sample falls between small batches (a fixed
// workspace amortised): the least-squares line, which averages the two
// marginal costs and pulls its intercept down, is not the pessimistic
// end; the line through the largest run with the steepest marginal cost
// is. The prediction without headroom is that line's, the middle the
// line with the last marginal cost and half the allowance, the optimistic
// end the flattest without allowance, and the statement says how far it
// reaches.
func TestNeedCurveConcaveTakesTheSteepestMarginal(t *testing.T) {
	peaks := map[int]int64{4: 1200 * MiB, 8: 1600 * MiB, 16: 2300 * MiB} // 100 MiB a sample, then 87.5
	b := curveRuns(t, []int{4, 8, 16}, func(v int) int64 { return peaks[v] })
	steep := func(v float64) float64 { return 2300*MiB + 100*MiB*(v-16) }
	last := func(v float64) float64 { return 2300*MiB + 87.5*MiB*(v-16) }
	want := countUp(steep, replay.AllocatorAllowance)
	if b.MaxFittingValueNoHeadroom == nil || *b.MaxFittingValueNoHeadroom != want {
		t.Fatalf("no headroom %v, want %v (the steepest marginal cost, 100 MiB a sample)", analysistest.Deref(b.MaxFittingValueNoHeadroom), want)
	}
	// The least-squares line would have promised more.
	lsq := func(v float64) float64 { return b.NeedFit.InterceptBytes + b.NeedFit.SlopeBytesPerUnit*v }
	if countUp(lsq, replay.AllocatorAllowance) <= want {
		t.Fatalf("least squares says %v, not above %v: the test does not test the curvature", countUp(lsq, replay.AllocatorAllowance), want)
	}
	if m := b.MaxFittingValueMiddle; m == nil || *m != countUp(last, replay.AllocatorAllowance/2) {
		t.Errorf("middle %v, want %v (the last marginal cost, half the allowance)", analysistest.Deref(m), countUp(last, replay.AllocatorAllowance/2))
	}
	if o := b.MaxFittingValueOptimistic; o == nil || *o != countUp(last, 0) {
		t.Errorf("optimistic %v, want %v", analysistest.Deref(o), countUp(last, 0))
	}
	if b.Need == nil || b.Need.Quadratic != nil || math.Abs(b.Extrapolation-want/16) > 1e-9 {
		t.Fatalf("curve %+v, extrapolation %v", b.Need, b.Extrapolation)
	}
	reach := "projected from 16 to " + strconv.Itoa(int(want)) + ", "
	if !strings.Contains(b.IntervalWords, reach) || !strings.Contains(b.IntervalWords, fmt.Sprintf("+ %.1f %%", 100*replay.AllocatorAllowance)) {
		t.Errorf("interval words %q lack %q", b.IntervalWords, reach)
	}
	// LargestFitting with the GPU's memory is the prediction; with 10 GiB
	// less (what a caller asks when memory would be lost to something
	// else) it is what fits in that.
	if v := b.LargestFitting(b.Available(0)); v == nil || *v != want {
		t.Errorf("LargestFitting %v, want %v", analysistest.Deref(v), want)
	}
	less := countUp(func(v float64) float64 { return steep(v) + 10*GiB/(1+replay.AllocatorAllowance) }, replay.AllocatorAllowance)
	if v := b.LargestFitting(b.Available(0) - 10*GiB); v == nil || math.Abs(*v-less) > 1 {
		t.Errorf("LargestFitting with 10 GiB less %v, want %v", analysistest.Deref(v), less)
	}
}

// A need whose marginal cost rises (attention growing with the square of
// a sequence): the parabola through the three runs is carried on, and it
// is below every straight line's answer. Over a batch size the same
// readings are not carried on: a sample costs the same at any batch, and
// the steepest line decides.
func TestNeedCurveConvexCarriesTheRiseOn(t *testing.T) {
	// need(v) = 1 GiB + 10 MiB·v + 0.05 MiB·v²
	need := func(v float64) float64 { return GiB + 10*MiB*v + 0.05*MiB*v*v }
	steepLine := func(v float64) float64 { return need(64) + (need(64)-need(32))/32*(v-64) }
	batch := curveRuns(t, []int{16, 32, 64}, func(v int) int64 { return int64(need(float64(v))) })
	if batch.Need == nil || batch.Need.Quadratic != nil || batch.MaxFittingValueNoHeadroom == nil ||
		*batch.MaxFittingValueNoHeadroom != countUp(steepLine, replay.AllocatorAllowance) || strings.Contains(batch.IntervalWords, "carried on") {
		t.Fatalf("batch_size: curve %+v, %v (%s), want the steepest line's %v", batch.Need, analysistest.Deref(batch.MaxFittingValueNoHeadroom), batch.IntervalWords, countUp(steepLine, replay.AllocatorAllowance))
	}
	b := curveRunsBy(t, "seq_len", []int{16, 32, 64}, func(v int) int64 { return int64(need(float64(v))) })
	if b.Need == nil || b.Need.Quadratic == nil {
		t.Fatalf("curve %+v: no parabola", b.Need)
	}
	want := countUp(need, replay.AllocatorAllowance)
	if v := b.MaxFittingValueNoHeadroom; v == nil || math.Abs(*v-want) > 1 {
		t.Fatalf("no headroom %v, want %v", analysistest.Deref(v), want)
	}
	steepest := countUp(steepLine, replay.AllocatorAllowance)
	if want >= steepest {
		t.Fatalf("the parabola's %v is not below the steepest line's %v: the test does not test it", want, steepest)
	}
	if !strings.Contains(b.IntervalWords, "the marginal cost rose, carried on") {
		t.Errorf("interval words %q", b.IntervalWords)
	}
}

// Two values show no curvature: the three readings are one line.
func TestNeedCurveTwoValues(t *testing.T) {
	c, err := replay.NewNeedCurve([]float64{8, 16, 16}, []float64{1 * GiB, 2 * GiB, 1.5 * GiB})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Values) != 2 || c.Bytes[1] != 2*GiB {
		t.Fatalf("points %v %v: the highest need at a value is kept", c.Values, c.Bytes)
	}
	for _, e := range []replay.End{replay.Optimistic, replay.Middle, replay.Pessimistic} {
		if v, ok := c.Solve(10*GiB, e); !ok || math.Abs(v-80) > 1e-9 {
			t.Errorf("end %d: %v %v, want 80", e, v, ok)
		}
	}
	if _, err := replay.NewNeedCurve([]float64{8, 16}, []float64{2 * GiB, 1 * GiB}); err != replay.ErrFlatNeed {
		t.Errorf("falling need: %v", err)
	}
}

// A setting other than a batch size whose need grew faster than the value
// between two runs (a sequence length: 1 to 3.5 GiB from 1024 to 2048,
// the power 1.81) is carried on with that power at the pessimistic end,
// as two points can show; a batch size's is not, nor a need that grew
// less than in proportion.
func TestNeedCurveTwoValuesThatGrewFaster(t *testing.T) {
	c, err := replay.NewNeedCurve([]float64{1024, 2048}, []float64{1 * GiB, 3.5 * GiB})
	if err != nil {
		t.Fatal(err)
	}
	k := math.Log(3.5) / math.Log(2)
	if math.Abs(c.Power-k) > 1e-9 {
		t.Fatalf("power %v, want %v", c.Power, k)
	}
	want := 3.5 * GiB * math.Pow(2, k)
	if _, mid, high := c.At(4096); math.Abs(high-want) > 1 || mid >= high {
		t.Errorf("at 4096: middle %v, pessimistic %v, want %v", mid, high, want)
	}
	if v, ok := c.Solve(want, replay.Pessimistic); !ok || math.Abs(v-4096) > 1e-6 {
		t.Errorf("pessimistic solve %v %v, want 4096", v, ok)
	}
	if v, _ := c.Solve(want, replay.Middle); v <= 4096 {
		t.Errorf("middle %v: the line of the last marginal cost reaches further", v)
	}
	if b, _ := replay.NewBatchNeedCurve([]float64{1024, 2048}, []float64{1 * GiB, 3.5 * GiB}); b.Power != 0 {
		t.Errorf("batch size: power %v", b.Power)
	}
	if l, _ := replay.NewNeedCurve([]float64{8, 16}, []float64{1 * GiB, 1.8 * GiB}); l.Power != 0 {
		t.Errorf("less than in proportion: power %v", l.Power)
	}
	by := curveRunsBy(t, "seq_len", []int{1024, 2048}, func(b int) int64 { return int64(GiB * math.Pow(float64(b)/1024, k)) })
	if !strings.Contains(by.IntervalWords, "to the power 1.81, carried on") {
		t.Errorf("interval words %q", by.IntervalWords)
	}
}
