package storage

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage/wire"
)

// openTestDB opens a fresh database in a temporary folder and checks on
// cleanup that every chunk in it decodes.
func openTestDB(t testing.TB) *DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "test.db")
	db, err := Open(path, Options{})
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

// exportStored writes r as JSON Lines the plain way, a series at a time
// through Iter.Next, then sorted by time (stable: equal times in series
// order, marks last), for tests that compare what the store gives back
// with what went in or import it again: an oracle apart from the fast
// export of formats/jsonl, which reads the same iterators a block at a
// time.
func exportStored(out *bytes.Buffer, db *DB, r Run) error {
	head, err := json.Marshal(struct {
		Type    string `json:"type"`
		Name    string `json:"name"`
		StartNS int64  `json:"start_ns"`
	}{"run", r.Name, r.StartNS})
	if err != nil {
		return err
	}
	out.Write(append(head, '\n'))
	for _, g := range r.GPUs {
		fmt.Fprintf(out, "{\"type\":\"gpu\",\"gpu\":%d}\n", g.Index)
	}
	series, err := db.Series(r)
	if err != nil {
		return err
	}
	type line struct {
		t int64
		b []byte
	}
	var lines []line
	add := func(t int64, b []byte) { lines = append(lines, line{t, b}) }
	for _, s := range series {
		switch s.Kind {
		case SeriesDevice:
			err = eachRow(db.DeviceSamples(r, s.GPU, MinTime, MaxTime), func(v DeviceSample) { add(v.T, wire.AppendDevice(nil, v)) })
		case SeriesProc:
			err = eachRow(db.ProcSamples(r, s.GPU, s.PID, MinTime, MaxTime), func(v ProcSample) { add(v.T, wire.AppendProc(nil, v)) })
		case SeriesTorch:
			budgets := map[int64]BudgetSample{}
			if err = eachRow(db.BudgetSamples(r, s.GPU, s.PID, MinTime, MaxTime), func(v BudgetSample) { budgets[v.T] = v }); err != nil {
				return err
			}
			err = eachRow(db.TorchSamples(r, s.GPU, s.PID, MinTime, MaxTime), func(v TorchSample) {
				if bs, ok := budgets[v.T]; ok {
					add(v.T, wire.AppendTorchBudget(nil, v, bs))
				} else {
					add(v.T, wire.AppendTorch(nil, v))
				}
			})
		case SeriesSites:
			var snap []SiteSample
			err = eachRow(db.SiteSamples(r, s.GPU, s.PID, MinTime, MaxTime), func(v SiteSample) {
				if len(snap) > 0 && (v.File == wire.SiteUntracked || v.T != snap[0].T) {
					add(snap[0].T, wire.AppendSites(nil, snap))
					snap = snap[:0]
				}
				snap = append(snap, v)
			})
			if len(snap) > 0 {
				add(snap[0].T, wire.AppendSites(nil, snap))
			}
		}
		if err != nil {
			return err
		}
	}
	if err := eachRow(db.Marks(r, MinTime, MaxTime), func(m Mark) { add(m.T, wire.AppendMark(nil, m)) }); err != nil {
		return err
	}
	slices.SortStableFunc(lines, func(a, b line) int { return cmp.Compare(a.t, b.t) })
	for _, l := range lines {
		out.Write(l.b)
	}
	return nil
}

// eachRow calls f with every row of it.
func eachRow[T any](it *Iter[T], f func(T)) error {
	for it.Next() {
		f(it.At())
	}
	return it.Err()
}

func importString(db *DB, name, s string, opts ImportOptions) ([]Run, error) {
	return db.Import([]Source{{Name: name, R: strings.NewReader(s)}}, opts)
}

