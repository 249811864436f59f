package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestVerdictsOfTheSimulatedScenarios: the simulator's scenarios, judged
// through record and analyze --json. The fragmentation scenario grows the
// allocator's reserved memory by 2 % of the step's peak a step while
// allocated stays flat (internal/jobmodel): cache_growth, with that slope;
// the leak scenario keeps tensors on its last GPU: leak there, no_leak on
// the other; the plain job: no_leak everywhere.
// A run of 2 s is the job starting: the allocator's cache still grows
// over the first epoch, and nothing tells that ramp from a leak. With the
// simulated probe (steps, no completed epoch) and with a command (device
// memory only), the verdict is startup, without slope or time to full.
func TestShortRunIsStartUp(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	for name, args := range map[string][]string{
		"probe":   {"--sim-clock", "fake", "--duration", "2s"},
		"command": {"--", "sleep", "2"},
	} {
		if _, errs, code := run(t, db, "", append([]string{"record", "--source", "sim", "--sim-gpus", "1", "--name", name}, args...)...); code != 0 {
			t.Fatal(errs)
		}
		out, errs, code := run(t, db, "", "analyze", "--json", name)
		var rep struct {
			GPUs []struct {
				Leak struct {
					Kind   string   `json:"kind"`
					Reason string   `json:"reason"`
					Slope  *float64 `json:"slope_bytes_per_hour"`
					Full   *float64 `json:"time_to_full_s"`
				} `json:"leak"`
			} `json:"gpus"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.GPUs) != 1 {
			t.Fatalf("%s: %d %s", name, code, errs)
		}
		l := rep.GPUs[0].Leak
		// A real 2 s command on a loaded machine (the race detector, a busy
		// CI host) may leave the sim too few points to judge at all: that
		// too gives no slope, which is what this test is about; its reason may
		// name either.
		starved := name == "command" && (l.Kind == "too_few_points" || l.Kind == "startup")
		if (l.Kind != "startup" && !starved) || l.Slope != nil || l.Full != nil ||
			(!starved && !strings.Contains(l.Reason, "too short to tell a start-up ramp from a leak")) {
			t.Errorf("%s: %+v, want startup without slope or time to full", name, l)
		}
		text, _, _ := run(t, db, "", "analyze", name)
		if strings.Contains(text, "B per hour") || strings.Contains(text, "full in") {
			t.Errorf("%s: the text still gives a slope:\n%s", name, text)
		}
	}
}

func TestVerdictsOfTheSimulatedScenarios(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	type gpu struct {
		GPU      int    `json:"gpu"`
		PeakStep *int64 `json:"peak_step_allocated_bytes"`
		Leak     struct {
			Verdict string   `json:"verdict"`
			Kind    string   `json:"kind"`
			Basis   string   `json:"basis"`
			Slope   *float64 `json:"slope_bytes_per_step"`
			Full    *float64 `json:"time_to_full_s"`
		} `json:"leak"`
	}
	for _, c := range []struct {
		scenario      string
		kinds, legacy []string
	}{
		{"fragmentation", []string{"cache_growth", "cache_growth"}, []string{"no_leak", "no_leak"}},
		{"leak", []string{"no_leak", "leak"}, []string{"no_leak", "leak"}},
		{"none", []string{"no_leak", "no_leak"}, []string{"no_leak", "no_leak"}},
	} {
		if _, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-clock", "fake", "--sim-scenario", c.scenario,
			"--sim-gpus", "2", "--duration", "30s", "--name", c.scenario); code != 0 {
			t.Fatal(errs)
		}
		out, errs, code := run(t, db, "", "analyze", "--json", c.scenario)
		if code != 0 {
			t.Fatal(errs)
		}
		var rep struct{ GPUs []gpu }
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		for i, g := range rep.GPUs {
			if g.Leak.Kind != c.kinds[i] || g.Leak.Verdict != c.legacy[i] {
				t.Errorf("%s GPU %d: kind %s verdict %s, want %s and %s", c.scenario, i, g.Leak.Kind, g.Leak.Verdict, c.kinds[i], c.legacy[i])
				continue
			}
			if c.scenario != "fragmentation" {
				continue
			}
			want := 0.02 * float64(*g.PeakStep)
			if g.Leak.Basis != "reserved" || g.Leak.Slope == nil || math.Abs(*g.Leak.Slope-want) > 0.01*want || g.Leak.Full == nil {
				t.Errorf("fragmentation GPU %d: basis %s, slope %v B/step, time to full %v; want reserved at %.0f B/step (2 %% of the step peak) and a time to full",
					i, g.Leak.Basis, g.Leak.Slope, g.Leak.Full, want)
			}
		}
		text, _, _ := run(t, db, "", "analyze", c.scenario)
		if c.scenario == "fragmentation" && !strings.Contains(text, "expandable_segments:True") {
			t.Errorf("fragmentation: the text gives no advice:\n%s", text)
		}
	}
}

// TestReservedGrowthOnTheH200 reads two real H200 recordings of one job
// (bench/validation/judge_runs.sh: a transformer layer on sequences whose longest
// grows from 256 to 4096 tokens over the run, with prefetched buffers of
// random sizes that live 1 to 4 steps), once with the caching allocator's
// defaults and once with expandable_segments:True. Allocated memory at step
// ends does not grow in either (torch's own readings every 20 steps,
// *.torch.json, say so too). With the defaults reserved climbs from 0.6 to
// 24.8 GiB, far faster than the largest step peak: cache_growth, with the
// advice and a time to full. With expandable segments reserved follows the
// largest peak, and the cache beyond it grows far more slowly than that
// peak: no_leak, which says why.
func TestReservedGrowthOnTheH200(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	type growth struct {
		Quantity string   `json:"quantity"`
		Trend    string   `json:"trend"`
		Slope    *float64 `json:"slope_bytes_per_step"`
		Growth   *float64 `json:"growth_bytes"`
	}
	type leak struct {
		Kind   string   `json:"kind"`
		Basis  string   `json:"basis"`
		Reason string   `json:"reason"`
		Full   *float64 `json:"time_to_full_s"`
		Growth []growth `json:"growth"`
	}
	read := func(name string) (leak, map[string]growth, string) {
		t.Helper()
		if _, errs, code := run(t, db, "", "import", "--name", name, filepath.Join("testdata", "h200-reserved", name+".jsonl.gz")); code != 0 {
			t.Fatal(errs)
		}
		out, errs, code := run(t, db, "", "analyze", "--json", name)
		var rep struct {
			GPUs []struct {
				Leak leak `json:"leak"`
			} `json:"gpus"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.GPUs) != 1 {
			t.Fatalf("%s: %d %s", name, code, errs)
		}
		g := map[string]growth{}
		for _, e := range rep.GPUs[0].Leak.Growth {
			g[e.Quantity] = e
		}
		text, _, _ := run(t, db, "", "analyze", name)
		return rep.GPUs[0].Leak, g, text
	}
	// torch's reserved memory, first and last of its readings every 20 steps.
	torchRise := func(name string) float64 {
		b, err := os.ReadFile(filepath.Join("testdata", "h200-reserved", name+".torch.json"))
		if err != nil {
			t.Fatal(err)
		}
		var r struct{ Every20 [][4]float64 }
		if err := json.Unmarshal(b, &r); err != nil || len(r.Every20) < 100 {
			t.Fatalf("%s: %v", name, err)
		}
		return r.Every20[len(r.Every20)-1][2] - r.Every20[0][2]
	}
	offLeak, off, offText := read("reserved-off")
	onLeak, on, onText := read("reserved-on")
	for name, g := range map[string]map[string]growth{"off": off, "on": on} {
		if g["allocated"].Trend != "flat" || g["reserved"].Trend != "grows" || g["reserved_beyond_peak"].Slope == nil || g["step_peak_high"].Slope == nil {
			t.Fatalf("%s: %+v", name, g)
		}
	}
	if offLeak.Kind != "cache_growth" || offLeak.Basis != "reserved" || offLeak.Full == nil ||
		*off["reserved_beyond_peak"].Slope <= *off["step_peak_high"].Slope || !strings.Contains(offText, "expandable_segments:True") {
		t.Errorf("off: %+v\n%s", offLeak, offText)
	}
	// The growth over the run against torch's own rise of reserved memory
	// (the curve is convex: the slope per step depends on where the probe
	// sampled, the growth over the run much less).
	if got, want := *off["reserved"].Growth, torchRise("reserved-off"); math.Abs(got-want) > 0.25*want {
		t.Errorf("off: reserved grew %.2f GiB by the rule, %.2f GiB by torch's readings", got/(1<<30), want/(1<<30))
	}
	if onLeak.Kind != "no_leak" || onLeak.Full != nil || *on["reserved_beyond_peak"].Slope >= *on["step_peak_high"].Slope ||
		!strings.Contains(onLeak.Reason, "grows mostly with the step's peak") {
		t.Errorf("on: %+v\n%s", onLeak, onText)
	}
}

