package growth

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/memrec/memrec/storage"
)

// growthCase is one shape of analysis/testdata/growth_reference.json: its
// points and what the independent Python implementation of the growth
// rule finds (`python3 analysis/testdata/trend_reference.py --growth`).
type growthCase struct {
	X, Y []float64
	Want struct {
		Kind             string
		Skip, Jumps      int
		Points           int
		Slope, Lo, Hi, P *float64
	}
}

func readGrowthCases(t *testing.T) map[string]growthCase {
	t.Helper()
	b, err := os.ReadFile("../testdata/growth_reference.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases map[string]growthCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 10 {
		t.Fatalf("%d growth cases", len(cases))
	}
	return cases
}

func TestGrowthRuleAgainstReference(t *testing.T) {
	t.Parallel()
	for name, c := range readGrowthCases(t) {
		g := growthOf(c.X, c.Y, -1)
		if g.kind.String() != c.Want.Kind || g.skip != c.Want.Skip || g.jumps != c.Want.Jumps {
			t.Errorf("%s: %s, %d warm-up points, %d jumps; reference %s, %d, %d", name, g.kind, g.skip, g.jumps, c.Want.Kind, c.Want.Skip, c.Want.Jumps)
			continue
		}
		if c.Want.Slope == nil {
			continue
		}
		if g.fit.N != c.Want.Points {
			t.Errorf("%s: %d points fitted, reference %d", name, g.fit.N, c.Want.Points)
		}
		for _, f := range []struct {
			what      string
			got, want float64
		}{{"slope", g.fit.Slope, *c.Want.Slope}, {"lo", g.fit.Lo, *c.Want.Lo}, {"hi", g.fit.Hi, *c.Want.Hi}, {"p", g.fit.P, *c.Want.P}} {
			if !near(f.got, f.want) {
				t.Errorf("%s: %s = %v, reference %v", name, f.what, f.got, f.want)
			}
		}
	}
}

// TestGrowthRuleWhateverTheQuantity plants each shape in allocated,
// reserved and device used in turn (the others flat) and in device used
// alone (a run without probe): the rule finds the same for each, and the
// verdict names what grows.
func TestGrowthRuleWhateverTheQuantity(t *testing.T) {
	t.Parallel()
	grows := map[string]Verdict{"allocated": VerdictLeak, "reserved": VerdictCacheGrowth, "device_used": VerdictUnseenGrowth}
	gpu := storage.GPU{TotalBytes: 140 << 30}
	run := storage.Run{StartNS: 1e18}
	for name, c := range readGrowthCases(t) {
		floors := func(shape bool) []FloorPoint {
			var out []FloorPoint
			for i, x := range c.X {
				v := c.Y[i]
				if !shape {
					v = 4 << 30
				}
				out = append(out, FloorPoint{X: x, TNS: run.StartNS + int64(x*1e8), Bytes: int64(v)})
			}
			return out
		}
		for _, q := range []string{"allocated", "reserved", "device_used"} {
			var series []floorSeries
			for _, s := range []string{"allocated", "reserved", "device_used"} {
				series = append(series, floorSeries{s, floors(s == q)})
			}
			l := judgeLeak(series, Warmup{}, "step", run, gpu, 0)
			var got *Growth
			for i := range l.Growth {
				if l.Growth[i].Quantity == q {
					got = &l.Growth[i]
				}
			}
			if got == nil || got.Trend != c.Want.Kind {
				t.Errorf("%s in %s: %+v, want %s", name, q, got, c.Want.Kind)
				continue
			}
			want := VerdictNoLeak
			switch {
			case c.Want.Kind == "grows":
				want = grows[q]
			case q != "allocated":
			case c.Want.Kind == "startup":
				want = VerdictStartup
			case c.Want.Kind == "too_few_points":
				want = VerdictInsufficient
			}
			if q != "allocated" && c.Want.Kind == "too_few_points" {
				want = VerdictInsufficient // the flat allocated series is as short
			}
			if l.Kind != want || l.Verdict != want.Legacy() || (want.Grows() != (l.SlopeBytesPerStep != nil && l.TimeToFullS != nil)) {
				t.Errorf("%s in %s: %s (%s), slope %v, time to full %v; want %s", name, q, l.Kind, l.Reason, l.SlopeBytesPerStep, l.TimeToFullS, want)
			}
		}
		l := judgeLeak([]floorSeries{{"device_used", floors(true)}}, Warmup{}, "step", run, gpu, 0)
		want := map[string]Verdict{"grows": VerdictLeak, "flat": VerdictNoLeak, "startup": VerdictStartup, "too_few_points": VerdictInsufficient}[c.Want.Kind]
		if l.Kind != want {
			t.Errorf("%s in device used without a probe: %s, want %s", name, l.Kind, want)
		}
	}
}

