package report

import (
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/growth"
)

// TestTimeUnitFor: a run's unit changes at three of the next unit, so an
// axis spans at least three of its units and at most a few hundred.
func TestTimeUnitFor(t *testing.T) {
	for _, c := range []struct {
		durationS float64
		want      string
	}{{6, "s"}, {180, "s"}, {181, "min"}, {7200, "min"}, {3 * 3600, "min"}, {3*3600 + 1, "h"}, {86400, "h"}} {
		if got := TimeUnitFor(c.durationS); got.Name != c.want {
			t.Errorf("%g s: %s, want %s", c.durationS, got.Name, c.want)
		}
	}
}

// TestVerdictWords: every verdict's chart title is words, never the JSON
// key with its underscore.
func TestVerdictWords(t *testing.T) {
	for _, v := range []growth.Verdict{growth.VerdictLeak, growth.VerdictCacheGrowth, growth.VerdictUnseenGrowth,
		growth.VerdictStartup, growth.VerdictNoLeak, growth.VerdictInsufficient} {
		if w := verdictText(v); w == "" || strings.Contains(w, "_") {
			t.Errorf("%s: %q", v, w)
		}
	}
}