// TestLargestBatchFromSmallRunsOnTheH200: compare --by batch_size on real
// H200 runs at batches 16, 32 and 64 (bench/validation/fit_check.sh) of
// ResNet-50 (fp32, SGD) and ViT-B/16 (bf16 autocast, AdamW), recorded by a
// probe that did not yet measure the allocator's largest segment, against
// the largest batch that ran 3 steps in a fresh process, bisected there
// (memrec fit found the same): never above it. The default allowance is
// the most eighteen models needed (VGG-16's 36 %, rounded up to 40 %), so
// these two, which need 2 % at most, come out about 29 % below: what not
// measuring the largest segment costs.
// ResNet-50's marginal cost rose from 16→32 to 32→64; a batch's sample
// costs the same at any batch, so that rise is not carried on (carried
// on, the projection said 1074).
func TestLargestBatchFromSmallRunsOnTheH200(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	for model, limit := range map[string]float64{"resnet50": 1696, "vit_b_16": 2128} {
		by := predictFromSmallRuns(t, db, inDir(filepath.Join("testdata", "h200-fit")), model, []string{"16", "32", "64"})
		p := by.NoHeadroom
		t.Logf("%s: %v, the limit %v (%.1f %% below): %s", model, p, limit, 100*(limit-p)/limit, by.Words)
		if p > limit || p < 0.7*limit || strings.Contains(by.Words, "carried on") {
			t.Errorf("%s: predicted %v without headroom, the limit is %v: %s", model, p, limit, by.Words)
		}
	}
}

