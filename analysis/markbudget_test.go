package analysis

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// markRun is a run of one GPU with n event marks, the i-th's text
// text(i), and one OOM mark after them.
func markRun(n int, text func(i int) string) string {
	return hostileTraceRun(func(g *analysistest.Gen, t0 int64) {
		for i := range n {
			g.Line(`{"type":"mark","t_ns":%d,"kind":"event","text":%q}`, t0+int64(2e9)+int64(i)*1000, text(i))
		}
		g.Line(`{"type":"mark","t_ns":%d,"kind":"oom","text":"CUDA out of memory"}`, t0+int64(50e9))
	})
}

func importRun(t *testing.T, lines string) (*storage.DB, storage.Run) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "marks.jsonl", R: strings.NewReader(lines)}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return db, runs[0]
}

// TestMarksTakenFromTheBudgetAtTheBound analyses a run of event marks
// with a budget of exactly what keeping them all costs, and one byte
// less. The cost is worked out from the input: each event is held twice
// (every kept mark, and the events), the OOM three times (and the OOMs),
// each text once.
func TestMarksTakenFromTheBudgetAtTheBound(t *testing.T) {
	const n = 1000
	text := func(i int) string { return fmt.Sprintf("event %d %s", i, strings.Repeat("x", i%50)) }
	db, run := importRun(t, markRun(n, text))
	size := int64(unsafe.Sizeof(storage.Mark{}))
	cost := 3*size + int64(len("CUDA out of memory"))
	for i := range n {
		cost += 2*size + int64(len(text(i)))
	}
	for _, c := range []struct {
		budget         int64
		events, ooms   int
		note           string
		budgetUsedWant int64
	}{
		{cost, n + 1, 1, "", cost},
		{cost - 1, n, 0, "1 mark left out of the analysis", cost - 3*size - int64(len("CUDA out of memory"))},
	} {
		b := storage.NewDecodeBudget(c.budget)
		rep, err := Analyze(db, run, Options{Budget: b})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Marks.Events != c.events || rep.Marks.OOMs != c.ooms {
			t.Errorf("budget %d: %d events, %d OOMs kept; want %d, %d", c.budget, rep.Marks.Events, rep.Marks.OOMs, c.events, c.ooms)
		}
		if b.Used() != c.budgetUsedWant {
			t.Errorf("budget %d: %d bytes taken, want %d", c.budget, b.Used(), c.budgetUsedWant)
		}
		var notes []string
		for _, note := range rep.Notes {
			if strings.Contains(note, "left out of the analysis") {
				notes = append(notes, note)
			}
		}
		switch {
		case c.note == "" && len(notes) != 0:
			t.Errorf("budget %d: notes %q, want none", c.budget, notes)
		case c.note != "" && (len(notes) != 1 || !strings.Contains(notes[0], c.note) || !strings.Contains(notes[0], "past the decoding budget")):
			t.Errorf("budget %d: notes %q, want one saying %q", c.budget, notes, c.note)
		}
	}
}

// TestAnalyzeOfManyMarksStaysUnderTheHeapBound analyses runs of many
// event marks, and of long mark texts, whose marks alone take far more
// than the budget: what the analysis keeps (its report holds the kept
// marks) stays within the budget and some slack, what it allocates under
// the heap bound, and one note says how many marks were left out.
func TestAnalyzeOfManyMarksStaysUnderTheHeapBound(t *testing.T) {
	const budget = 16 << 20
	for _, c := range []struct {
		name string
		n    int
		text func(i int) string
	}{
		{"400 000 events", 400000, func(i int) string { return fmt.Sprintf("event number %d of a hostile run", i) }},
		{"64 texts of 1 MiB", 64, func(i int) string { return strings.Repeat(fmt.Sprintf("%08d", i), 1<<17) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, run := importRun(t, markRun(c.n, c.text))
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rep, err := Analyze(db, run, Options{Budget: storage.NewDecodeBudget(budget)})
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > heapBound {
				t.Errorf("allocated %d MiB, past the heap bound of %d MiB", got>>20, heapBound>>20)
			}
			runtime.GC()
			runtime.ReadMemStats(&after)
			// The slices of kept marks grow by doubling: up to twice what
			// was taken, and a little for the rest of the report.
			if kept := int64(after.HeapAlloc) - int64(before.HeapAlloc); kept > 2*budget+4<<20 {
				t.Errorf("the report keeps %d MiB, past twice the budget of %d MiB", kept>>20, budget>>20)
			}
			if rep.Marks.Events == 0 || rep.Marks.Events >= c.n {
				t.Errorf("%d of %d events kept, want some and not all", rep.Marks.Events, c.n+1)
			}
			var notes []string
			for _, n := range rep.Notes {
				if strings.Contains(n, "marks left out of the analysis") {
					notes = append(notes, n)
				}
			}
			if want := fmt.Sprintf("%d marks left out", c.n+1-rep.Marks.Events); len(notes) != 1 || !strings.HasPrefix(notes[0], want) {
				t.Errorf("notes %q, want one starting %q", notes, want)
			}
			runtime.KeepAlive(rep)
		})
	}
}
