package analysis

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// TestBudgetAtThePeakIsTheTruth checks every part of the budget against
// the job model it was generated from, and that they add up to device used.
func TestBudgetAtThePeakIsTheTruth(t *testing.T) {
	j := analysistest.Job(2)
	rep := analyzeJSONL(t, analysistest.WatchedRun(j, 30, "bfloat16", "false", true))["w"]
	const last = 29 // every step peaks alike: the budget is the last one's
	for gpu, g := range rep.GPUs {
		b := g.Budget
		if b == nil {
			t.Fatalf("GPU %d: no budget", gpu)
		}
		a, s := j.At(gpu, last, 1), j.Split(last, 1)
		used := j.Used(gpu, last, 1, true)
		want := map[budget.Part]int64{
			budget.PartParams: s.Params, budget.PartGrads: s.Grads, budget.PartOptimizer: j.Optimizer, budget.PartBuffers: 0,
			budget.PartActivations:   j.Activations,
			budget.PartInactiveSplit: a.InactiveSplit,
			budget.PartCachedFree:    a.Reserved - j.Peak(gpu, last) - a.InactiveSplit,
			budget.PartUnseen:        j.Idle + j.Context + j.NCCL,
		}
		var sum int64
		for _, p := range b.Parts {
			w, ok := want[p.Part]
			if !ok || p.Bytes != w {
				t.Errorf("GPU %d %s: %d, want %d (known %v)", gpu, p.Part, p.Bytes, w, ok)
			}
			sum += p.Bytes
			delete(want, p.Part)
		}
		if len(want) > 0 {
			t.Errorf("GPU %d: parts missing: %v", gpu, want)
		}
		if sum != used || b.TotalBytes != used || b.LeftOverBytes != 0 {
			t.Errorf("GPU %d: parts add up to %d, total %d, left over %d; device used %d", gpu, sum, b.TotalBytes, b.LeftOverBytes, used)
		}
		if b.Step == nil || *b.Step != last || !b.Watched || b.Ranks != 2 {
			t.Errorf("GPU %d: step %v watched %v ranks %d", gpu, b.Step, b.Watched, b.Ranks)
		}
	}
}

