package parquet

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/memrec/memrec/testsupport/fixtures"
)

// testMark is a mark of the input, for the expected values.
type testMark struct {
	t           int64
	rank        int
	epoch, step int // -1: not this kind
}

// latest is the expected epoch and step of a row of rank (-1: any rank) at
// t, by a scan of the input's marks: the last of the rank at or before t
// (any rank: the largest so far); -1 before the first.
func latest(marks []testMark, rank int, t int64) (epoch, step int64) {
	epoch, step = -1, -1
	for _, m := range marks {
		if m.t > t || rank >= 0 && m.rank != rank {
			continue
		}
		if m.epoch >= 0 && (rank >= 0 || int64(m.epoch) > epoch) {
			epoch = int64(m.epoch)
		}
		if m.step >= 0 && (rank >= 0 || int64(m.step) > step) {
			step = int64(m.step)
		}
	}
	return epoch, step
}

// TestEpochStepOnEveryRow: every device and allocator row carries the
// epoch and step of the latest marks at its time, per rank where two ranks
// mark at different times (each GPU's device rows take the rank of its one
// process), -1 before the first.
func TestEpochStepOnEveryRow(t *testing.T) {
	const t0, dt = int64(1795974033888384000), int64(10_000_000) // whole µs, as the store keeps them
	var b strings.Builder
	fmt.Fprintf(&b, `{"type":"run","name":"ranks","host":"vm","start_ns":%d,"interval_ns":%d}`+"\n", t0, dt)
	for g := 0; g < 2; g++ {
		fmt.Fprintf(&b, `{"type":"gpu","gpu":%d,"uuid":"GPU-%d","name":"H","total_bytes":1000000}`+"\n", g, g)
	}
	// Rank 1 runs behind rank 0: its epoch and steps come later.
	var marks []testMark
	for e := 0; e < 3; e++ {
		for rank := 0; rank < 2; rank++ {
			marks = append(marks, testMark{t: t0 + int64(e*40+5+rank*7)*dt, rank: rank, epoch: e, step: -1})
			for s := 0; s < 5; s++ {
				marks = append(marks, testMark{t: t0 + int64(e*40+8+rank*7+s*6)*dt + 3000, rank: rank, epoch: -1, step: e*5 + s})
			}
		}
	}
	for i := int64(0); i < 130; i++ {
		t := t0 + i*dt
		for g := 0; g < 2; g++ {
			fmt.Fprintf(&b, `{"type":"sample","t_ns":%d,"gpu":%d,"used_bytes":%d}`+"\n", t, g, 1000+i)
			fmt.Fprintf(&b, `{"type":"torch","t_ns":%d,"gpu":%d,"pid":%d,"rank":%d,"allocated_bytes":%d,"reserved_bytes":%d}`+"\n",
				t+1000, g, 10+g, g, 100+i, 200+i)
		}
		for _, m := range marks {
			if m.t >= t && m.t < t+dt {
				if m.epoch >= 0 {
					fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":%d,"rank":%d}`+"\n", m.t, m.epoch, m.rank)
				} else {
					fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"step","step":%d,"rank":%d}`+"\n", m.t, m.step, m.rank)
				}
			}
		}
	}
	db, r := importRun(t, []byte(b.String()))
	dir := t.TempDir()
	if _, err := Export(context.Background(), db, r, dir); err != nil {
		t.Fatal(err)
	}
	part, _ := Partition(r)
	dev, err := pq.ReadFile[Device](filepath.Join(dir, "device", part, "part-0.parquet"))
	if err != nil || len(dev) != 260 {
		t.Fatalf("device: %v, %d rows", err, len(dev))
	}
	seen := map[int64]bool{}
	for _, d := range dev {
		we, ws := latest(marks, int(d.GPU), d.TNS)
		if int64(d.Epoch) != we || d.Step != ws {
			t.Fatalf("device row gpu %d at +%d ns: epoch %d step %d, want %d %d", d.GPU, d.TNS-t0, d.Epoch, d.Step, we, ws)
		}
		seen[d.Step] = true
	}
	alloc, err := pq.ReadFile[Allocator](filepath.Join(dir, "allocator", part, "part-0.parquet"))
	if err != nil || len(alloc) != 260 {
		t.Fatalf("allocator: %v, %d rows", err, len(alloc))
	}
	for _, a := range alloc {
		we, ws := latest(marks, int(*a.Rank), a.TNS)
		if int64(a.Epoch) != we || a.Step != ws {
			t.Fatalf("allocator row rank %d at +%d ns: epoch %d step %d, want %d %d", *a.Rank, a.TNS-t0, a.Epoch, a.Step, we, ws)
		}
	}
	if !seen[-1] || !seen[14] || len(seen) != 16 {
		t.Errorf("device rows' steps %v: want -1 and every step 0..14", seen)
	}
}

// TestEpochStepOneRank: a run of one rank (a real one) takes the furthest
// epoch and step of its marks, as the CSV does.
func TestEpochStepOneRank(t *testing.T) {
	db, r := importRun(t, fixtures.Read(t, fixtures.LeakRun))
	dir := t.TempDir()
	if _, err := Export(context.Background(), db, r, dir); err != nil {
		t.Fatal(err)
	}
	part, _ := Partition(r)
	ms, err := pq.ReadFile[Mark](filepath.Join(dir, "marks", part, "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	var marks []testMark
	for _, m := range ms {
		switch {
		case m.Kind == "epoch_start" && m.Epoch != nil:
			marks = append(marks, testMark{t: m.TNS, epoch: int(*m.Epoch), step: -1})
		case m.Kind == "step" && m.Step != nil:
			marks = append(marks, testMark{t: m.TNS, epoch: -1, step: int(*m.Step)})
		}
	}
	dev, err := pq.ReadFile[Device](filepath.Join(dir, "device", part, "part-0.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	epochs := map[int32]int{}
	for i, d := range dev {
		if i%7 != 0 { // the scan is quadratic: every seventh row
			continue
		}
		we, ws := latest(marks, -1, d.TNS)
		if int64(d.Epoch) != we || d.Step != ws {
			t.Fatalf("device row at %d: epoch %d step %d, want %d %d", d.TNS, d.Epoch, d.Step, we, ws)
		}
		epochs[d.Epoch]++
	}
	if len(epochs) != 5 { // -1 and the run's 4 epochs
		t.Errorf("device rows by epoch %v: want -1 and 0..3", epochs)
	}
}
