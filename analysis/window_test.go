package analysis

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// TestWindowBounds resolves every kind of bound on a run of 3 epochs of 10
// steps of 100 ms whose scripts restart the step count each epoch.
func TestWindowBounds(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, `{"type":"run","name":"w","start_ns":%d}`+"\n", t0)
	fmt.Fprintf(&b, `{"type":"gpu","gpu":0,"total_bytes":%d}`+"\n", int64(GiB))
	ts := t0 + 1e9 // epochs start a second in, each 2 µs after the last ended
	var epochStart, stepMark []int64
	for e := range 3 {
		fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":%d}`+"\n", ts, e)
		epochStart = append(epochStart, ts)
		for s := range 10 {
			ts += 100e6
			fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"step","step":%d}`+"\n", ts, s)
			stepMark = append(stepMark, ts)
		}
		fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":%d}`+"\n", ts+1000, e)
		ts += 2000
	}
	for k := int64(0); k <= 50; k++ {
		fmt.Fprintf(&b, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", t0+k*100e6, k)
	}
	db, err := storage.Open(filepath.Join(t.TempDir(), "w.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "w", R: strings.NewReader(b.String())}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := runs[0]
	start := time.Unix(0, t0).Local()
	clock := time.Duration(start.Hour())*time.Hour + time.Duration(start.Minute())*time.Minute + time.Duration(start.Second()+2)*time.Second
	for _, tc := range []struct {
		name     string
		from, to Bound
		lo, hi   int64 // the window [lo, hi)
	}{
		{"seconds", Bound{Kind: BoundSeconds, Seconds: 1.5}, Bound{Kind: BoundSeconds, Seconds: 2}, t0 + 1.5e9, t0 + 2e9},
		{"clock", Bound{Kind: BoundClock, Clock: clock}, Bound{}, start.Truncate(time.Second).Add(2 * time.Second).UnixNano(), storage.MaxTime},
		{"time", Bound{Kind: BoundTime, TimeNS: t0 + 3e9}, Bound{}, t0 + 3e9, storage.MaxTime},
		{"epoch", Bound{Kind: BoundEpoch, N: 1}, Bound{Kind: BoundEpoch, N: 1}, epochStart[1], stepMark[19] + 1000 + 1},
		// Step numbers restart each epoch: step:12 is the thirteenth step,
		// the third of epoch 1; the first of an epoch starts at the epoch.
		{"step by position", Bound{Kind: BoundStep, N: 12}, Bound{Kind: BoundStep, N: 12}, stepMark[11] + 1, stepMark[12] + 1},
		{"step at an epoch start", Bound{Kind: BoundStep, N: 10}, Bound{}, epochStart[1], storage.MaxTime},
	} {
		w, err := Window(db, run, tc.from, tc.to)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		lo, hi, ok := w.Window()
		if !ok || lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: window [%d, %d), want [%d, %d)", tc.name, lo-t0, hi-t0, tc.lo-t0, tc.hi-t0)
		}
	}
	if _, err := Window(db, run, Bound{Kind: BoundEpoch, N: 7}, Bound{}); !errors.Is(err, ErrNoSuchMark) {
		t.Errorf("epoch 7: %v", err)
	}
	if _, err := Window(db, run, Bound{Kind: BoundStep, N: 30}, Bound{}); !errors.Is(err, ErrNoSuchMark) {
		t.Errorf("step 30: %v", err)
	}
	if _, err := Window(db, run, Bound{Kind: BoundSeconds, Seconds: 4}, Bound{Kind: BoundSeconds, Seconds: 3}); !errors.Is(err, ErrEmptyWindow) {
		t.Errorf("backwards window: %v", err)
	}
}

// TestWindowTakesTheRunsWarmup: a window of the real leaking ResNet-18 run
// (4 epochs of 150 steps, 256 000 B kept a step) is judged with the run's
// warm-up, its first epoch, not with the window's own first epoch: a
// window after it drops nothing, one that starts inside it drops what is
// left of it. (Taking the window's own first epoch as its warm-up left
// under 8 points of step:300..450: "not enough data".)
func TestWindowTakesTheRunsWarmup(t *testing.T) {
	t.Parallel()
	db, err := storage.Open(filepath.Join(t.TempDir(), "w.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: fixtures.LeakRun, R: bytes.NewReader(fixtures.Read(t, fixtures.LeakRun))}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		from, to Bound
		skipped  int
	}{
		{Bound{Kind: BoundStep, N: 300}, Bound{Kind: BoundStep, N: 450}, 0},
		{Bound{Kind: BoundEpoch, N: 2}, Bound{}, 0},
		{Bound{Kind: BoundStep, N: 100}, Bound{Kind: BoundStep, N: 250}, 50},
	} {
		w, err := Window(db, runs[0], c.from, c.to)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Analyze(db, w, Options{})
		if err != nil {
			t.Fatal(err)
		}
		l := rep.GPUs[0].Leak
		if l.Kind != growth.VerdictLeak || l.SkippedWarmup != c.skipped || l.SlopeBytesPerStep == nil || *l.SlopeBytesPerStep != 256000 {
			t.Errorf("%v..%v: %s (%s), %d warm-up points, slope %v; want a leak of 256 000 B a step after %d", c.from, c.to, l.Kind, l.Reason,
				l.SkippedWarmup, l.SlopeBytesPerStep, c.skipped)
		}
	}
}