// importGenerated imports a 40 s generated run of gpus GPUs (several
// sealed chunks per group) into a fresh database; it returns the lines too.
func importGenerated(t *testing.T, gpus int) (*DB, Run, []byte) {
	t.Helper()
	var buf bytes.Buffer
	c := tracegen.Default()
	c.GPUs, c.Duration = gpus, 40*time.Second
	if _, err := tracegen.Write(&buf, c); err != nil {
		t.Fatal(err)
	}
	db := openTestDB(t)
	runs, err := db.Import([]Source{{Name: "gen", R: bytes.NewReader(buf.Bytes())}}, ImportOptions{Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	return db, runs[0], buf.Bytes()
}

func TestIteratorRange(t *testing.T) {
	db := openTestDB(t)
	a, err := db.NewAppender(Run{Name: "r", StartNS: 0, GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	n := 3*chunkEntries + 17
	for i := 0; i < n; i++ {
		if err := a.AppendDevice(DeviceSample{T: int64(i) * 1e6, GPU: 0, Used: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	r := a.Run()
	for _, tc := range []struct{ from, to, first, count int64 }{
		{MinTime, MaxTime, 0, int64(n)},
		{5e6, 10e6, 5, 5},
		{5e6 + 1, 10e6 + 1, 6, 5},
		{int64(chunkEntries-3) * 1e6, int64(chunkEntries+3) * 1e6, chunkEntries - 3, 6}, // across chunks
		{int64(n+5) * 1e6, MaxTime, 0, 0},
		{MinTime, 0, 0, 0},
	} {
		it := db.DeviceSamples(r, 0, tc.from, tc.to)
		var got []int64
		for it.Next() {
			got = append(got, it.At().Used)
		}
		if it.Err() != nil {
			t.Fatal(it.Err())
		}
		if int64(len(got)) != tc.count || (len(got) > 0 && got[0] != tc.first) {
			t.Errorf("[%d,%d): %d samples from %v, want %d from %d", tc.from, tc.to, len(got), first(got), tc.count, tc.first)
		}
		for i := 1; i < len(got); i++ {
			if got[i] != got[i-1]+1 {
				t.Fatalf("[%d,%d): gap at %d", tc.from, tc.to, i)
			}
		}
	}
	// An unknown series is empty, not an error.
	if it := db.DeviceSamples(r, 5, MinTime, MaxTime); it.Next() || it.Err() != nil {
		t.Error("unknown GPU yields samples")
	}
}

// TestWithin checks that a windowed run reads only its window, for every
// kind of series and for export, and that windows nest.
func TestWithin(t *testing.T) {
	db := openTestDB(t)
	a, err := db.NewAppender(Run{Name: "r", StartNS: 0, GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	n := 2*chunkEntries + 5
	for i := 0; i < n; i++ {
		ts := int64(i) * 1e6
		must(t, a.AppendDevice(DeviceSample{T: ts, GPU: 0, Used: int64(i)}))
		must(t, a.AppendProc(ProcSample{T: ts, GPU: 0, PID: 7, Used: int64(i)}))
		must(t, a.AppendTorch(TorchSample{T: ts, GPU: 0, PID: 7, Rank: None, Allocated: int64(i)}))
		if i%100 == 0 {
			must(t, a.AppendMark(Mark{T: ts, Kind: wire.MarkStep, Step: i, Epoch: None, Rank: None, GPU: None, PID: None, Code: None}))
		}
	}
	must(t, a.Close())
	whole := a.Run()
	// [250 ms, 1250 ms): samples 250..1249, marks 300..1200.
	w := whole.Within(250e6, 1250e6)
	if w.StartNS != 250e6 || w.EndNS != 1250e6-1 {
		t.Fatalf("window bounds %d..%d", w.StartNS, w.EndNS)
	}
	if from, to, ok := w.Window(); !ok || from != 250e6 || to != 1250e6 {
		t.Fatalf("Window() = %d, %d, %v", from, to, ok)
	}
	count := func(r Run) (dev, proc, torch, marks int) {
		for it := db.DeviceSamples(r, 0, MinTime, MaxTime); it.Next(); {
			dev++
		}
		for it := db.ProcSamples(r, 0, 7, MinTime, MaxTime); it.Next(); {
			proc++
		}
		for it := db.TorchSamples(r, 0, 7, MinTime, MaxTime); it.Next(); {
			torch++
		}
		for it := db.Marks(r, MinTime, MaxTime); it.Next(); {
			marks++
		}
		return
	}
	if d, p, tr, m := count(w); d != 1000 || p != 1000 || tr != 1000 || m != 10 {
		t.Fatalf("window reads %d device, %d proc, %d torch samples and %d marks; want 1000, 1000, 1000, 10", d, p, tr, m)
	}
	// A narrower range asked of the windowed run stays inside the window.
	it := db.DeviceSamples(w, 0, 0, 300e6)
	var got []int64
	for it.Next() {
		got = append(got, it.At().Used)
	}
	if len(got) != 50 || got[0] != 250 {
		t.Fatalf("range inside the window: %d samples from %v", len(got), first(got))
	}
	// Windows nest.
	if d, _, _, _ := count(w.Within(0, 500e6)); d != 250 {
		t.Fatalf("nested window reads %d device samples, want 250", d)
	}
	// Export writes the window only, as a run that starts there.
	var out bytes.Buffer
	must(t, exportStored(&out, db, w))
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2+3000+10 || !strings.Contains(lines[0], `"start_ns":250000000`) {
		t.Fatalf("export of the window: %d lines, head %s", len(lines), lines[0])
	}
	if d, _, _, _ := count(whole); d != n {
		t.Fatalf("the whole run reads %d device samples, want %d", d, n)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func first(s []int64) any {
	if len(s) == 0 {
		return nil
	}
	return s[0]
}

func TestOutOfOrderSortedOrRefused(t *testing.T) {
	db := openTestDB(t)
	head := `{"type":"run","name":"r","start_ns":0}` + "\n" + `{"type":"gpu","gpu":0}` + "\n"
	lines := head
	for _, ts := range []int{5, 3, 4, 1, 2} {
		lines += fmt.Sprintf(`{"type":"sample","t_ns":%d000,"gpu":0,"used_bytes":%d}`+"\n", ts, ts)
	}
	runs, err := importString(db, "ooo.jsonl", lines, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	it := db.DeviceSamples(runs[0], 0, MinTime, MaxTime)
	var got []int64
	for it.Next() {
		got = append(got, it.At().Used)
	}
	if !slices.Equal(got, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("got %v, want sorted", got)
	}

	// Beyond the buffer window: refused with the line number.
	var b strings.Builder
	b.WriteString(strings.Replace(head, `"r"`, `"late"`, 1))
	for i := 0; i < 2*chunkEntries+10; i++ {
		fmt.Fprintf(&b, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":1}`+"\n", 1e9+int64(i)*1e6)
	}
	b.WriteString(`{"type":"sample","t_ns":5,"gpu":0,"used_bytes":1}` + "\n")
	_, err = importString(db, "late.jsonl", b.String(), ImportOptions{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("late.jsonl:%d:", 2*chunkEntries+13)) || !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("err = %v", err)
	}
}

func TestImportBadInputLeavesDatabaseUnchanged(t *testing.T) {
	good := `{"type":"run","name":"a","start_ns":1}
{"type":"gpu","gpu":0,"total_bytes":1000}
{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5}
`
	cases := []struct {
		name, input, want string
	}{
		{"malformed", good + "{\"type\":\"sample\",\n", "bad.jsonl:4: malformed JSON"},
		{"wrong type", good + `{"type":"sample","t_ns":"10","gpu":0,"used_bytes":5}`, `bad.jsonl:4: sample: "t_ns": want an integer, got string`},
		{"float bytes", good + `{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5.5}`, `bad.jsonl:4: sample: "used_bytes": not an integer`},
		{"negative", good + `{"type":"sample","t_ns":11,"gpu":0,"used_bytes":-5}`, "bad.jsonl:4: sample: used_bytes is negative (-5)"},
		{"undeclared gpu", good + `{"type":"sample","t_ns":11,"gpu":3,"used_bytes":5}`, "bad.jsonl:4: sample: GPU 3 is not declared"},
		{"missing field", good + `{"type":"proc","t_ns":11,"gpu":0,"used_bytes":5}`, `bad.jsonl:4: proc: missing "pid"`},
		{"unknown type", good + `{"type":"nope"}`, `bad.jsonl:4: unknown type "nope"`},
		{"not an object", good + `[1,2]`, "bad.jsonl:4: want a JSON object"},
		{"data first", `{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5}`, "bad.jsonl:1: data before the first"},
		{"negative torch", good + `{"type":"torch","t_ns":11,"gpu":0,"pid":1,"allocated_bytes":-1,"reserved_bytes":0}`, "bad.jsonl:4: torch: allocated_bytes is negative"},
		{"negative epoch", good + `{"type":"mark","t_ns":11,"kind":"epoch_start","epoch":-2}`, `bad.jsonl:4: mark: "epoch" is negative`},
		{"taken name", `{"type":"run","name":"kept"}`, `bad.jsonl:1: run "kept": a run with that name already exists`},
		{"empty", "\n\n", "no run in the input"},
		{"duplicate gpu", good + `{"type":"gpu","gpu":0}`, "bad.jsonl:4: gpu 0 declared twice"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			db := openTestDB(t)
			if _, err := importString(db, "kept.jsonl", strings.ReplaceAll(good, `"a"`, `"kept"`), ImportOptions{}); err != nil {
				t.Fatal(err)
			}
			before, _ := db.Runs()
			// The good run comes first in the same input: it must not stay.
			_, err := importString(db, "bad.jsonl", tc.input, ImportOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
			after, _ := db.Runs()
			if len(after) != len(before) || after[0].Name != "kept" {
				t.Fatalf("database changed: %v", after)
			}
		})
	}
}

func TestImportUnknownFieldsIgnored(t *testing.T) {
	db := openTestDB(t)
	runs, err := importString(db, "x", `{"type":"run","name":"a","start_ns":1,"future":{"x":[1]}}
{"type":"gpu","gpu":0,"nvlink":true}
{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5,"temperature_c":61}
`, ImportOptions{})
	if err != nil || runs[0].Counts.Samples != 1 {
		t.Fatal(runs, err)
	}
}

func TestImportRenameReplaceAndSeveralRuns(t *testing.T) {
	db := openTestDB(t)
	two := `{"type":"run","name":"a"}
{"type":"gpu","gpu":0}
{"type":"sample","t_ns":10,"gpu":0,"used_bytes":5}
{"type":"run","name":"b","tags":{"batch_size":64,"amp":"on"}}
{"type":"gpu","gpu":0}
{"type":"sample","t_ns":20,"gpu":0,"used_bytes":6}
`
	runs, err := importString(db, "two", two, ImportOptions{})
	if err != nil || len(runs) != 2 || runs[1].Tags["batch_size"] != "64" || runs[0].StartNS != 10 {
		t.Fatal(runs, err)
	}
	if _, err := importString(db, "two", two, ImportOptions{Name: "c"}); !errors.Is(err, ErrRenameMany) || !strings.Contains(err.Error(), "two:4:") {
		t.Fatalf("rename of two runs: %v", err)
	}
	if _, err := importString(db, "two", two, ImportOptions{}); !errors.Is(err, ErrExists) {
		t.Fatalf("reimport: %v", err)
	}
	runs2, err := importString(db, "two", two, ImportOptions{Replace: true})
	if err != nil {
		t.Fatal(err)
	}
	all, _ := db.Runs()
	if len(all) != 2 || all[0].ID == runs[0].ID {
		t.Fatalf("replace: %v", all)
	}
	it := db.DeviceSamples(runs2[1], 0, MinTime, MaxTime)
	if !it.Next() || it.At().Used != 6 {
		t.Fatal("replaced run's data")
	}
	if _, err := db.Delete("a", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Run("a"); !errors.Is(err, ErrNoRun) {
		t.Fatal(err)
	}
	r, err := db.SetTags("b", map[string]string{"amp": "", "lr": "0.1"})
	if err != nil || r.Tags["lr"] != "0.1" || r.Tags["amp"] != "" || len(r.Tags) != 2 {
		t.Fatal(r.Tags, err)
	}
	if r2, err := db.Run(fmt.Sprint(r.ID)); err != nil || r2.Name != "b" {
		t.Fatal("lookup by id", err)
	}
}

func TestLockTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	w, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	start := time.Now()
	for _, ro := range []bool{false, true} {
		_, err = Open(path, Options{ReadOnly: ro, LockTimeout: 100 * time.Millisecond})
		if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), path) {
			t.Fatalf("readonly=%v: %v", ro, err)
		}
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("lock wait did not time out")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "missing.db"), Options{ReadOnly: true}); !errors.Is(err, ErrNoDB) {
		t.Fatal(err)
	}
}

func TestUnknownVersionRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.bolt.Update(func(tx *boltTx) error { return tx.Bucket(bucketMeta).Put(keyVersion, []byte("99")) })
	db.created = false // kept without a run, as a file from a later memrec would be
	db.Close()
	_, err = Open(path, Options{ReadOnly: true})
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "99") {
		t.Fatal(err)
	}
	db2, _ := Open(path, Options{})
	if db2 != nil {
		t.Fatal("writer opened a file of an unknown version")
	}
}

// TestAppenderCrashKeepsCommitted: a writer that dies after a commit leaves
// its run incomplete with every committed sample readable.
func TestAppenderCrashKeepsCommitted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "crash.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := db.NewAppender(Run{Name: "crash", GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		a.AppendDevice(DeviceSample{T: int64(i) * 1e6, Used: int64(i)})
		a.AppendMark(Mark{T: int64(i) * 1e6, Kind: wire.MarkStep, Step: i, Epoch: None, Rank: 0, GPU: None, PID: None, Code: None})
		if i == 599 {
			if err := a.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	db.bolt.Close() // the process dies: no Close, no final commit

	db, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Run("crash")
	if err != nil || r.Complete || r.Counts.Samples != 600 {
		t.Fatalf("%+v %v", r, err)
	}
	it := db.DeviceSamples(r, 0, MinTime, MaxTime)
	n := 0
	for it.Next() {
		if it.At().Used != int64(n) {
			t.Fatal("wrong value")
		}
		n++
	}
	marks := db.Marks(r, MinTime, MaxTime)
	m := 0
	for marks.Next() {
		m++
	}
	if n != 600 || m != 600 {
		t.Fatalf("%d samples, %d marks readable, want 600", n, m)
	}
}

// TestAppenderTimedCommitAndRewrite: the open chunk is rewritten at every
// commit, never duplicated.
func TestAppenderTimedCommitAndRewrite(t *testing.T) {
	db := openTestDB(t)
	a, err := db.NewAppender(Run{Name: "timed", GPUs: []GPU{{Index: 0}, {Index: 1}}}, AppendOptions{CommitInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3*chunkEntries; i++ {
		a.AppendDevice(DeviceSample{T: int64(i) * 1e6, GPU: i % 2, Used: int64(i)})
		if i%5000 == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	r := a.Run()
	n := 0
	for g := 0; g < 2; g++ {
		it := db.DeviceSamples(r, g, MinTime, MaxTime)
		for it.Next() {
			n++
		}
	}
	if n != 3*chunkEntries || !r.Complete {
		t.Fatalf("%d samples, complete %v", n, r.Complete)
	}
}

// TestAppenderCommitsOnItsTimer: without Commit or Close, what was
// appended becomes readable within a few commit intervals. (Close commits
// too, so a test that closes first would pass with a dead timer.)
func TestAppenderCommitsOnItsTimer(t *testing.T) {
	t.Parallel()
	db := openTestDB(t)
	a, err := db.NewAppender(Run{Name: "timer", GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	const n = 100
	for i := range n {
		if err := a.AppendDevice(DeviceSample{T: int64(i) * 1e6, GPU: 0, Used: int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	readable := func() int {
		r, err := db.Run("timer")
		if err != nil {
			t.Fatal(err)
		}
		k := 0
		for it := db.DeviceSamples(r, 0, MinTime, MaxTime); it.Next(); {
			k++
		}
		return k
	}
	for deadline := time.Now().Add(10 * time.Second); readable() != n; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s (500 intervals) %d of %d samples are readable: the timer does not commit", readable(), n)
		}
	}
}

type boltTx = bolt.Tx

// TestAppenderBoundsMemoryWhileCommitsFail: while the database cannot be
// written, sealed chunks wait in memory up to MaxPending; past it the oldest
// are dropped, counted in Lost and left out of the run's counts, and what
// was committed before stays readable.
func TestAppenderBoundsMemoryWhileCommitsFail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "full.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	const max = 100 << 10
	a, err := db.NewAppender(Run{Name: "full", GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: -1, MaxPending: max})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	appendN := func(from, n int) {
		for i := from; i < from+n; i++ {
			if err := a.AppendDevice(DeviceSample{T: int64(i) * 1e6, Used: rng.Int64N(1 << 20)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	const committed = 3 * chunkEntries
	appendN(0, committed)
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	db.bolt.Close() // from now on every commit fails
	appendN(committed, 8*chunkEntries)
	err = a.Commit()
	lost := a.Lost()
	if err == nil || !strings.Contains(err.Error(), "dropped the oldest") || lost.Samples == 0 || lost.Samples%chunkEntries != 0 {
		t.Fatalf("err %v, lost %+v", err, lost)
	}
	pending := 0
	for _, g := range a.w.groups {
		for _, kv := range g.pending {
			pending += len(kv.v)
		}
	}
	if pending > max || pending == 0 {
		t.Fatalf("%d bytes pending, bound %d", pending, max)
	}
	if got := a.Run().Counts.Samples; got != committed+8*chunkEntries-lost.Samples {
		t.Fatalf("run counts %d samples, lost %d", got, lost.Samples)
	}

	db, err = Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Run("full")
	if err != nil || r.Complete || r.Counts.Samples != committed {
		t.Fatalf("%+v %v", r, err)
	}
	it := db.DeviceSamples(r, 0, MinTime, MaxTime)
	n := 0
	for it.Next() {
		n++
	}
	if n != committed {
		t.Fatalf("%d samples readable, want %d", n, committed)
	}
}

// TestAppenderSealsLive: at a commit the Appender seals the device group up
// to its newest tick and other groups up to liveLateWindow before their
// newest entry, so marks may still arrive that late; everything reads back
// in order.
func TestAppenderSealsLive(t *testing.T) {
	db := openTestDB(t)
	a, err := db.NewAppender(Run{Name: "live", GPUs: []GPU{{Index: 0}}}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	mark := func(ms int64) error {
		return a.AppendMark(Mark{T: ms * 1e6, Kind: wire.MarkEvent, Epoch: None, Step: None, Rank: None, GPU: None, PID: None, Code: None})
	}
	for ms := int64(0); ms < 10000; ms++ {
		if err := a.AppendDevice(DeviceSample{T: ms * 1e6, Used: ms}); err != nil {
			t.Fatal(err)
		}
		if err := mark(ms); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	dev, marks := a.w.groups[groupDevice], a.w.groups[groupMarks]
	if len(dev.entries) != 1 || !dev.sealed || len(marks.entries) != 10000 || marks.sealed {
		t.Fatalf("after 10 s: device open %d, marks open %d (sealed %v)", len(dev.entries), len(marks.entries), marks.sealed)
	}
	for ms := int64(10000); ms < 20000; ms++ {
		if err := mark(ms); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Commit(); err != nil {
		t.Fatal(err)
	}
	if marks.floor > 10e6 || marks.floor < 9e6 || len(marks.entries) > 10001 {
		t.Fatalf("marks sealed to %d µs, %d open", marks.floor, len(marks.entries))
	}
	if err := mark(10500); err != nil { // 9.5 s late: accepted
		t.Fatal(err)
	}
	if err := mark(9000); !errors.Is(err, ErrOutOfOrder) { // 11 s late
		t.Fatalf("11 s late: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	r, _ := db.Run("live")
	it, n, last := db.Marks(r, MinTime, MaxTime), 0, int64(-1)
	for it.Next() {
		if it.At().T < last {
			t.Fatal("marks out of order")
		}
		last = it.At().T
		n++
	}
	ds, m := db.DeviceSamples(r, 0, MinTime, MaxTime), int64(0)
	for ds.Next() {
		if ds.At().Used != m {
			t.Fatalf("device sample %d holds %d", m, ds.At().Used)
		}
		m++
	}
	if n != 20001 || m != 10000 || r.Counts.Marks != 20001 {
		t.Fatalf("%d marks, %d device samples read back; counts %+v", n, m, r.Counts)
	}
}
