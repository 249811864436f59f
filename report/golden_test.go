package report

import (
	"html"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/testsupport/fixtures"
	"gonum.org/v1/plot/cmpimg"
)

// checkGolden compares a PNG with testdata/golden/NAME.png as gonum's
// cmpimg.CheckPlotApprox does (5 % tolerance); -update rewrites it. A
// differing image is written beside the test's temporary files.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", "golden", name+".png")
	if *update {
		os.MkdirAll(filepath.Dir(golden), 0o755)
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./report -run %s -update writes it)", err, t.Name())
	}
	ok, err := cmpimg.EqualApprox("png", got, want, 0.05)
	if err != nil || !ok {
		out := filepath.Join(t.TempDir(), name+".png")
		os.WriteFile(out, got, 0o644)
		t.Errorf("%s differs from %s (err %v; got in %s); run with -update if the change is intended", name, golden, err, out)
	}
}

// TestChartGolden: every chart kind of the real leak run, and the epoch
// chart's two special cases (an epoch 0 that dwarfs the rest, too many
// epochs to draw one bar each), against golden images.
func TestChartGolden(t *testing.T) {
	rep := realReport(t, fixtures.LeakRun)
	g := rep.GPUs[0]
	kinds := map[string]func() ([]byte, error){
		"timeline":      func() ([]byte, error) { return render(timelineChart(rep, g, "GPU 0: memory over time", 0), 600, 300) },
		"epochs":        func() ([]byte, error) { return render(epochChart(g), 600, 300) },
		"leak":          func() ([]byte, error) { return render(floorChart(rep, g), 600, 300) },
		"steppeak":      func() ([]byte, error) { return render(stepPeakChart(g), 600, 300) },
		"fragmentation": func() ([]byte, error) { return render(fragChart(rep, g), 600, 300) },
		"overview":      func() ([]byte, error) { return overview(rep, 600, 150) },
		"epochs-apart":  func() ([]byte, error) { return render(epochChart(syntheticEpochs(6)), 600, 300) },
		"epochs-many":   func() ([]byte, error) { return render(epochChart(syntheticEpochs(300)), 600, 300) },
	}
	for name, draw := range kinds {
		got, err := draw()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkGolden(t, name, got)
	}
}

// syntheticEpochs is a GPU whose epoch 0 adds 2.8 GiB and every later
// epoch 36 MiB (and 30 MiB allocated): the case where epoch 0 hides the
// rest.
func syntheticEpochs(n int) analysis.GPUReport {
	var g analysis.GPUReport
	for i := range n {
		u, a := int64(36<<20), int64(30<<20)
		if i == 0 {
			u, a = 2800<<20, 2600<<20
		}
		g.Epochs = append(g.Epochs, analysis.EpochDelta{Epoch: i, DeltaUsedBytes: &u, DeltaAllocatedBytes: &a})
	}
	return g
}

// TestEpochTableBucketed: a run of 300 epochs, the last open, shows
// at most maxEpochRows rows, its closed epochs in buckets of 20 summed
// (derived: 299 closed epochs in 19 rows need 16, rounded up to 20), the
// largest named, and the open epoch on a row of its own whose Δ reads
// "open", never a number.
func TestEpochTableBucketed(t *testing.T) {
	rep := realReport(t, fixtures.LeakRun)
	rep.GPUs[0].Epochs = syntheticEpochs(300).Epochs
	big := int64(5 << 30)
	rep.GPUs[0].Epochs[299].Open = true
	rep.GPUs[0].Epochs[299].DeltaAllocatedBytes = &big
	page, err := Page(rep, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := html.UnescapeString(string(page))
	i := strings.Index(s, `<table class="epochs">`)
	if i < 0 {
		t.Fatal("no epoch table")
	}
	table := s[i : i+strings.Index(s[i:], "</table>")]
	if n := strings.Count(table, "<tr") - 1; n > maxEpochRows || n != 16 {
		t.Errorf("%d rows, want 15 buckets of 20 and the open epoch", n)
	}
	if !strings.Contains(table, "<td>0–19</td>") || !strings.Contains(table, "<td>280–298</td>") {
		t.Errorf("buckets are not named by their epochs:\n%s", table)
	}
	if !strings.Contains(s, "buckets of 20") || !strings.Contains(s, "the largest epoch: epoch 0: +2.54 GiB allocated") {
		t.Errorf("the buckets and the largest epoch are not said: %q", s[strings.Index(s, "Epochs in buckets"):][:160])
	}
	open := table[strings.Index(table, `<tr class="open">`):]
	if !strings.Contains(open, "<td>299 (open)</td>") || strings.Contains(open, "5.00 GiB") || strings.Count(open, "<td>open</td>") != 2 {
		t.Errorf("the open epoch's row shows growth: %s", open)
	}
	// Bucket 20–39 sums twenty epochs of 30 MiB allocated.
	if !strings.Contains(table, "<td>20–39</td>") || !strings.Contains(table[strings.Index(table, "<td>20–39</td>"):], "600.0 MiB") {
		t.Errorf("bucket 20–39 is not the sum of its epochs")
	}
}
