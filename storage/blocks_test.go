package storage

import (
	"slices"
	"testing"
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
					rows = b.TorchRows(rows)
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