// TestAdviceArithmetic checks each remedy's saving against its rule,
// computed here from the job model, and the ranking.
func TestAdviceArithmetic(t *testing.T) {
	j := analysistest.Job(2)
	rep := analyzeJSONL(t, analysistest.WatchedRun(j, 30, "float32", "false", true))["w"]
	b := rep.GPUs[0].Budget
	s := j.Split(29, 1)
	act, n := j.Activations, s.ParamCount
	unseen := j.Idle + j.Context + j.NCCL
	fixed := s.Params + s.Grads + j.Optimizer
	// The batch that fits: ((total − driver − unseen)/(1+allowance) − F) / (A·factor/64).
	fit := func(fx int64, factor float64) float64 {
		return math.Floor((float64(j.Total-1000-unseen)/(1+replay.AllocatorAllowance) - float64(fx)) / (float64(act) * factor / 64))
	}
	type want struct {
		lo, hi int64
		batch  float64 // 0: not checked
	}
	wants := map[string]want{
		"gradient_accumulation/2":  {act / 2, act / 2, 2 * fit(fixed, 1)},
		"gradient_accumulation/4":  {act * 3 / 4, act * 3 / 4, 4 * fit(fixed, 1)},
		"bf16_autocast":            {int64(0.25*float64(act)) - 2*n, act / 2, fit(fixed+n, 1-0.375)},
		"activation_checkpointing": {int64(budget.CheckpointLow * float64(act)), int64(budget.CheckpointHigh * float64(act)), fit(fixed, 1-(budget.CheckpointLow+budget.CheckpointHigh)/2)},
		"sgd_momentum":             {j.Optimizer - 4*n, j.Optimizer - 4*n, fit(fixed-(j.Optimizer-4*n), 1)},
		"adam_8bit":                {j.Optimizer - 2*n, j.Optimizer - 2*n, fit(fixed-(j.Optimizer-2*n), 1)},
		"zero1/2":                  {j.Optimizer / 2, j.Optimizer / 2, fit(fixed-j.Optimizer/2, 1)},
		"zero2/2":                  {(j.Optimizer + s.Grads) / 2, (j.Optimizer + s.Grads) / 2, 0},
		"zero3/2":                  {fixed / 2, fixed / 2, 0},
		"expandable_segments":      {0, 0, 0}, // below
		"empty_cache":              {0, 0, 0},
	}
	a := j.At(0, 29, 1)
	split, cached := a.InactiveSplit, a.Reserved-j.Peak(0, 29)-a.InactiveSplit
	prev := int64(math.MaxInt64)
	for _, r := range b.Help {
		key := r.Kind.String()
		if r.N > 0 {
			key += fmt.Sprintf("/%d", r.N)
		}
		w, ok := wants[key]
		if !ok {
			t.Errorf("unexpected remedy %s", key)
			continue
		}
		delete(wants, key)
		switch r.Kind {
		case budget.RemedyExpandableSegments:
			w.lo, w.hi = 0, split+cached // the small pool's splits may all stay
		case budget.RemedyEmptyCache:
			if r.LowersPeak || r.SavedBytes != 0 || !strings.Contains(r.Basis, units.FormatBytes(a.Reserved-a.Allocated)) {
				t.Errorf("empty_cache: %+v, want no saving at the peak and %s returned", r, units.FormatBytes(a.Reserved-a.Allocated))
			}
		}
		if r.SavedLowBytes != w.lo || r.SavedHighBytes != w.hi {
			t.Errorf("%s saves [%d, %d], want [%d, %d]", key, r.SavedLowBytes, r.SavedHighBytes, w.lo, w.hi)
		}
		if r.PeakAllocatedAfterBytes != b.PeakAllocatedBytes-r.SavedBytes && r.Kind != budget.RemedyExpandableSegments {
			t.Errorf("%s: peak after %d, want %d", key, r.PeakAllocatedAfterBytes, b.PeakAllocatedBytes-r.SavedBytes)
		}
		if w.batch > 0 && (r.FitsBatch == nil || *r.FitsBatch != w.batch) {
			t.Errorf("%s: batch that fits %v, want %v", key, r.FitsBatch, w.batch)
		}
		if r.SavedBytes > prev {
			t.Errorf("%s frees %d after one that frees %d: not ranked", key, r.SavedBytes, prev)
		}
		prev = r.SavedBytes
	}
	if len(wants) > 0 {
		t.Errorf("remedies missing: %v", wants)
	}
	if b.FitsBatch == nil || *b.FitsBatch != fit(fixed, 1) {
		t.Errorf("batch that fits as it runs: %v, want %v", b.FitsBatch, fit(fixed, 1))
	}
}

// TestAdviceSaysWhatIsMissing: without memrec.watch the budget does not
// guess a split, and says what it would need; with watch but no forward
// seen, autocast is missing, not assumed off.
func TestAdviceSaysWhatIsMissing(t *testing.T) {
	j := analysistest.Job(1)
	b := analyzeJSONL(t, analysistest.WatchedRun(j, 10, "float32", "false", false))["w"].GPUs[0].Budget
	if b.Watched {
		t.Fatal("watched without budget fields")
	}
	if v, ok := b.Part(budget.PartAllocated); !ok || v != j.Peak(0, 9) {
		t.Errorf("allocated part %d, want the peak %d", v, j.Peak(0, 9))
	}
	for _, r := range b.Help {
		if r.Kind != budget.RemedyExpandableSegments && r.Kind != budget.RemedyEmptyCache {
			t.Errorf("without watch memrec guessed %s", r.Kind)
		}
	}
	if !strings.Contains(strings.Join(b.Missing, " "), "memrec.watch") {
		t.Errorf("missing does not ask for memrec.watch: %q", b.Missing)
	}

	var g strings.Builder
	g.WriteString(strings.ReplaceAll(analysistest.WatchedRun(j, 10, "float32", "null", true), `,"autocast":null`, ""))
	b = analyzeJSONL(t, g.String())["w"].GPUs[0].Budget
	if !strings.Contains(strings.Join(b.Missing, " "), "whether autocast was on") {
		t.Errorf("unknown autocast not reported missing: %q", b.Missing)
	}
	for _, r := range b.Help {
		if r.Kind == budget.RemedyAutocast {
			t.Error("autocast advised although its state is unknown")
		}
	}
	if !strings.Contains(strings.Join(b.Skipped, " "), "one rank") {
		t.Errorf("one rank: sharding not said inapplicable: %q", b.Skipped)
	}
}

