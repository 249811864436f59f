package storage

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memrec/memrec/storage/wire"

	"github.com/memrec/memrec/testsupport/linetest"
)

// siteRun writes a run of n epoch-end snapshots of one process on GPU 0:
// 20 steady sites, one that grows 256 000 B an epoch, the untracked entry
// and, every fifth snapshot, an "other" entry. It returns the JSON Lines and
// the rows they hold.
func siteRun(n int) (string, []SiteSample) {
	var b strings.Builder
	b.WriteString(`{"type":"run","name":"sites","start_ns":1000000000000}` + "\n")
	b.WriteString(`{"type":"gpu","gpu":0,"total_bytes":1000000000000}` + "\n")
	var rows []SiteSample
	for e := 0; e < n; e++ {
		head := SiteSample{T: 1_000_000_000_000 + int64(e)*1_000_000_123, GPU: 0, PID: 4242, Rank: 0, Epoch: e,
			Reason: wire.SitesEpochEnd}
		if e%2 == 1 {
			head.SampledEvery = 2.375
		}
		snap := []SiteSample{head}
		snap[0].File, snap[0].LiveBytes, snap[0].LiveBlocks = wire.SiteUntracked, 7<<20, 12
		leak := head
		leak.File, leak.Line, leak.Func, leak.Stack = "/home/u/train.py", 52, "keep_logits", "train.py:80 train_step\ntrain.py:99 main"
		leak.LiveBytes, leak.LiveBlocks = int64(e+1)*256000, int64(e+1)
		snap = append(snap, leak)
		for i := 0; i < 20; i++ {
			s := head
			s.File, s.Line, s.Func = fmt.Sprintf("/home/u/model_%d.py", i%4), 10+i, "forward"
			s.LiveBytes, s.LiveBlocks = int64(i+1)<<20, 2
			snap = append(snap, s)
		}
		if e%5 == 0 {
			o := head
			o.File, o.Sites, o.LiveBytes, o.LiveBlocks = wire.SiteOther, 3, 4096, 3
			snap = append(snap, o)
		}
		b.Write(wire.AppendSites(nil, snap))
		rows = append(rows, snap...)
	}
	return b.String(), rows
}

func TestSitesImportExportRoundTrip(t *testing.T) {
	text, rows := siteRun(40)
	db := openTestDB(t)
	runs, err := loadString(db, "sites.jsonl", text)
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if r.Counts.Sites != int64(len(rows)) {
		t.Fatalf("counted %d site rows, want %d", r.Counts.Sites, len(rows))
	}
	series, err := db.Series(r)
	if err != nil || !slices.Equal(series, []SeriesRef{{Kind: "sites", GPU: 0, PID: 4242}}) {
		t.Fatalf("series %v %v", series, err)
	}
	var got []SiteSample
	it := db.SiteSamples(r, 0, 4242, MinTime, MaxTime)
	for it.Next() {
		got = append(got, it.At())
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	want := slices.Clone(rows)
	for i := range want {
		want[i].T = want[i].T / 1000 * 1000 // stored to 1 µs
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stored rows differ: %d rows, want %d\nfirst got  %+v\nfirst want %+v", len(got), len(want), got[0], want[0])
	}
	var out bytes.Buffer
	if err := exportStored(&out, db, r); err != nil {
		t.Fatal(err)
	}
	if got, want := linetest.Normalize(t, out.Bytes()), linetest.Normalize(t, []byte(text)); !slices.Equal(got, want) {
		t.Fatalf("export differs from the input:\n got %d lines\nwant %d lines\n%s", len(got), len(want), out.String()[:400])
	}
}

func TestSitesRefusedWhole(t *testing.T) {
	db := openTestDB(t)
	text := `{"type":"run","name":"x"}` + "\n" + `{"type":"gpu","gpu":0}` + "\n" +
		`{"type":"sites","t_ns":5,"gpu":3,"pid":1,"reason":"exit","sites":[{"file":"a.py","line":1}]}` + "\n"
	_, err := loadString(db, "bad.jsonl", text)
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:3: sites: GPU 3 is not declared") {
		t.Fatalf("error %v", err)
	}
}

// The site rows of a long run cost a few bytes each: every string is kept
// once per chunk, and byte counts that do not change cost almost nothing.
func TestSitesCompact(t *testing.T) {
	_, rows := siteRun(400)
	w := newRunWriter(Run{Name: "x", GPUs: []GPU{{Index: 0}}})
	if err := appendSites(w, rows); err != nil {
		t.Fatal(err)
	}
	var size int
	for _, g := range w.groups {
		if len(g.entries) > 0 {
			g.seal(len(g.entries), w.kind)
		}
		for _, kv := range g.pending {
			size += len(kv.v)
		}
	}
	text, _ := siteRun(400)
	perRow := float64(size) / float64(len(rows))
	t.Logf("%d rows: %d B stored (%.2f B/row), %d B as JSON Lines", len(rows), size, perRow, len(text))
	if perRow > 8 {
		t.Errorf("%.2f B per site row, want at most 8", perRow)
	}
}

func TestAddSitesToARun(t *testing.T) {
	db := openTestDB(t)
	text := `{"type":"run","name":"r"}` + "\n" + `{"type":"gpu","gpu":0}` + "\n" + `{"type":"gpu","gpu":1}` + "\n" +
		`{"type":"torch","t_ns":1000,"gpu":0,"pid":9,"allocated_bytes":5,"reserved_bytes":8}` + "\n"
	if _, err := loadString(db, "r.jsonl", text); err != nil {
		t.Fatal(err)
	}
	_, rows := siteRun(3)
	snaps := [][]SiteSample{rows[:22], rows[22:44], rows[44:]}
	r, err := db.AddSites("r", snaps)
	if err != nil {
		t.Fatal(err)
	}
	if r.Counts.Sites != int64(len(rows)) || r.Counts.TorchSamples != 1 {
		t.Fatalf("counts %+v", r.Counts)
	}
	var got []SiteSample
	it := db.SiteSamples(r, 0, 4242, MinTime, MaxTime)
	for it.Next() {
		got = append(got, it.At())
	}
	if len(got) != len(rows) || got[1].Label() != "train.py:52" {
		t.Fatalf("%d rows back, want %d", len(got), len(rows))
	}
	ts := db.TorchSamples(r, 0, 9, MinTime, MaxTime)
	if !ts.Next() || ts.At().Allocated != 5 {
		t.Fatal("the run's allocator sample is gone")
	}
	// The same process's sites again, or a GPU the run lacks, are refused whole.
	if _, err := db.AddSites("r", snaps[:1]); !errors.Is(err, ErrSitesExist) {
		t.Errorf("second add: %v", err)
	}
	other := slices.Clone(rows[:22])
	for i := range other {
		other[i].GPU, other[i].PID = 5, 1
	}
	if _, err := db.AddSites("r", [][]SiteSample{other}); err == nil || !strings.Contains(err.Error(), "GPU 5 is not declared") {
		t.Errorf("undeclared GPU: %v", err)
	}
	if r2, _ := db.Run("r"); r2.Counts != r.Counts {
		t.Errorf("a refused add changed the counts: %+v", r2.Counts)
	}
}
