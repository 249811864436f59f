package storage

import (
	"slices"
	"testing"
	"time"

	"github.com/memrec/memrec/storage/wire"
)

// TestBlocksAreTheSamples: the device, process and allocator series read as blocks
// are the samples the iterators give, in order, over the whole run and
// over ranges and windows that cut chunks in the middle.
func TestBlocksAreTheSamples(t *testing.T) {
	db, r, _ := importGenerated(t, 2)
	mid := r.StartNS + 13_333_333_333
	for _, span := range []struct {
		run      Run
		from, to int64
	}{
		{r, MinTime, MaxTime}, {r, mid, mid + 7e9}, {r.Within(mid, mid+11e9), MinTime, MaxTime}, {r, r.EndNS + 1, MaxTime}} {
		series, err := db.Series(r)
		if err != nil {
			t.Fatal(err)
		}
		procs := 0
		for _, s := range series {
			var wantT, want, got, gotT []int64
			var b *Blocks
			switch s.Kind {
			case SeriesDevice:
				it := db.DeviceSamples(span.run, s.GPU, span.from, span.to)
				for it.Next() {
					wantT, want = append(wantT, it.At().T), append(want, it.At().Used, it.At().Reserved)
				}
				b = db.DeviceBlocks(span.run, s.GPU, span.from, span.to)
				for b.Next() {
					for i, u := range b.Ints(DeviceUsed) {
						got = append(got, u, b.Ints(DeviceReserved)[i])
					}
					gotT = append(gotT, b.T()...)
				}
			case SeriesProc:
				procs++
				it := db.ProcSamples(span.run, s.GPU, s.PID, span.from, span.to)
				for it.Next() {
					wantT, want = append(wantT, it.At().T), append(want, it.At().Used)
				}
				b = db.ProcBlocks(span.run, s.GPU, s.PID, span.from, span.to)
				for b.Next() {
					got, gotT = append(got, b.Ints(ProcUsed)...), append(gotT, b.T()...)
				}
			case SeriesTorch:
				it := db.TorchSamples(span.run, s.GPU, s.PID, span.from, span.to)
				for it.Next() {
					wantT, want = append(wantT, it.At().T), append(want, it.At().Allocated, it.At().Reserved)
				}
				b = db.TorchBlocks(span.run, s.GPU, s.PID, span.from, span.to)
				var rows []TorchSample
				for b.Next() {
					for i, a := range b.Ints(TorchAllocated) {
						got = append(got, a, b.Ints(TorchReserved)[i])
					}
					gotT = append(gotT, b.T()...)
					from := len(rows)
					rows = append(rows, torchRows(b)...)
					checkTorchColumns(t, b, rows[from:])
				}
				var all []TorchSample
				it = db.TorchSamples(span.run, s.GPU, s.PID, span.from, span.to)
				for it.Next() {
					all = append(all, it.At())
				}
				if !slices.Equal(all, rows) {
					t.Errorf("GPU %d pid %d: %d rows from blocks, %d samples", s.GPU, s.PID, len(rows), len(all))
				}
			default:
				continue
			}
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(wantT, gotT) || !slices.Equal(want, got) {
				t.Errorf("%s GPU %d pid %d [%d, %d): blocks give %d samples, the iterator %d", s.Kind, s.GPU, s.PID, span.from, span.to, len(gotT), len(wantT))
			}
		}
		if procs == 0 {
			t.Fatal("no process series to read")
		}
	}
}

