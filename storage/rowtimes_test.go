package storage

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"github.com/memrec/memrec/internal/tracegen"
)

// The device group's iterators read side by side, a block each in turn
// (as the export reads them, each taking the chunk's row times from the
// one before), give the times and values of the group's walk
// (DeviceGroupBlocks), which decodes its chunks apart from the iterators.
func TestIteratorsSideBySideReadTheGroup(t *testing.T) {
	var buf bytes.Buffer
	c := tracegen.Default()
	c.GPUs, c.Duration = 3, 2*time.Minute // six series at 100 Hz: several chunks
	if _, err := tracegen.Write(&buf, c); err != nil {
		t.Fatal(err)
	}
	db := openTestDB(t)
	runs, err := loadLines(db, "gen", &buf, "")
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	series, err := db.Series(r)
	if err != nil {
		t.Fatal(err)
	}
	type reader struct {
		ref    SeriesRef
		next   func() []int64
		fields func(i int) []int64
		err    func() error
	}
	var readers []reader
	pids := map[int][]int{}
	for _, s := range series {
		switch s.Kind {
		case SeriesDevice:
			it := db.DeviceSamples(r, s.GPU, MinTime, MaxTime)
			readers = append(readers, reader{s, it.NextBlock, func(i int) []int64 { return it.BlockFields(nil, i) }, it.Err})
		case SeriesProc:
			it := db.ProcSamples(r, s.GPU, s.PID, MinTime, MaxTime)
			readers = append(readers, reader{s, it.NextBlock, func(i int) []int64 { return it.BlockFields(nil, i) }, it.Err})
			pids[s.GPU] = append(pids[s.GPU], s.PID)
		}
	}
	if len(pids) == 0 || len(readers) < 4 {
		t.Fatalf("%d device and process series, want several of each", len(readers))
	}
	// rows: each a time (µs, as stored) and the fields.
	side := make([][][]int64, len(readers))
	blocks := 0
	for more := true; more; {
		more = false
		for k, rd := range readers {
			ts := rd.next()
			for i, tm := range ts {
				side[k] = append(side[k], append([]int64{tm}, rd.fields(i)...))
			}
			if len(ts) > 0 {
				more, blocks = true, blocks+1
			}
		}
	}
	if blocks < 2*len(readers) {
		t.Fatalf("%d blocks of %d series, want several chunks", blocks, len(readers))
	}
	for k, rd := range readers {
		if err := rd.err(); err != nil {
			t.Fatal(err)
		}
		g := db.DeviceGroupBlocks(r, rd.ref.GPU, pids[rd.ref.GPU], MinTime, MaxTime)
		i, cols := 0, 2 // the device series, used and reserved
		if rd.ref.Kind == SeriesProc {
			i, cols = 1+slices.Index(pids[rd.ref.GPU], rd.ref.PID), 1
		}
		var want [][]int64
		for g.Next() {
			for j, tm := range g.T(i) {
				row := []int64{tm / 1000}
				for c := range cols {
					row = append(row, g.Ints(i, c)[j])
				}
				want = append(want, row)
			}
		}
		if err := g.Err(); err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 || !slices.EqualFunc(side[k], want, slices.Equal) {
			t.Errorf("%v: %d rows side by side, %d in the group's walk, or they differ", rd.ref, len(side[k]), len(want))
		}
	}
}
