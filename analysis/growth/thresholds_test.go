package growth

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// leakThresholds are leak.go's constants by name, each as docs/analysis.md
// writes its value; py names the Python reference's variable, if any.
var leakThresholds = []struct {
	name, doc, py string
	value         float64
}{
	{"leakP", "0.01", "P_MAX", leakP},
	{"minLeakGrowth", wholeBytes(minLeakGrowth), "MIN_GROWTH", minLeakGrowth},
	{"minSiteGrowth", wholeBytes(minSiteGrowth), "", minSiteGrowth},
	{"MinSteadyPoints", strconv.Itoa(MinSteadyPoints), "MIN_POINTS", MinSteadyPoints},
	{"settleMADs", strconv.Itoa(settleMADs), "SETTLE_MADS", settleMADs},
	{"settleShare", strconv.FormatFloat(settleShare*100, 'g', -1, 64) + " %", "SETTLE_SHARE", settleShare},
	{"SettleMin", wholeBytes(SettleMin), "SETTLE_MIN", SettleMin},
	{"startupSteps", strconv.Itoa(startupSteps), "", startupSteps},
	{"startupSpanS", strconv.Itoa(startupSpanS) + " s", "", startupSpanS},
}

// TestLeakThresholdsStatedOnce: docs/analysis.md's table of the growth
// rule's thresholds and the Python reference's copies hold leak.go's
// values, so that a threshold changed in leak.go fails here until both
// follow.
func TestLeakThresholdsStatedOnce(t *testing.T) {
	doc, err := os.ReadFile("../../docs/analysis.md")
	if err != nil {
		t.Fatal(err)
	}
	py, err := os.ReadFile("../testdata/trend_reference.py")
	if err != nil {
		t.Fatal(err)
	}
	pyVals := pythonConstants(t, string(py))
	for _, c := range leakThresholds {
		row := regexp.MustCompile("(?m)^ *\\| `" + c.name + "` \\| ([^|]*) \\|")
		m := row.FindAllStringSubmatch(string(doc), -1)
		switch {
		case len(m) != 1:
			t.Errorf("docs/analysis.md: %d rows for %s, want one", len(m), c.name)
		case strings.TrimSpace(m[0][1]) != c.doc:
			t.Errorf("docs/analysis.md: %s is %q, leak.go says %s", c.name, strings.TrimSpace(m[0][1]), c.doc)
		}
		if c.py == "" {
			continue
		}
		if v, ok := pyVals[c.py]; !ok {
			t.Errorf("trend_reference.py: no %s (%s)", c.py, c.name)
		} else if v != c.value {
			t.Errorf("trend_reference.py: %s = %v, leak.go's %s = %v", c.py, v, c.name, c.value)
		}
	}
}

// pythonConstants reads the reference's top-level assignments of numbers
// ("A = 1 << 20", "A, B = 4, 0.01"): integers, floats and left shifts.
func pythonConstants(t *testing.T, src string) map[string]float64 {
	t.Helper()
	vals := map[string]float64{}
	assign := regexp.MustCompile(`(?m)^([A-Z_][A-Z0-9_, ]*?) = ([0-9.<, ]+?)\s*(?:#.*)?$`)
	for _, m := range assign.FindAllStringSubmatch(src, -1) {
		names, exprs := strings.Split(m[1], ","), strings.Split(m[2], ",")
		if len(names) != len(exprs) {
			continue
		}
		for i, e := range exprs {
			v, err := pythonNumber(strings.TrimSpace(e))
			if err != nil {
				t.Fatalf("trend_reference.py: %s: %v", m[0], err)
			}
			vals[strings.TrimSpace(names[i])] = v
		}
	}
	return vals
}

func pythonNumber(e string) (float64, error) {
	if a, b, ok := strings.Cut(e, "<<"); ok {
		x, err := strconv.ParseInt(strings.TrimSpace(a), 10, 64)
		if err != nil {
			return 0, err
		}
		n, err := strconv.ParseUint(strings.TrimSpace(b), 10, 6)
		if err != nil {
			return 0, err
		}
		return float64(x << n), nil
	}
	return strconv.ParseFloat(e, 64)
}

// TestNoGrowthReasonFormatsTheThreshold: the reason of a series that grows
// too little names minLeakGrowth as the docs write it.
func TestNoGrowthReasonFormatsTheThreshold(t *testing.T) {
	small := float64(minLeakGrowth / 2)
	g := &Growth{GrowthBytes: &small, fit: trend{Slope: 1}}
	want := "the steady-state floor grows by less than " + wholeBytes(minLeakGrowth) + " over the run"
	if got := noGrowthReason(g); got != want {
		t.Errorf("reason %q, want %q", got, want)
	}
	for _, tc := range []struct {
		b    int64
		want string
	}{{1 << 20, "1 MiB"}, {4 << 20, "4 MiB"}, {64 << 10, "64 KiB"}, {3 << 19, "1536 KiB"}, {1000, "1000 B"}} {
		if got := wholeBytes(tc.b); got != tc.want {
			t.Errorf("wholeBytes(%d) = %q, want %q", tc.b, got, tc.want)
		}
	}
}