// TestLargestBatchFromSegmentsOnTheH200: compare --by batch_size on real
// H200 runs at three small batches of eighteen models (testdata/h200-segments:
// CNNs from ResNet-18 to VGG-16 and DenseNet-121, ViT, Swin-T, GPT-2-shaped
// models with vocabularies of 50 257 to 256 000 and up to 2 048 tokens,
// Llama-style models, BERT, T5, DeepLabV3), recorded by the probe that
// measures the allocator's largest segment, against the largest batch that
// ran in a fresh process (the lowest of the hosts where it was found): never
// above it (DeepLabV3 needed 1.75 largest segments, VGG-11 up to 1.3 of its
// large ones), and no more than 30 % below it. The jobs that strand much
// less than the two segments of the bound (the ResNets and the language
// models, none to half a segment) are the ones more than 10 % below: nine
// of the eighteen.
func TestLargestBatchFromSegmentsOnTheH200(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "h200-segments")
	limits, smalls := h200SegmentsLimits(t, dir)
	var beyond []string // more than 10 % below
	db := filepath.Join(t.TempDir(), "m.db")
	for model, msg := range limits {
		if model == "about" {
			continue
		}
		var lim struct{ Limit float64 }
		if err := json.Unmarshal(msg, &lim); err != nil {
			t.Fatal(err)
		}
		batches, ok := smalls[model]
		if !ok {
			batches = []string{"16", "32", "64"}
		}
		by := predictFromSmallRuns(t, db, inDir(dir), model, batches)
		p := by.NoHeadroom
		if p < 0.9*lim.Limit {
			beyond = append(beyond, model)
		}
		t.Logf("%s: %v, the limit %v (%.1f %% below): %s", model, p, lim.Limit, 100*(lim.Limit-p)/lim.Limit, by.Words)
		if by.AllowanceBasis != "largest_segment" || !strings.Contains(by.Words, "largest segment") {
			t.Errorf("%s: allowance %q, %s: want the largest segment's", model, by.AllowanceBasis, by.Words)
		}
		if p > lim.Limit || p < 0.7*lim.Limit {
			t.Errorf("%s: predicted %v without headroom, the limit is %v: %s", model, p, lim.Limit, by.Words)
		}
	}
	// The inactive split the probe saw (analysis/compare/traceless.go) puts fewer models
	// far below their limit than two largest segments for all did (nine),
	// ResNet-18 among them.
	if len(beyond) > 6 || slices.Contains(beyond, "resnet18") {
		t.Errorf("%d models more than 10 %% below their limit (%v)", len(beyond), beyond)
	}
	// analyze says what the probe measured: BERT-base's fp32 logits at 64.
	out, errs, code := run(t, db, "", "analyze", "bert-bs64", "--full")
	if want := "Largest allocator segment with room free: 3.73 GiB"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("analyze lacks %q (%d %s):\n%s", want, code, errs, out)
	}
	// compare --by points at the check by trial.
	out, errs, code = run(t, db, "", "compare", "--by", "batch_size", "bert-bs16", "bert-bs32", "bert-bs64")
	if want := "memrec fit --by batch_size --runs bert-bs16,bert-bs32,bert-bs64 -- COMMAND ... {}"; code != 0 || !strings.Contains(out, want) {
		t.Errorf("compare lacks %q (%d %s):\n%s", want, code, errs, out)
	}
	// and the report's page says what analyze does.
	repDir := filepath.Join(t.TempDir(), "rep")
	if _, errs, code := run(t, db, "", "report", "bert-bs64", "-o", repDir, "--width", "600", "--height", "300"); code != 0 {
		t.Fatal(errs)
	}
	page, err := os.ReadFile(filepath.Join(repDir, "index.html"))
	if want := "Largest allocator segment with room free: 3.73 GiB"; err != nil || !strings.Contains(string(page), want) {
		t.Errorf("the page lacks %q (%v)", want, err)
	}
}

