package storage

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/storage/internal/chunk"
	"github.com/memrec/memrec/storage/wire"
)

// TestWrongColumnCountIsCorrupt rewrites an allocator chunk with 2 columns
// instead of its kind's 9: reading it must give ErrCorrupt, not a panic,
// and Check (what `runs --check` runs) must notice.
func TestWrongColumnCountIsCorrupt(t *testing.T) {
	t.Parallel()
	db, err := Open(filepath.Join(t.TempDir(), "bad.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := loadString(db, "in", `{"type":"run","name":"r","start_ns":0}
{"type":"gpu","gpu":0}
{"type":"torch","t_ns":1000,"gpu":0,"pid":7,"allocated_bytes":10,"reserved_bytes":20}
{"type":"torch","t_ns":2000,"gpu":0,"pid":7,"allocated_bytes":11,"reserved_bytes":20}
`)
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if err := db.Check(); err != nil {
		t.Fatalf("before the damage: %v", err)
	}
	rewritten := 0
	err = db.bolt.Update(func(tx *bolt.Tx) error {
		chunks := tx.Bucket(bucketData).Bucket(idKey(r.ID)).Bucket(keyChunks)
		series, err := seriesTable(tx, r.ID)
		if err != nil {
			return err
		}
		var torchID uint32
		for _, s := range series {
			if s.Kind == kindTorch {
				torchID = s.ID
			}
		}
		c := chunks.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var d chunk.Decoded
			found, err := chunk.DecodeSeries(v, torchID, &d)
			if err != nil || !found {
				continue
			}
			rows := make([]int, len(d.T))
			for i := range rows {
				rows[i] = i
			}
			bad := chunk.Encode(nil, d.T, []chunk.Block{{ID: torchID, Rows: rows, Ints: d.Ints[:2]}})
			if err := chunks.Put(append([]byte(nil), k...), bad); err != nil {
				return err
			}
			rewritten++
		}
		return nil
	})
	if err != nil || rewritten != 1 {
		t.Fatalf("rewrite: %v (%d chunks)", err, rewritten)
	}

	it := db.TorchSamples(r, 0, 7, MinTime, MaxTime)
	for it.Next() {
		t.Errorf("read a sample from a damaged chunk: %+v", it.At())
	}
	if !errors.Is(it.Err(), ErrCorrupt) {
		t.Errorf("iterator error = %v, want ErrCorrupt", it.Err())
	}
	if err := db.Check(); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Check() = %v, want ErrCorrupt", err)
	}
}

// TestSchemaRoundTrip puts one value of each kind into columns and gets it
// back, so every column a schema lists is read back into the same field.
func TestSchemaRoundTrip(t *testing.T) {
	t.Parallel()
	dev := DeviceSample{T: 5000, GPU: 1, Used: 11, Reserved: 12}
	proc := ProcSample{T: 5000, GPU: 1, PID: 9, Used: 13}
	torch := TorchSample{T: 5000, GPU: 1, PID: 9, Rank: 2, Allocated: 1, Reserved: 2, Active: 3,
		InactiveSplit: 4, PeakAllocated: 5, Segments: 6, AllocRetries: 7, OOMs: 8}
	mark := Mark{T: 5000, Kind: "step", Epoch: 1, Step: 2, Rank: None, GPU: 3, PID: 4, Code: None, Text: "x"}
	if got := roundTrip(t, &deviceSchema, dev); got != dev {
		t.Errorf("device: %+v, want %+v", got, dev)
	}
	if got := roundTrip(t, &procSchema, proc); got != proc {
		t.Errorf("proc: %+v, want %+v", got, proc)
	}
	if got := roundTrip(t, &torchSchema, torch); got != torch {
		t.Errorf("torch: %+v, want %+v", got, torch)
	}
	if got := roundTrip(t, &markSchema, mark); got != mark {
		t.Errorf("mark: %+v, want %+v", got, mark)
	}
}

// TestSchemaFollowsWireTables sets every field of each kind's wire table
// to its own value through the table, then puts and gets the row: a field
// that the hand-written put or get forgets, or reads from another column,
// comes back wrong. A new figure in a table without its column here fails.
func TestSchemaFollowsWireTables(t *testing.T) {
	t.Parallel()
	checkTable(t, &deviceSchema, wire.DeviceFields, DeviceSample{T: 7000, GPU: 2})
	checkTable(t, &procSchema, wire.ProcFields, ProcSample{T: 7000, GPU: 2})
	checkTable(t, &torchSchema, wire.TorchFields, TorchSample{T: 7000, GPU: 2})
	checkTable(t, &markSchema, wire.MarkFields, Mark{T: 7000, Kind: "event", Text: "t"})
}

func checkTable[T any](t *testing.T, sc *rowSchema[T], fs []wire.Field[T], v T) {
	t.Helper()
	keys := 0
	for i, f := range fs {
		f.Set(&v, int64(101+i)) // distinct, positive, so optional fields are present
		if f.Key {
			keys++
		}
	}
	if want := len(fs) - keys; len(sc.ints) != want {
		t.Errorf("%s: %d int columns, the wire table has %d fields that are not keys", sc.name, len(sc.ints), want)
	}
	got := roundTrip(t, sc, v)
	for i, f := range fs {
		if g := f.Get(got); g != int64(101+i) {
			t.Errorf("%s: %s came back %d, want %d", sc.name, f.Name, g, 101+i)
		}
	}
}

func roundTrip[T any](t *testing.T, sc *rowSchema[T], v T) T {
	t.Helper()
	ints, strs := sc.put(v, nil, nil)
	if len(ints) != len(sc.ints) || len(strs) != len(sc.strs) {
		t.Fatalf("%s: put gave %d+%d columns, schema lists %d+%d", sc.name, len(ints), len(strs), len(sc.ints), len(sc.strs))
	}
	d := &chunk.Decoded{T: []int64{sc.time(v) / 1000}}
	for _, x := range ints {
		d.Ints = append(d.Ints, []int64{x})
	}
	for _, x := range strs {
		d.Strs = append(d.Strs, []string{x})
	}
	return sc.get(d, 0, sc.key(v))
}

// FuzzChunkToRows feeds arbitrary bytes to what an iterator does with a
// stored chunk: decode one series, check its columns against its kind's
// schema, convert every row. Nothing may panic; a chunk whose series lacks
// its kind's columns must be ErrCorrupt, never a row.
func FuzzChunkToRows(f *testing.F) {
	rows := []int{0, 1, 2}
	rowT := []int64{10, 20, 35}
	col := func(v ...int64) []int64 { return v }
	f.Add(chunk.Encode(nil, rowT, []chunk.Block{{ID: 0, Rows: rows, Ints: [][]int64{col(1, 2, 3), col(0, 0, 0)}}}))
	f.Add(chunk.Encode(nil, rowT, []chunk.Block{{ID: 1, Rows: rows, Ints: [][]int64{col(5, 5, 6)}}}))
	f.Add(chunk.Encode(nil, rowT, []chunk.Block{{ID: 2, Rows: rows, Ints: [][]int64{col(1, 1, 1), col(2, 3, 4)}}}))
	f.Add(chunk.Encode(nil, rowT, []chunk.Block{{ID: 3, Rows: rows[:2], Ints: make([][]int64, 6),
		Strs: [][]string{{"step", "oom"}, {"", "x"}}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		for id, k := range []seriesKey{{kind: kindDevice}, {kind: kindProc, pid: 7}, {kind: kindTorch, pid: 7}, {kind: kindMark}} {
			var d chunk.Decoded
			found, err := chunk.DecodeSeries(data, uint32(id), &d)
			if err != nil || !found {
				continue
			}
			switch k.kind {
			case kindDevice:
				rowsOf(t, &deviceSchema, &d, k)
			case kindProc:
				rowsOf(t, &procSchema, &d, k)
			case kindTorch:
				rowsOf(t, &torchSchema, &d, k)
			case kindMark:
				rowsOf(t, &markSchema, &d, k)
			}
		}
	})
}

// rowsOf converts every row of d as an iterator would, after the check.
func rowsOf[T any](t *testing.T, sc *rowSchema[T], d *chunk.Decoded, k seriesKey) {
	if err := sc.checkCols(d); err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("column check: %v, want ErrCorrupt", err)
		}
		return
	}
	for i := range d.T {
		sc.get(d, i, k)
	}
}

// TestBlockFieldsFollowGet holds the export's reading of a row's fields
// (Iter.BlockFields) to get's value read through the wire table, for every
// field set to its own value through the table, and for a row of a torch
// series written before the later columns (those read 0).
func TestBlockFieldsFollowGet(t *testing.T) {
	t.Parallel()
	checkBlockFields(t, &deviceSchema, wire.DeviceFields, DeviceSample{T: 7000, GPU: 2}, 0)
	checkBlockFields(t, &procSchema, wire.ProcFields, ProcSample{T: 7000, GPU: 2}, 0)
	checkBlockFields(t, &torchSchema, wire.TorchFields, TorchSample{T: 7000, GPU: 2}, 0)
	checkBlockFields(t, &torchSchema, wire.TorchFields, TorchSample{T: 7000, GPU: 2}, torchSchema.minInts)
	torch := TorchSample{T: 7000, GPU: 2, PID: 9, Rank: None, Allocated: 5, Active: 5}
	checkBlockFields(t, &torchSchema, wire.TorchFields, torch, -1) // absent rank, active = allocated
}

// checkBlockFields sets each field of v to its own value (unless cols is
// -1, which keeps v), stores it keeping the first cols columns (0: all)
// and compares BlockFields with the table's Get of the row get builds.
func checkBlockFields[T any](t *testing.T, sc *rowSchema[T], fs []wire.Field[T], v T, cols int) {
	t.Helper()
	if cols >= 0 {
		for i, f := range fs {
			f.Set(&v, int64(101+i))
		}
	}
	ints, _ := sc.put(v, nil, nil)
	if cols > 0 {
		ints = ints[:cols]
	}
	d := &chunk.Decoded{T: []int64{0, sc.time(v) / 1000}} // row 1, so the index is used
	for _, x := range ints {
		d.Ints = append(d.Ints, []int64{-1, x})
	}
	row := sc.get(d, 1, sc.key(v))
	var want []int64
	for _, f := range fs {
		if !f.Key {
			want = append(want, f.Get(row))
		}
	}
	it := &Iter[T]{d: d, lo: 1, fields: sc.fields, schema: &sc.schema}
	if got := it.BlockFields(nil, 0); !slices.Equal(got, want) {
		t.Errorf("%s with %d columns: BlockFields = %v, want %v (get's row through the table)", sc.name, len(ints), got, want)
	}
}

// RepeatsUntil agrees with Repeats asked sample by sample, on columns whose
// runs end at different rows, with a string column, from every start.
func TestRepeatsUntilFollowsRepeats(t *testing.T) {
	t.Parallel()
	d := &chunk.Decoded{T: []int64{1, 2, 3, 4, 5, 6, 7, 8, 9},
		Ints: [][]int64{{9, 1, 1, 1, 1, 2, 2, 2, 2}, {9, 5, 5, 5, 6, 6, 6, 6, 6}},
		Strs: [][]string{{"x", "a", "a", "a", "a", "a", "a", "b", "b"}}}
	it := &Iter[Mark]{d: d, lo: 1, hi: len(d.T)} // the block: rows 1 to 8
	n := it.hi - it.lo
	for i := range n {
		want := i + 1
		for want < n && it.Repeats(want) {
			want++
		}
		if got := it.RepeatsUntil(i); got != want {
			t.Errorf("RepeatsUntil(%d) = %d, want %d", i, got, want)
		}
	}
}
