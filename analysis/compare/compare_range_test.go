package compare

import (
	"errors"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// Tags of ±1e308 square past float64 (the fit printed −8 589 934 592 GiB
// per unit): refused, saying why.
func TestFitByHugeTagRefused(t *testing.T) {
	g := &analysistest.Gen{}
	batchRuns(g, []int{16, 32}, func(b int) string {
		if b == 16 {
			return "-1e308"
		}
		return "1e308"
	})
	reps := analyzeJSONL(t, g.String())
	c, _ := Compare([]*analysis.Report{reps["bs16"], reps["bs32"]}, "", "")
	err := FitByTag(c, "batch_size", 0.05)
	if !errors.Is(err, ErrTagOutOfRange) || !strings.Contains(err.Error(), `run "bs16" has batch_size="-1e308": beyond ±2^53`) || c.By != nil {
		t.Fatalf("error %v, fit %+v", err, c.By)
	}
}

// Values large against their spread fit as well as small ones: the sums
// are taken about the means (the raw sums of squares, about 3e30, cancel
// to nothing at n·Σx² − (Σx)²).
func TestLeastSquaresLargeOffset(t *testing.T) {
	f := replay.LeastSquares([]float64{1e15, 1e15 + 1, 1e15 + 2}, []float64{10, 20, 30})
	if f.SlopeBytesPerUnit != 10 || f.R2 != 1 {
		t.Errorf("fit %+v, want slope 10 and R² 1", f)
	}
}