// smallRunsPrediction is what compare --by batch_size --headroom 0% --json
// says of a model's runs at small batches.
type smallRunsPrediction struct {
	NoHeadroom     float64
	Basis          string // basis
	AllowanceBasis string // allowance_basis
	Words          string // interval_words
	Made           string // basis_words
}

// inDir is the recording MODEL-bsB.jsonl.gz of run name in dir, for
// predictFromSmallRuns.
func inDir(dir string) func(name string) string {
	return func(name string) string { return filepath.Join(dir, name+".jsonl.gz") }
}

// predictFromSmallRuns imports file(MODEL-bsB) for each batch B into db
// and projects the largest batch from them.
func predictFromSmallRuns(t *testing.T, db string, file func(name string) string, model string, batches []string) smallRunsPrediction {
	t.Helper()
	var names []string
	for _, b := range batches {
		name := model + "-bs" + b
		if _, errs, code := run(t, db, "", "import", "--name", name, file(name)); code != 0 {
			t.Fatal(errs)
		}
		names = append(names, name)
	}
	out, errs, code := run(t, db, "", append([]string{"compare", "--by", "batch_size", "--headroom", "0%", "--json"}, names...)...)
	var c struct {
		By struct {
			NoHeadroom     *float64 `json:"max_fitting_value_no_headroom"`
			Basis          string   `json:"basis"`
			AllowanceBasis string   `json:"allowance_basis"`
			Words          string   `json:"interval_words"`
			Made           string   `json:"basis_words"`
		} `json:"by_tag"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil || c.By.NoHeadroom == nil {
		t.Fatalf("%s: %d %s", model, code, errs)
	}
	return smallRunsPrediction{NoHeadroom: *c.By.NoHeadroom, Basis: c.By.Basis, AllowanceBasis: c.By.AllowanceBasis, Words: c.By.Words, Made: c.By.Made}
}

// h200SegmentsLimits reads the limits of the recordings in dir
// (testdata/h200-segments: each model's limits.json entry, and "about")
// and names the small batches recorded of each model not at 16, 32 and 64.
func h200SegmentsLimits(t *testing.T, dir string) (map[string]json.RawMessage, map[string][]string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "limits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var limits map[string]json.RawMessage
	if err := json.Unmarshal(raw, &limits); err != nil {
		t.Fatal(err)
	}
	smalls := map[string][]string{"resnet18": {"32", "64", "128"}, "gpt2": {"4", "8", "16"}, "lm_long": {"4", "8", "16"},
		"lm_wide": {"2", "4", "8"}, "t5": {"8", "16", "32"}, "deeplab": {"4", "8", "16"}, "lm_1b": {"1", "2", "4"}, "resnet34": {"32", "64", "128"}, "gpt2_medium": {"1", "2", "4"}}
	return limits, smalls
}
