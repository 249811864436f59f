package analysis

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// TestProcSpanFromTheEnds: the span in which processes hold memory is the
// same read from the ends as read whole: a process that holds memory to
// the run's last minute (its tail read) and one whose memory ended ten
// minutes before the end (read whole), each with samples of no memory
// before and after.
func TestProcSpanFromTheEnds(t *testing.T) {
	var g analysistest.Gen
	g.Line(`{"type":"run","name":"p","start_ns":%d,"interval_ns":1000000000}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`, int64(80*GiB))
	const minutes = 30
	for s := 0; s <= minutes*60; s++ {
		tt := t0 + int64(s)*1e9
		g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, tt, 4*GiB)
		early, late := int64(0), int64(0)
		if s >= 120 && s < (minutes-10)*60 {
			early = GiB
		}
		if s >= 300 && s < minutes*60-5 {
			late = 2 * GiB
		}
		g.Line(`{"type":"proc","t_ns":%d,"gpu":0,"pid":1,"used_bytes":%d}`, tt, early)
		g.Line(`{"type":"proc","t_ns":%d,"gpu":0,"pid":2,"used_bytes":%d}`, tt, late)
	}
	db, run := openJSONL(t, g.String(), "p")
	for _, c := range []struct {
		pids     []int
		from, to int64
	}{
		{[]int{1}, t0 + 120e9, t0 + int64((minutes-10)*60-1)*1e9},
		{[]int{2}, t0 + 300e9, t0 + int64(minutes*60-6)*1e9},
		{[]int{1, 2}, t0 + 120e9, t0 + int64(minutes*60-6)*1e9},
	} {
		from, to, ok, err := procSpan(db, run, 0, c.pids)
		if err != nil || !ok || from != c.from || to != c.to {
			t.Errorf("pids %v: %d..%d (%v, %v), want %d..%d", c.pids, from-t0, to-t0, ok, err, c.from-t0, c.to-t0)
		}
	}
}

// openJSONL imports data into a new database and returns it, open, with
// the run of that name.
func openJSONL(t *testing.T, data, name string) (*storage.DB, storage.Run) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if _, err := jsonl.Import(db, []jsonl.Source{{Name: "gen", R: strings.NewReader(data)}}, jsonl.ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	run, err := db.Run(name)
	if err != nil {
		t.Fatal(err)
	}
	return db, run
}
