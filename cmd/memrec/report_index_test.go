package main

import (
	"bytes"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/viewer"
)

// TestReportIndexIsBuildIndex: the page's index report builds from the
// samples the analysis hands over holds the same device and allocator
// lines as one read from the run (the budget lines and the marks, which
// the page takes from the analysis, aside), and draws every window the
// same; on a GPU whose two processes' allocator samples the analysis reads
// merged by time too, and for a window of the run.
func TestReportIndexIsBuildIndex(t *testing.T) {
	var buf bytes.Buffer
	c := tracegen.Default()
	c.GPUs, c.Duration = 2, 90*time.Second
	if _, err := tracegen.Write(&buf, c); err != nil {
		t.Fatal(err)
	}
	start := c.Start.UnixNano()
	for i := range 3000 { // a second process on GPU 0, between the first's samples
		fmt.Fprintf(&buf, `{"type":"torch","t_ns":%d,"gpu":0,"pid":5000,"allocated_bytes":%d,"reserved_bytes":%d}`+"\n",
			start+int64(i)*30e6+7e6, int64(1<<30)+int64(i%97)<<20, int64(2<<30))
	}
	db, err := storage.Open(t.TempDir()+"/m.db", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "gen", R: &buf}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	whole := runs[0]
	for _, r := range []storage.Run{whole, whole.Within(whole.StartNS+17e9, whole.StartNS+61e9)} {
		want, err := viewer.BuildIndex(db, r)
		if err != nil {
			t.Fatal(err)
		}
		got := series.NewIndex(0)
		if _, err := analysis.Analyze(db, r, analysis.Options{Lines: got}); err != nil {
			t.Fatal(err)
		}
		var drawn []series.Key // the lines the page draws
		for _, k := range want.Keys() {
			if !k.Field.Budget() {
				drawn = append(drawn, k)
			}
		}
		if !slices.Equal(got.Keys(), drawn) || len(drawn) < 9 {
			t.Fatalf("lines %v, read from the run %v", got.Keys(), drawn)
		}
		for _, k := range drawn {
			for _, points := range []int{7, 800} {
				g, err1 := got.Window(k, r.StartNS, r.EndNS+1, points, nil)
				w, err2 := want.Window(k, r.StartNS, r.EndNS+1, points, nil)
				if err1 != nil || err2 != nil || !slices.Equal(g.T, w.T) || !slices.Equal(g.V, w.V) || g.Every != w.Every || g.Samples != w.Samples {
					t.Errorf("%v at %d points: drawn unlike the index read from the run (%v %v)", k, points, err1, err2)
				}
			}
		}
	}
}
