package analysis

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// batchRuns writes runs whose peak device memory is exactly
// 1 GiB + batch × 64 MiB on an 80 GiB GPU.
func batchRuns(g *gen, batches []int, tag func(b int) string) {
	for _, b := range batches {
		g.line(`{"type":"run","name":"bs%d","start_ns":%d,"tags":{"batch_size":%q}}`, b, t0, tag(b))
		g.line(`{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`, int64(80*GiB))
		for i := 0; i < 50; i++ {
			v := int64(GiB) + int64(b)*64*MiB
			if i%10 != 5 {
				v -= 512 * MiB // the peak is reached once in ten samples
			}
			g.line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(i)*1e8, v)
		}
	}
}

func TestFitByBatchSizeExact(t *testing.T) {
	g := &gen{}
	batchRuns(g, []int{16, 32, 64, 96}, func(b int) string { return strconv.Itoa(b) })
	reps := analyzeJSONL(t, g.b.String())
	c, err := Compare([]*Report{reps["bs16"], reps["bs32"], reps["bs64"], reps["bs96"]}, "bs32", "time")
	if err != nil {
		t.Fatal(err)
	}
	if c.Baseline != "bs32" || *c.Runs[2].PeakUsedRatio != float64(GiB+64*64*MiB)/float64(GiB+32*64*MiB) {
		t.Fatalf("ratios: %+v", c.Runs[2])
	}
	if err := FitByTag(c, "batch_size", 0.05); err != nil {
		t.Fatal(err)
	}
	b := c.By
	if b.Fit.SlopeBytesPerUnit != 64*MiB || b.Fit.InterceptBytes != GiB {
		t.Fatalf("fit %+v", b.Fit)
	}
	// (80 GiB × 0.95 − 1 GiB) / 64 MiB = 1200 exactly.
	if b.MaxFittingValue == nil || *b.MaxFittingValue != 1200 {
		t.Fatalf("max fitting %v", deref(b.MaxFittingValue))
	}
	if b.Statement != "batch_size up to 1200 fits on Test GPU (80.00 GiB) with 5 % headroom" {
		t.Errorf("statement %q", b.Statement)
	}
}

func TestFitByNonNumericTag(t *testing.T) {
	g := &gen{}
	batchRuns(g, []int{16, 32}, func(b int) string {
		if b == 32 {
			return "big"
		}
		return strconv.Itoa(b)
	})
	reps := analyzeJSONL(t, g.b.String())
	c, _ := Compare([]*Report{reps["bs16"], reps["bs32"]}, "", "")
	err := FitByTag(c, "batch_size", 0.05)
	if !errors.Is(err, ErrTagNotNumber) || !strings.Contains(err.Error(), `run "bs32" has batch_size="big"`) {
		t.Fatal(err)
	}
	if err := FitByTag(c, "lr", 0.05); !errors.Is(err, ErrNoTag) || !strings.Contains(err.Error(), `has no tag "lr"`) {
		t.Fatal(err)
	}
}

func TestCompareLeakAgainstCleanAndRunsWithoutMarks(t *testing.T) {
	g := &gen{rng: rand.New(rand.NewPCG(9, 10))}
	g.train("clean", trainCfg{gpus: 2, epochs: 3, stepsPerEpoch: 40, stepNS: 100e6})
	g.train("leaky", trainCfg{gpus: 1, epochs: 3, stepsPerEpoch: 40, stepNS: 100e6, leak: []int64{8 * MiB}})
	g.train("nomarks", trainCfg{gpus: 1, epochs: 3, stepsPerEpoch: 40, stepNS: 100e6, noMarks: true})
	reps := analyzeJSONL(t, g.b.String())
	c, err := Compare([]*Report{reps["clean"], reps["leaky"], reps["nomarks"]}, "", "step")
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]RunSummary{}
	for _, r := range c.Runs {
		byName[r.Run] = r
	}
	if byName["clean"].LeakVerdict != VerdictNoLeak || byName["leaky"].LeakVerdict != VerdictLeak {
		t.Fatalf("verdicts %v %v", byName["clean"].LeakVerdict, byName["leaky"].LeakVerdict)
	}
	if s := byName["leaky"].SlopeBytesPerStep; s == nil || !within(*s, 8*MiB, 0.02) {
		t.Fatalf("slope %v", deref(s))
	}
	if r := byName["leaky"].PeakUsedRatio; r == nil || *r <= 1 {
		t.Errorf("leaky peak ratio %v", deref(r))
	}
	if byName["nomarks"].StepTimeS != nil || byName["nomarks"].EpochDeltaBytes != nil {
		t.Errorf("figures from marks that do not exist: %+v", byName["nomarks"])
	}
	notes := strings.Join(c.Notes, "\n")
	if !strings.Contains(notes, "different numbers of GPUs") || !strings.Contains(notes, "no step marks in [nomarks]") {
		t.Errorf("notes: %s", notes)
	}
	if _, err := Compare(c.Reports, "missing", "step"); !errors.Is(err, ErrUnknownBaseline) {
		t.Errorf("unknown baseline: %v", err)
	}
	if _, err := Compare(c.Reports, "", "sideways"); !errors.Is(err, ErrBadAlign) {
		t.Errorf("unknown alignment: %v", err)
	}
}
