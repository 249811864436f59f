package compare

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// knownLimit is a set of real runs at small values of one model without an
// allocator trace, and the largest batch that ran in a fresh process.
type knownLimit struct {
	name   string
	inputs map[string][]byte
	limit  float64
	basis  string // the allowance basis the runs give
}

// h200Dir is cmd/memrec's folder of real H200 recordings named dir.
func h200Dir(dir string) string { return filepath.Join("..", "..", "cmd", "memrec", "testdata", dir) }

// largestSegment is the probe's largest-segment field in a torch line.
var largestSegment = regexp.MustCompile(`,"largest_segment_bytes":[0-9]+`)

// tracelessFixtures are every recording without a trace whose limit is
// known: storage/testdata's ResNet-18 and GPT-2 and cmd/memrec's h200-fit
// (probes before the largest segment), and cmd/memrec's h200-segments as
// recorded and again without the largest segment, as such a probe would
// have sent them.
func tracelessFixtures(t *testing.T) []knownLimit {
	t.Helper()
	truth := fixtures.ReadTruth(t)
	var out []knownLimit
	for model, files := range map[string][]string{"r18": fixtures.H200R18, "gpt": fixtures.H200GPT} {
		in := map[string][]byte{}
		for _, f := range files {
			in[f] = fixtures.Read(t, f)
		}
		out = append(out, knownLimit{"h200-" + model, in, float64(truth.Limits[model].Largest), "inactive_split"})
	}
	read := func(dir, model string, batches []string, strip bool) map[string][]byte {
		in := map[string][]byte{}
		for _, b := range batches {
			data := fixtures.Gunzip(t, filepath.Join(h200Dir(dir), model+"-bs"+b+".jsonl.gz"))
			if strip {
				data = largestSegment.ReplaceAll(data, nil)
			}
			in[model+"-bs"+b] = data
		}
		return in
	}
	for model, limit := range map[string]float64{"resnet50": 1696, "vit_b_16": 2128} { // cmd/memrec's TestLargestBatchFromRunsOnTheH200
		out = append(out, knownLimit{"h200-fit/" + model, read("h200-fit", model, []string{"16", "32", "64"}, false), limit, "inactive_split"})
	}
	b, err := os.ReadFile(filepath.Join(h200Dir("h200-segments"), "limits.json"))
	if err != nil {
		t.Fatal(err)
	}
	var limits map[string]json.RawMessage
	if err := json.Unmarshal(b, &limits); err != nil {
		t.Fatal(err)
	}
	for model, msg := range limits {
		if model == "about" {
			continue
		}
		var lim struct{ Limit float64 }
		if err := json.Unmarshal(msg, &lim); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(h200Dir("h200-segments"), model+"-bs*.jsonl.gz"))
		var batches []string
		for _, f := range files {
			batches = append(batches, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), model+"-bs"), ".jsonl.gz"))
		}
		out = append(out, knownLimit{"h200-segments/" + model, read("h200-segments", model, batches, false), lim.Limit, "largest_segment"},
			knownLimit{"h200-segments/" + model + " (no largest segment)", read("h200-segments", model, batches, true), lim.Limit, "inactive_split"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// TestTracelessLargestBatch predicts the largest batch of every recording
// without a trace whose limit is known (tracelessFixtures) and checks the
// prediction without headroom, the pessimistic end of the interval, is
// never above the limit on every recording, as recorded and as an older
// probe would have sent it, and the optimistic end at or above the
// pessimistic. How far below the real ResNet-18 recordings come is logged,
// not held: the one more segment that keeps BERT-base without its largest
// segment at its limit puts them more than 10 % below (docs/analysis.md).
// With -v it prints the table of bench/README.md.
func TestTracelessLargestBatch(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 43 sets of real runs")
	}
	var rows []string
	for _, k := range tracelessFixtures(t) {
		reps := importFixtures(t, k.inputs)
		var list []*analysis.Report
		for _, r := range reps {
			list = append(list, r)
		}
		c, err := Compare(list, "", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := FitByTag(c, "batch_size", 0); err != nil {
			t.Fatal(err)
		}
		b := c.By
		if b.AllowanceBasis != k.basis || b.MaxFittingValueNoHeadroom == nil || b.MaxFittingValueOptimistic == nil {
			t.Errorf("%s: allowance %q (want %q), %s", k.name, b.AllowanceBasis, k.basis, b.IntervalWords)
			continue
		}
		p, o := *b.MaxFittingValueNoHeadroom, *b.MaxFittingValueOptimistic
		below := 100 * (k.limit - p) / k.limit
		rows = append(rows, fmt.Sprintf("| %s | %s | %v | %v–%v | %v | %.1f %% below |", k.name, b.AllowanceBasis, p, p, o, k.limit, below))
		if p > k.limit {
			t.Errorf("%s: predicted %v, above the limit %v: %s", k.name, p, k.limit, b.BasisWords)
		}
		if o < p {
			t.Errorf("%s: the optimistic end %v is below the pessimistic %v", k.name, o, p)
		}
		if k.name == "h200-r18" && below > 10 {
			t.Logf("%s: predicted %v, %.1f %% below the limit %v: %s", k.name, p, below, k.limit, b.BasisWords)
		}
	}
	t.Logf("\n| runs | allowance | predicted | range | limit | error |\n|---|---|---|---|---|---|\n%s", strings.Join(rows, "\n"))
}

// TestSplitWordsNameOnlyAPartThatCounts: the words name the part for one
// more segment where it adds room, and leave it out where it is zero.
func TestSplitWordsNameOnlyAPartThatCounts(t *testing.T) {
	l := replay.Fit{SlopeBytesPerUnit: 2 << 20}
	runs := [2]string{"bs64", "bs32"}
	if w := splitWords(l, runs, 0); strings.Contains(w, "one more segment") || strings.Contains(w, "plus 0 B") {
		t.Errorf("zero part named: %s", w)
	}
	if w := splitWords(l, runs, 4<<20); !strings.Contains(w, "plus 4.0 MiB for one more segment") {
		t.Errorf("part left out: %s", w)
	}
}