// TestReservedGrowingWithThePeak: reserved memory that grows because the
// step's peak does (longer inputs: the job needs more) is not cache growth,
// nor is reserved whose cache beyond the largest peak so far grows more
// slowly than that peak (expandable segments under a length curriculum);
// reserved that grows beyond the largest peak, faster than it, is.
func TestReservedGrowingWithThePeak(t *testing.T) {
	t.Parallel()
	run := storage.Run{StartNS: 1e18}
	mk := func(f func(i int) int64) []FloorPoint {
		var out []FloorPoint
		for i := range 200 {
			out = append(out, FloorPoint{X: float64(i), TNS: run.StartNS + int64(i)*1e8, Bytes: f(i)})
		}
		return out
	}
	flat := mk(func(int) int64 { return 1 << 30 })
	for _, c := range []struct {
		name         string
		peak, beyond func(i int) int64 // per step; reserved is their sum
		want         Verdict
	}{
		{"with the peak", func(i int) int64 { return 2<<30 + int64(i)<<21 }, func(int) int64 { return 64 << 20 }, VerdictNoLeak},
		{"beyond a flat peak", func(int) int64 { return 2 << 30 }, func(i int) int64 { return 64<<20 + int64(i)<<21 }, VerdictCacheGrowth},
		{"cache slower than the peak", func(i int) int64 { return 2<<30 + int64(i)<<21 }, func(i int) int64 { return 64<<20 + int64(i)<<16 + int64(i%3)<<10 }, VerdictNoLeak},
		{"cache faster than the peak", func(i int) int64 { return 2<<30 + int64(i)<<18 }, func(i int) int64 { return 64<<20 + int64(i)<<21 }, VerdictCacheGrowth},
		{"no step peaks", func(i int) int64 { return 2<<30 + int64(i)<<21 }, nil, VerdictCacheGrowth},
	} {
		reserved := mk(func(i int) int64 {
			if c.beyond == nil {
				return c.peak(i)
			}
			return c.peak(i) + c.beyond(i)
		})
		series := []floorSeries{{"allocated", flat}, {"reserved", reserved}, {"device_used", reserved}}
		if c.beyond != nil {
			series = append(series, floorSeries{"reserved_beyond_peak", mk(c.beyond)}, floorSeries{"step_peak_high", mk(c.peak)})
		}
		l := judgeLeak(series, Warmup{}, "step", run, storage.GPU{TotalBytes: 140 << 30}, 0)
		if l.Kind != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, l.Kind, l.Reason, c.want)
		}
	}
}

// floorSeries is one quantity's floors, for judgeLeak.
type floorSeries struct {
	quantity string
	floors   []FloorPoint
}

// judgeLeak is JudgeGrowths of the growths of series, as a GPU's pass
// makes them.
func judgeLeak(series []floorSeries, w Warmup, per string, run storage.Run, g storage.GPU, lastUsed int64) Leak {
	var growths []Growth
	for _, s := range series {
		growths = append(growths, GrowthOfFloors(s.quantity, s.floors, w, per == "step", run.StartNS))
	}
	return JudgeGrowths(growths, w, per, run, g, lastUsed)
}

// growthOf is growthOfPart with the least growth of a GPU's memory.
func growthOf(x, y []float64, skip int) growthFit { return growthOfPart(x, y, skip, minLeakGrowth) }
