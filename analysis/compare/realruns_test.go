package compare

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/memrec/memrec/testsupport/analysistest"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// TestLargestBatchOnRealRuns predicts the largest batch from real runs at
// three small batch sizes and checks it against the limit found by
// bisection on the same H200: without headroom never above the largest
// batch that ran and within 30 % below it, with 5 % headroom no more than
// it. How far below is logged; TestTracelessResNet18WithinTenPercent holds
// ResNet-18 to within 10 % (docs/analysis.md, "The allowance without a
// trace or the largest segment").
func TestLargestBatchOnRealRuns(t *testing.T) {
	truth := fixtures.ReadTruth(t)
	for model, files := range map[string][]string{"r18": fixtures.H200R18, "gpt": fixtures.H200GPT} {
		inputs := map[string][]byte{}
		for _, f := range files {
			inputs[f] = fixtures.Read(t, f)
		}
		list := slices.Collect(maps.Values(importFixtures(t, inputs)))
		c := fitByBatch(t, 0.05, list...)
		b, lim := c.By, truth.Limits[model]
		if lim.Largest == 0 || b.Basis != "step_peak_allocated" || b.MaxFittingValue == nil || b.MaxFittingValueNoHeadroom == nil {
			t.Fatalf("%s: limit %+v, by %+v", model, lim, b)
		}
		p, h := *b.MaxFittingValueNoHeadroom, *b.MaxFittingValue
		t.Logf("%s: predicted %v (with headroom %v), largest that ran %d; %s; %s", model, p, h, lim.Largest, b.BasisWords, b.IntervalWords)
		// Never above the limit. These runs' probe did not measure the
		// allocator's largest segment: the room stranded in split segments
		// a unit of the batch bounds it (traceless.go).
		if b.AllowanceBasis != "inactive_split" || p < 0.7*float64(lim.Largest) || p > float64(lim.Largest) {
			t.Errorf("%s: predicted %v without headroom (%s), the largest batch that ran is %d", model, p, b.AllowanceBasis, lim.Largest)
		}
		if h > float64(lim.Largest) {
			t.Errorf("%s: predicted %v with headroom, but %d is the largest batch that ran", model, h, lim.Largest)
		}
		if model != "r18" {
			continue
		}
		// The run that died at batch 7728 is not a point of the fit: the
		// prediction stays, and the statement names the failure.
		oom := importFixtures(t, map[string][]byte{fixtures.H200OOM: fixtures.Read(t, fixtures.H200OOM)})
		list = slices.AppendSeq(list, maps.Values(oom))
		c = fitByBatch(t, 0.05, list...)
		if f := c.By.Failed; len(f) != 1 || f[0].Value != 7728 || len(c.By.Points) != 3 || *c.By.MaxFittingValueNoHeadroom != p ||
			!strings.Contains(c.By.Statement, "ran out of memory at batch_size=7728") {
			t.Errorf("with the OOM run: failed %+v, %d points, %v without headroom: %s", f, len(c.By.Points), analysistest.Deref(c.By.MaxFittingValueNoHeadroom), c.By.Statement)
		}
	}
}