// TestGradientsFreedBeforeForward: when the probe saw no gradients as the
// forward started (zero_grad(set_to_none=True) before it), the peak holds
// none, what the step held above the other tensors is activations, and
// accumulation keeps the gradients through the later micro-batches, which
// takes them off its saving.
func TestGradientsFreedBeforeForward(t *testing.T) {
	j := analysistest.Job(2)
	run := strings.ReplaceAll(analysistest.WatchedRun(j, 30, "float32", "false", true), `"autocast":false`, `"autocast":false,"grads_at_forward":false`)
	b := analyzeJSONL(t, run)["w"].GPUs[0].Budget
	s := j.Split(29, 1)
	act := j.Activations + s.Grads // the peak less parameters and state
	if g, _ := b.Part(budget.PartGrads); g != 0 || b.GradBytes != s.Grads || b.GradsAtPeak != storage.FlagNo {
		t.Errorf("gradients at the peak %d (after backward %d, %s), want 0 (%d, no)", g, b.GradBytes, b.GradsAtPeak, s.Grads)
	}
	if a, _ := b.Part(budget.PartActivations); a != act {
		t.Errorf("activations %d, want %d", a, act)
	}
	for _, r := range b.Help {
		if r.Kind == budget.RemedyAccumulation && r.N == 2 && r.SavedBytes != act-act/2-s.Grads {
			t.Errorf("accumulation over 2 frees %d, want %d", r.SavedBytes, act-act/2-s.Grads)
		}
		if r.Kind == budget.RemedyZeRO2 {
			t.Error("ZeRO-2 advised for gradients the peak does not hold")
		}
	}
}

// TestHeldBetweenStepsStays: a job that keeps 300 MiB allocated through
// every step beyond its model (its data batch, cuBLAS's workspaces) has
// them counted in the activations at the peak and named as held; the
// remedies that act within a step (accumulation, autocast, checkpointing)
// act on the rest only, and the batch that fits still counts all of it.
func TestHeldBetweenStepsStays(t *testing.T) {
	j := analysistest.Job(1)
	j.Held = 300 * MiB
	b := analyzeJSONL(t, analysistest.WatchedRun(j, 30, "float32", "false", true))["w"].GPUs[0].Budget
	act, inStep := j.Activations+j.Held, j.Activations
	if a, _ := b.Part(budget.PartActivations); a != act || b.HeldBytes != j.Held {
		t.Fatalf("activations %d of which held %d, want %d and %d", a, b.HeldBytes, act, j.Held)
	}
	n := j.Split(29, 1).ParamCount
	wants := map[budget.RemedyKind][2]int64{
		budget.RemedyAccumulation:  {inStep / 2, inStep / 2},
		budget.RemedyAutocast:      {int64(budget.AutocastLow*float64(inStep)) - 2*n, int64(budget.AutocastHigh * float64(inStep))},
		budget.RemedyCheckpointing: {int64(budget.CheckpointLow * float64(inStep)), int64(budget.CheckpointHigh * float64(inStep))},
	}
	for _, r := range b.Help {
		w, ok := wants[r.Kind]
		if !ok || r.Kind == budget.RemedyAccumulation && r.N != 2 {
			continue
		}
		delete(wants, r.Kind)
		if r.SavedLowBytes != w[0] || r.SavedHighBytes != w[1] {
			t.Errorf("%s saves [%d, %d], want [%d, %d]", r.Kind, r.SavedLowBytes, r.SavedHighBytes, w[0], w[1])
		}
	}
	if len(wants) > 0 {
		t.Errorf("remedies missing: %v", wants)
	}
	if a, ok := partDetail(b, budget.PartActivations); !ok || !strings.Contains(a, "300.0 MiB of them still allocated at the step's end") {
		t.Errorf("activations' detail %q", a)
	}
}

func partDetail(b *budget.Budget, p budget.Part) (string, bool) {
	for _, s := range b.Parts {
		if s.Part == p {
			return s.Detail, true
		}
	}
	return "", false
}