// TestDeviceGroupBlocksAreTheBlocks: a GPU's device and process series read
// together, each chunk's row times decoded once, are what each one's
// Blocks give, over the whole run and over ranges and windows that cut
// chunks; a process the run does not have reads as empty, and a GPU it
// does not have as nothing.
func TestDeviceGroupBlocksAreTheBlocks(t *testing.T) {
	db, r := importMinutes(t, 2, 3*time.Minute)
	series, err := db.Series(r)
	if err != nil {
		t.Fatal(err)
	}
	pids := map[int][]int{}
	for _, s := range series {
		if s.Kind == SeriesProc {
			pids[s.GPU] = append(pids[s.GPU], s.PID)
		}
	}
	mid := r.StartNS + 47_123_456_789
	for _, span := range []struct {
		run      Run
		from, to int64
	}{
		{r, MinTime, MaxTime}, {r, mid, mid + 77e9}, {r.Within(mid, mid+61e9), MinTime, MaxTime}, {r, r.EndNS + 1, MaxTime}} {
		for gpu := range 3 { // GPU 2 is not in the run
			ps := append(slices.Clone(pids[gpu]), 99999) // no such process
			if gpu < 2 && len(pids[gpu]) == 0 {
				t.Fatalf("GPU %d has no process series to read", gpu)
			}
			got := make([][]int64, 1+len(ps))
			g := db.DeviceGroupBlocks(span.run, gpu, ps, span.from, span.to)
			chunks := 0
			for g.Next() {
				chunks++
				for i := range got {
					ts := g.T(i)
					for k, t := range ts {
						got[i] = append(got[i], t, g.Ints(i, 0)[k])
						if i == 0 {
							got[i] = append(got[i], g.Ints(i, DeviceReserved)[k])
						}
					}
				}
			}
			if err := g.Err(); err != nil {
				t.Fatal(err)
			}
			for i := range got {
				var want []int64
				var b *Blocks
				if i == 0 {
					b = db.DeviceBlocks(span.run, gpu, span.from, span.to)
				} else {
					b = db.ProcBlocks(span.run, gpu, ps[i-1], span.from, span.to)
				}
				for b.Next() {
					for k, t := range b.T() {
						want = append(want, t, b.Ints(0)[k])
						if i == 0 {
							want = append(want, b.Ints(DeviceReserved)[k])
						}
					}
				}
				if !slices.Equal(got[i], want) {
					t.Errorf("GPU %d series %d [%d, %d): %d values read together, %d alone", gpu, i, span.from, span.to, len(got[i]), len(want))
				}
			}
			if span.from == MinTime && span.run.window == nil && gpu < 2 && (chunks < 2 || len(got[1]) == 0) {
				t.Errorf("GPU %d: the whole run read as %d chunks, %d process values: too little to test", gpu, chunks, len(got[1]))
			}
			if gpu == 2 && chunks > 0 {
				t.Errorf("GPU 2 is not in the run, and %d chunks were read for it", chunks)
			}
		}
	}
}

// TestTorchColumnIsTheField: each allocator field TorchColumn finds a
// column for reads from Blocks what the field's Get gives of the rows
// (the counters among them), and a key or a field stored otherwise has
// none.
func TestTorchColumnIsTheField(t *testing.T) {
	db, r, _ := importGenerated(t, 1)
	series, err := db.Series(r)
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, f := range wire.TorchFields {
		c, ok := TorchColumn(f.Name)
		if f.Key || f.Optional || f.Default != nil {
			if ok {
				t.Errorf("%s: column %d, want none (stored otherwise)", f.Name, c)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: no column", f.Name)
			continue
		}
		for _, s := range series {
			if s.Kind != SeriesTorch {
				continue
			}
			b := db.TorchBlocks(r, s.GPU, s.PID, MinTime, MaxTime)
			for b.Next() {
				rows := torchRows(b)
				var col []int64
				if b.Has(c) {
					col = b.Ints(c)
				} else {
					col = make([]int64, len(rows))
				}
				for i := range rows {
					if col[i] != f.Get(rows[i]) {
						t.Fatalf("%s: column %d row %d is %d, the row's field %d", f.Name, c, i, col[i], f.Get(rows[i]))
					}
				}
				found++
			}
			if err := b.Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, ok := TorchColumn("no_such_field"); ok {
		t.Error("an unknown name has a column")
	}
	if found == 0 {
		t.Fatal("no allocator block read")
	}
}

// torchRows is every allocator sample of block b, through TorchRow.
func torchRows(b *Blocks) []TorchSample {
	rows := make([]TorchSample, len(b.T()))
	for i := range rows {
		rows[i] = b.TorchRow(i)
	}
	return rows
}

// checkTorchColumns checks that the named allocator columns give, for
// each sample of the block, the fields of its rows (read from the
// iterator by the caller, or through TorchRow).
func checkTorchColumns(t *testing.T, b *Blocks, rows []TorchSample) {
	t.Helper()
	cols := []struct {
		c   int
		get func(TorchSample) int64
	}{
		{TorchAllocated, func(s TorchSample) int64 { return s.Allocated }},
		{TorchReserved, func(s TorchSample) int64 { return s.Reserved }},
		{TorchActiveOver, func(s TorchSample) int64 { return s.Active - s.Allocated }},
		{TorchInactiveSplit, func(s TorchSample) int64 { return s.InactiveSplit }},
		{TorchPeakAllocated, func(s TorchSample) int64 { return s.PeakAllocated }},
		{TorchSegments, func(s TorchSample) int64 { return s.Segments }},
		{TorchAllocRetries, func(s TorchSample) int64 { return s.AllocRetries }},
		{TorchOOMs, func(s TorchSample) int64 { return s.OOMs }},
		{TorchLargestSegment, func(s TorchSample) int64 { return s.LargestSegment }},
	}
	for i, r := range rows {
		if got := b.TorchRow(i); got != r {
			t.Fatalf("TorchRow(%d) = %+v, the rows give %+v", i, got, r)
		}
		for _, c := range cols {
			v := int64(0)
			if b.Has(c.c) {
				v = b.Ints(c.c)[i]
			}
			if v != c.get(r) {
				t.Fatalf("column %d of sample %d = %d, the row has %d", c.c, i, v, c.get(r))
			}
		}
	}
}
