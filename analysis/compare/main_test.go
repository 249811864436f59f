package compare

import (
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

const (
	MiB = analysistest.MiB
	GiB = analysistest.GiB
	t0  = analysistest.Start
)

// analyzeJSONL imports the lines and analyses every run, by name.
func analyzeJSONL(t *testing.T, data string) map[string]*analysis.Report {
	t.Helper()
	return analysistest.Analyze(t, data, analyze)
}

// fitByBatch compares reps and fits them by their batch_size tag with
// headroom h.
func fitByBatch(t *testing.T, h float64, reps ...*analysis.Report) *Comparison {
	t.Helper()
	c, err := Compare(reps, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := FitByTag(c, "batch_size", h); err != nil {
		t.Fatal(err)
	}
	return c
}

// importFixtures imports JSON Lines inputs into one fresh database and
// analyses every run, by run name.
func importFixtures(t *testing.T, inputs map[string][]byte) map[string]*analysis.Report {
	t.Helper()
	return analysistest.AnalyzeFiles(t, inputs, analyze)
}

func analyze(db *storage.DB, r storage.Run) (*analysis.Report, error) {
	return analysis.Analyze(db, r, analysis.Options{})
}