// TestBudgetBeforeLooksBack: the last budget sample at or before a time
// is found in the minute before it and, where that minute has none, from
// the run's start, and none before the first.
func TestBudgetBeforeLooksBack(t *testing.T) {
	j := analysistest.Job(1)
	db, run := openJSONL(t, analysistest.WatchedRun(j, 3, "float32", "false", true), "w")
	a := &gpuAnalysis{db: db, run: run, g: run.GPUs[0]}
	var times []int64
	it := db.BudgetSamples(run, 0, 100, storage.MinTime, storage.MaxTime)
	for it.Next() {
		times = append(times, it.At().T)
	}
	if len(times) != 3 {
		t.Fatalf("%d budget samples, want 3", len(times))
	}
	for _, c := range []struct {
		at   int64
		want int64 // 0: none
	}{{times[0] - 1, 0}, {times[0], times[0]}, {times[1] + 1, times[1]}, {times[2] + 10*windowLookBack, times[2]}} {
		b, err := a.budgetBefore(100, c.at)
		switch {
		case err != nil:
			t.Fatal(err)
		case c.want == 0 && b != nil, c.want != 0 && (b == nil || b.T != c.want):
			t.Errorf("at %d: %+v, want the sample of %d", c.at, b, c.want)
		}
	}
}

// TestBudgetUnseenNearThePeak: without a device sample at the peak, not
// seen by PyTorch comes from the nearest pair of device and allocator
// samples of one moment, and the parts still add up to device used (the
// model's unseen memory is constant); without any such pair the part is
// not known and the budget says why.
func TestBudgetUnseenNearThePeak(t *testing.T) {
	j := analysistest.Job(1)
	const steps, kept = 30, 25 // device samples of the first kept steps only
	full := analysistest.WatchedRun(j, steps, "bfloat16", "false", true)
	keep := func(shift int64, upTo int) string {
		var out []string
		for _, l := range strings.Split(strings.TrimSpace(full), "\n") {
			var ts int64
			if _, err := fmt.Sscanf(l, `{"type":"sample","t_ns":%d,`, &ts); err == nil {
				step := int((ts-1000-t0-1e9)/100e6) - 1
				if step >= upTo {
					continue
				}
				l = strings.Replace(l, fmt.Sprint(ts), fmt.Sprint(ts+shift), 1)
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n") + "\n"
	}
	unseen := j.Used(0, steps-1, 1, true) - j.At(0, steps-1, 1).Reserved // the model's, at any step
	for _, c := range []struct {
		name   string
		jsonl  string
		known  bool
		whyHas string
	}{
		{"pairs before the peak", keep(0, kept), true, ""},
		{"no pair of one moment", keep(50e6, steps), false, "no device sample within 20 ms of the peak"},
		{"no device samples", keep(0, 0), false, "no device samples"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := analyzeJSONL(t, c.jsonl)["w"].GPUs[0].Budget
			if b == nil {
				t.Fatal("no budget")
			}
			if b.UsedBytes != nil {
				t.Fatalf("device used %d at the peak: the test's device samples pair with it", *b.UsedBytes)
			}
			v, ok := b.Part(budget.PartUnseen)
			var sum int64
			for _, p := range b.Parts {
				sum += p.Bytes
			}
			if !c.known {
				if ok || !strings.Contains(b.UnseenWhy, c.whyHas) || b.TotalWords() != "reserved" {
					t.Errorf("unseen %d (%v), why %q, total %q; want not known because %q", v, ok, b.UnseenWhy, b.TotalWords(), c.whyHas)
				}
				return
			}
			if !ok || v != unseen || b.UnseenFromNS == nil || b.UnseenWhy != "" {
				t.Errorf("unseen %d (%v) from %v, why %q; want %d", v, ok, b.UnseenFromNS, b.UnseenWhy, unseen)
			}
			if used := j.Used(0, steps-1, 1, true); sum != used || b.TotalBytes != used || b.TotalWords() != "device used, estimated" {
				t.Errorf("parts add up to %d, total %d (%s); device used at the peak %d", sum, b.TotalBytes, b.TotalWords(), used)
			}
		})
	}
}
