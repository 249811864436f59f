package merge

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// nodeRun appends a node's run to db: one GPU sampled every 10 ms for 3 s
// from t0, and the step marks of its ranks at marks(rank, i) for each
// entry of steps (step numbers, in order; they may repeat).
func nodeRun(t *testing.T, db *storage.DB, name, host, job, uuid string, t0 int64, ranks []int, steps []int, mark func(rank, i int) int64) storage.Run {
	t.Helper()
	a, err := db.NewAppender(storage.Run{Name: name, Host: host, Job: job, StartNS: t0, GPUs: []storage.GPU{{Index: 0, UUID: uuid}}}, storage.AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 300 {
		a.AppendDevice(storage.DeviceSample{T: t0 + int64(i)*10e6, GPU: 0, Used: int64(1000 + i)})
	}
	for i, s := range steps {
		for _, r := range ranks {
			m := storage.NewMark(mark(r, i), wire.MarkStep)
			m.Step, m.Rank = s, r
			if err := a.AppendMark(m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	return a.Run()
}

// TestMergeClockOffset: node b's clock is 1.234 s ahead; its ranks mark
// each step at the same true time as node a's, give or take their own
// skew, and one of its marks is 2 s late. Step numbers restart each
// "epoch" (0..9 twice), so a step number alone does not pair marks.
func TestMergeClockOffset(t *testing.T) {
	src, dst := openTestDB(t), openTestDB(t)
	const t0, ahead = int64(1_700_000_000e9), int64(1_234_000_000)
	steps := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9}
	trueTime := func(i int) int64 { return t0 + 500e6 + int64(i)*100e6 }
	a := nodeRun(t, src, "a", "ha", "j", "GPU-a", t0, []int{0, 1}, steps, func(r, i int) int64 { return trueTime(i) + int64(r)*300e3 })
	b := nodeRun(t, src, "b", "hb", "j", "GPU-b", t0+ahead+40e6, []int{2, 3}, steps, func(r, i int) int64 {
		late := int64(0)
		if i == 7 && r == 2 {
			late = 2e9
		}
		return trueTime(i) + ahead + int64(r-2)*300e3 + late
	})
	run, err := Runs(context.Background(), dst, []Input{{File: "a.db", DB: src, Run: a}, {File: "b.db", DB: src, Run: b}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := run.Hosts[1]
	// Per node and step the median of its two ranks is the lower one (rank
	// skew 0 on both), so the offset is exact; the late mark is outvoted.
	if h.OffsetNS != ahead || h.CommonSteps != len(steps) || run.Name != "j" {
		t.Errorf("host b: %+v (want offset %d on %d steps), run %q", h, ahead, len(steps), run.Name)
	}
	// Node b's first sample, at its t0+ahead+40ms, is now at t0+40ms.
	it := dst.DeviceSamples(run, 1, storage.MinTime, storage.MaxTime)
	if !it.Next() || it.At().T != t0+40e6 || it.At().Used != 1000 {
		t.Errorf("node b's first sample after the merge: %+v %v", it.At(), it.Err())
	}
	if run.StartNS != t0 || run.GPUs[1].Host != "hb" || run.GPUs[1].HostGPU != 0 || run.GPUs[1].Index != 1 {
		t.Errorf("merged run: start %d, GPUs %+v", run.StartNS, run.GPUs)
	}
}

// TestMergeWithoutCommonSteps: nothing to align on; the clocks are taken
// as they are and the node says so (CommonSteps 0).
func TestMergeWithoutCommonSteps(t *testing.T) {
	src, dst := openTestDB(t), openTestDB(t)
	const t0 = int64(1_700_000_000e9)
	none := func(int, int) int64 { return 0 }
	a := nodeRun(t, src, "a", "ha", "", "GPU-a", t0, nil, nil, none)
	b := nodeRun(t, src, "b", "hb", "", "GPU-b", t0+5e9, nil, nil, none)
	run, err := Runs(context.Background(), dst, []Input{{File: "a.db", DB: src, Run: a}, {File: "b.db", DB: src, Run: b}}, Options{Name: "m"})
	if err != nil {
		t.Fatal(err)
	}
	if h := run.Hosts[1]; h.OffsetNS != 0 || h.CommonSteps != 0 || run.EndNS < t0+5e9 {
		t.Errorf("host b: %+v, run end %d", h, run.EndNS)
	}
	// The same names again: refused, and the run already there is kept.
	if _, err := Runs(context.Background(), dst, []Input{{File: "a.db", DB: src, Run: a}, {File: "b.db", DB: src, Run: b}}, Options{Name: "m"}); !errors.Is(err, storage.ErrExists) {
		t.Errorf("a second merge under the same name: %v", err)
	}
	if _, err := Runs(context.Background(), dst, []Input{{File: "a.db", DB: src, Run: a}}, Options{}); !errors.Is(err, ErrNoInput) {
		t.Errorf("one input: %v", err)
	}
	if _, err := Runs(context.Background(), dst, []Input{{File: "m", DB: dst, Run: run}, {File: "a.db", DB: src, Run: a}}, Options{Name: "m2"}); !errors.Is(err, ErrMerged) {
		t.Errorf("a merged run merged again: %v", err)
	}
}

// cancelAfter is a context whose Err reports Canceled from its nth call
// on: it stops a loop part way, where a context canceled from the start
// would stop it before it began.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestMergeContextStopsAndWritesNothing: a merge whose context ends at
// each point of its loops returns the context's error and leaves no run
// behind; with a context that never ends it merges.
func TestMergeContextStopsAndWritesNothing(t *testing.T) {
	src := openTestDB(t)
	const t0 = int64(1_700_000_000e9)
	steps := make([]int, 3000)
	for i := range steps {
		steps[i] = i
	}
	a := nodeRun(t, src, "a", "ha", "j", "GPU-a", t0, []int{0}, steps, func(_, i int) int64 { return t0 + int64(i)*1e6 })
	b := nodeRun(t, src, "b", "hb", "j", "GPU-b", t0, []int{1}, steps, func(_, i int) int64 { return t0 + int64(i)*1e6 })
	in := []Input{{File: "a.db", DB: src, Run: a}, {File: "b.db", DB: src, Run: b}}
	for _, n := range []int{0, 1, 2, 3, 4, 5} {
		dst := openTestDB(t)
		if _, err := Runs(&cancelAfter{context.Background(), n}, dst, in, Options{}); !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled after %d looks: %v", n, err)
		}
		if runs, err := dst.Runs(); err != nil || len(runs) != 0 {
			t.Errorf("canceled after %d looks: %d runs written, %v", n, len(runs), err)
		}
	}
	if _, err := Runs(context.Background(), openTestDB(t), in, Options{}); err != nil {
		t.Fatal(err)
	}
}

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
