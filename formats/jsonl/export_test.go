package jsonl

import (
	"bytes"
	"cmp"
	"encoding/json"
	"io"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/testsupport/fixtures"
	"github.com/memrec/memrec/testsupport/linetest"
)

// openTestDB opens a fresh database in a temporary folder and checks on
// cleanup that every chunk in it decodes.
func openTestDB(t testing.TB) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "test.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Check(); err != nil {
			t.Errorf("consistency check: %v", err)
		}
		db.Close()
	})
	return db
}

// importGenerated imports a generated run of gpus GPUs lasting d (several
// sealed chunks per group at 40 s) into a fresh database; it returns the
// lines too.
func importGenerated(t testing.TB, gpus int, d time.Duration) (*storage.DB, storage.Run, []byte) {
	t.Helper()
	var buf bytes.Buffer
	c := tracegen.Default()
	c.GPUs, c.Duration = gpus, d
	if _, err := tracegen.Write(&buf, c); err != nil {
		t.Fatal(err)
	}
	db := openTestDB(t)
	runs, err := Import(db, []Source{{Name: "gen", R: bytes.NewReader(buf.Bytes())}}, ImportOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	return db, runs[0], buf.Bytes()
}

func TestImportExportRoundTripReal(t *testing.T) {
	for _, f := range []string{fixtures.CleanRun, fixtures.LeakRun} {
		t.Run(f, func(t *testing.T) {
			db := openTestDB(t)
			in := fixtures.Read(t, f)
			runs, err := Import(db, []Source{{Name: f, R: bytes.NewReader(in)}}, ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := Export(&out, db, runs[0]); err != nil {
				t.Fatal(err)
			}
			want, got := linetest.Normalize(t, in), linetest.Normalize(t, out.Bytes())
			if len(want) != len(got) {
				t.Fatalf("export has %d data lines, input %d", len(got), len(want))
			}
			for i := range want {
				if want[i] != got[i] {
					t.Fatalf("line differs:\n got %s\nwant %s", got[i], want[i])
				}
			}
			// The exported file imports again to the same export.
			runs2, err := Import(db, []Source{{Name: "export", R: bytes.NewReader(out.Bytes())}}, ImportOptions{Name: "again"})
			if err != nil {
				t.Fatal(err)
			}
			var out2 bytes.Buffer
			if err := Export(&out2, db, runs2[0]); err != nil {
				t.Fatal(err)
			}
			first := strings.SplitN(out.String(), "\n", 2)
			second := strings.SplitN(out2.String(), "\n", 2)
			if first[1] != second[1] {
				t.Fatal("second export differs from the first")
			}
			r := runs[0]
			if r.Tags["model"] != "resnet18" || len(r.GPUs) != 1 || r.GPUs[0].TotalBytes != 150754820096 || !r.Complete {
				t.Fatalf("run metadata: %+v", r)
			}
		})
	}
}

func TestImportGeneratedRoundTrip(t *testing.T) {
	const gpus = 3
	db, run, lines := importGenerated(t, gpus, 40*time.Second)
	var out bytes.Buffer
	if err := Export(&out, db, run); err != nil {
		t.Fatal(err)
	}
	if want, got := linetest.Normalize(t, lines), linetest.Normalize(t, out.Bytes()); !slices.Equal(want, got) {
		t.Fatalf("round trip differs: %d lines in, %d out", len(want), len(got))
	}
	// The export is in time order.
	var last int64
	for i, l := range strings.Split(strings.TrimSpace(out.String()), "\n")[1+gpus:] {
		var m struct {
			T int64 `json:"t_ns"`
		}
		json.Unmarshal([]byte(l), &m)
		if m.T < last {
			t.Fatalf("export line %d goes back in time", i)
		}
		last = m.T
	}
}

// TestExportBudgetAndSites: a torch line carries the budget of its sample
// and no other; a site snapshot is one line however many rows it has. The
// input is written by wire's own appenders, so the export must give it
// back line for line.
func TestExportBudgetAndSites(t *testing.T) {
	torch := storage.TorchSample{T: 1_001_000_000, GPU: 0, PID: 7, Allocated: 5000, Reserved: 8192, Active: 5000, PeakAllocated: 6000, Segments: 1}
	watched := torch
	watched.T = 1_002_000_000
	budget := storage.BudgetSample{T: watched.T, GPU: 0, PID: 7, Params: 1024, Grads: 1024, OptimizerState: 2048, Buffers: 32,
		ParamCount: 256, Trainable: 256, Autocast: storage.AutocastOn, Optimizer: "AdamW"}
	head := storage.SiteSample{T: 1_003_000_000, GPU: 0, PID: 7, Reason: wire.SitesEpochEnd, File: wire.SiteUntracked, LiveBytes: 4096, LiveBlocks: 1}
	site := head
	site.File, site.Line, site.Func, site.LiveBytes = "/home/u/train.py", 52, "step", 1<<20
	in := `{"type":"run","name":"b","start_ns":1000000000}` + "\n" + `{"type":"gpu","gpu":0,"total_bytes":1000000000}` + "\n" +
		string(wire.AppendTorch(nil, torch)) + string(wire.AppendTorchBudget(nil, watched, budget)) +
		string(wire.AppendSites(nil, []storage.SiteSample{head, site}))
	db := openTestDB(t)
	runs, err := Import(db, []Source{{Name: "b.jsonl", R: strings.NewReader(in)}}, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Export(&out, db, runs[0]); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if want := strings.Split(strings.TrimSpace(in), "\n")[2:]; !slices.Equal(lines[2:], want) {
		t.Fatalf("export data lines:\n%s\nwant\n%s", strings.Join(lines[2:], "\n"), strings.Join(want, "\n"))
	}
}

// BenchmarkExport writes a stored 5-minute 8-GPU run as JSON Lines (the
// export command's work less the file), and reports the time per line.
func BenchmarkExport(b *testing.B) {
	db, r, _ := importGenerated(b, 8, 5*time.Minute)
	var out bytes.Buffer
	if err := Export(&out, db, r); err != nil {
		b.Fatal(err)
	}
	lines := bytes.Count(out.Bytes(), []byte("\n"))
	b.ReportAllocs()
	for b.Loop() {
		if err := Export(io.Discard, db, r); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(lines*b.N), "ns/line")
	b.ReportMetric(float64(out.Len())/float64(lines), "B/line")
}

// nsText writes what strconv writes for t*1000 over ascending times: by a
// tick, by one, through carries into a new digit and a new second, from
// and to zero and negative times, and a time that goes back (each sequence
// from a fresh nsText and, run after run, from the last one's digits).
func TestNSTextMatchesStrconv(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	random := []int64{1764430000000000}
	for range 2000 {
		random = append(random, random[len(random)-1]+rng.Int64N(30000))
	}
	var kept nsText
	for _, ts := range [][]int64{
		{1764429999999992, 1764430000010010, 1764430000020010, 1764430000020011},
		{9, 10, 99, 100, 999, 1000, 9999999, 10000000},
		{999998, 999999, 1000000, 1000001, 1999999, 2000000, 2000099, 2000100, 2010000},
		{-5, -1, 0, 1, 2, 0, 5},
		{1764430000000000, 1764429999999999, 1764430000000001},
		{99999999999999, 100000000000001, 999999999999999999 / 1000},
		random,
	} {
		var fresh nsText
		for _, v := range ts {
			want := strconv.AppendInt(nil, v*1000, 10)
			if got := fresh.set(v); string(got) != string(want) {
				t.Fatalf("set(%d) after the times before it in %v = %s, want %s", v, ts[:min(len(ts), 6)], got, want)
			}
			if got := kept.set(v); string(got) != string(want) {
				t.Fatalf("set(%d), kept from earlier sequences = %s, want %s", v, got, want)
			}
		}
	}
}

// fakeBlocks is a source of lines `src "t_ns":t` in blocks of the given
// times; a line is the one before it but for its time, which writeLines may
// take as such (repeats) or not.
type fakeBlocks struct {
	name    string
	blocks  [][]int64
	cur     []int64
	repeats bool
}

func (f *fakeBlocks) next() []int64 {
	if len(f.blocks) == 0 {
		f.cur = nil
		return nil
	}
	f.cur, f.blocks = f.blocks[0], f.blocks[1:]
	return f.cur
}

func (f *fakeBlocks) appendLine(b []byte, i int, tNS []byte) []byte {
	return append(append(append(append(b, f.name...), ` "t_ns":`...), tNS...), '\n')
}

func (f *fakeBlocks) repeatsUntil() int {
	if f.repeats {
		return len(f.cur)
	}
	return 0
}

func (f *fakeBlocks) err() error { return nil }

// writeLines gives the lines of its sources in time order, equal times in
// the order of the sources, whichever sources are marked as tick series and
// whether or not they say their lines repeat (passes copied from the one
// before, many in a row where the tick series share their times): the
// expected text is a stable sort of every source's lines by
// time, made independently of the merge.
func TestWriteLinesOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 49))
	for round := 0; round < 200; round++ {
		n := 1 + rng.IntN(8)
		srcs := make([]source, n)
		type want struct {
			t    int64
			text string
		}
		var all []want
		for k := range srcs {
			f := &fakeBlocks{name: "s" + strconv.Itoa(k), repeats: rng.IntN(4) > 0}
			// From round 100 on, times of nineteen digits in ns and
			// longer blocks: the passes written ahead (lockstep) run
			// for many ticks.
			base, blockLen := int64(0), 5
			if round >= 100 {
				base, blockLen = 1764430000000000, 60
			}
			tm := base + int64(rng.IntN(5))
			ticks := round%2 == 0 // every source at every time from base, as a run's samples are at its ticks
			if ticks {
				tm = base - 1
			}
			for range rng.IntN(4) {
				blk := make([]int64, rng.IntN(blockLen)) // an empty block ends the source
				for i := range blk {
					if ticks {
						tm++
					} else {
						tm += int64(rng.IntN(3)) // equal times within and across sources
					}
					blk[i] = tm
				}
				f.blocks = append(f.blocks, blk)
			}
			tick := rng.IntN(2) == 0
			if round >= 100 && round%4 == 1 { // tick series of the same times, equal ones too, that repeat
				if k > 0 {
					f.blocks = srcs[0].lineBlocks.(*fakeBlocks).blocks
				}
				tick, f.repeats = true, true
			}
			for _, blk := range f.blocks {
				if len(blk) == 0 {
					break
				}
				for _, tm := range blk {
					all = append(all, want{tm, f.name + ` "t_ns":` + strconv.FormatInt(tm*1000, 10) + "\n"})
				}
			}
			srcs[k] = source{f, tick}
		}
		slices.SortStableFunc(all, func(a, b want) int { return cmp.Compare(a.t, b.t) })
		var exp strings.Builder
		for _, w := range all {
			exp.WriteString(w.text)
		}
		var got bytes.Buffer
		if err := writeLines(&got, make([]byte, 0, 1<<17), srcs, func() {}); err != nil {
			t.Fatal(err)
		}
		if got.String() != exp.String() {
			t.Fatalf("round %d: writeLines wrote\n%s\nwant\n%s", round, got.String(), exp.String())
		}
	}
}
