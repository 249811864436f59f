package storage

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage/internal/chunk"
)

// overviewOf reads one series through Overview: the pieces, and the
// samples of the chunks given as samples, as one-sample pieces of column
// col.
func overviewOf(t *testing.T, o *Overview, col int) (pieces []Piece, fromPieces int) {
	t.Helper()
	for o.Next() {
		if ps := o.Pieces(); ps != nil {
			if len(pieces) > 0 && ps[0].T0 < pieces[len(pieces)-1].T1 {
				t.Fatalf("pieces out of time order: %d after %d", ps[0].T0, pieces[len(pieces)-1].T1)
			}
			pieces = append(pieces, slices.Clone(ps)...)
			fromPieces += len(ps)
			continue
		}
		for i, ts := range o.T() {
			v := o.Ints(col)[i]
			pieces = append(pieces, Piece{T0: ts, T1: ts, N: 1, Cols: make([]PieceCol, col+1)})
			pieces[len(pieces)-1].Cols[col] = PieceCol{First: v, Last: v, Min: v, Max: v, TMin: ts, TMax: ts}
		}
	}
	if err := o.Err(); err != nil {
		t.Fatal(err)
	}
	return pieces, fromPieces
}

// checkPieces holds pieces to the samples (times ts, values vs): they
// cover the samples in order, each once, and each piece's first, last,
// extremes and the times of their first occurrence are the samples'.
func checkPieces(t *testing.T, what string, pieces []Piece, col int, ts, vs []int64) {
	t.Helper()
	i := 0
	for _, p := range pieces {
		if p.N > PieceSamples || int(p.N) > len(ts)-i {
			t.Fatalf("%s: a piece of %d samples at sample %d of %d", what, p.N, i, len(ts))
		}
		pt, pv := ts[i:i+int(p.N)], vs[i:i+int(p.N)]
		want := PieceCol{First: pv[0], Last: pv[len(pv)-1], Min: pv[0], Max: pv[0], TMin: pt[0], TMax: pt[0]}
		for j, v := range pv {
			if v < want.Min {
				want.Min, want.TMin = v, pt[j]
			}
			if v > want.Max {
				want.Max, want.TMax = v, pt[j]
			}
		}
		if p.T0 != pt[0] || p.T1 != pt[len(pt)-1] || p.Cols[col] != want {
			t.Fatalf("%s: piece at sample %d: %d..%d %+v, the samples give %d..%d %+v", what, i, p.T0, p.T1, p.Cols[col], pt[0], pt[len(pt)-1], want)
		}
		i += int(p.N)
	}
	if i != len(ts) {
		t.Fatalf("%s: pieces hold %d samples of %d", what, i, len(ts))
	}
}

// importMinutes imports a generated run of gpus GPUs lasting d.
func importMinutes(t *testing.T, gpus int, d time.Duration) (*DB, Run) {
	t.Helper()
	c := tracegen.Default()
	c.GPUs, c.Duration = gpus, d
	db, r, _ := importTrace(t, c)
	return db, r
}

// TestOverviewIsTheSamples: a run imported carries a summary for every
// chunk of its device and allocator series, and an Overview over the
// whole run or a range that cuts chunks gives pieces that summarise the
// samples exactly, and the samples themselves where the range cuts a
// chunk.
func TestOverviewIsTheSamples(t *testing.T) {
	db, r := importMinutes(t, 2, 3*time.Minute)
	must(t, db.Check())
	mid := r.StartNS + 47_123_456_789
	for n, span := range []struct {
		run      Run
		from, to int64
	}{{r, MinTime, MaxTime}, {r, mid, mid + 77e9}, {r.Within(mid, mid+61e9), MinTime, MaxTime}} {
		whole := n == 0
		for gpu := range 2 {
			var ts, used, alloc, ats []int64
			it := db.DeviceSamples(span.run, gpu, span.from, span.to)
			for it.Next() {
				ts, used = append(ts, it.At().T), append(used, it.At().Used)
			}
			pieces, fromPieces := overviewOf(t, db.DeviceOverview(span.run, gpu, span.from, span.to, true), DeviceUsed)
			checkPieces(t, "device", pieces, DeviceUsed, ts, used)
			if fromPieces == 0 && whole {
				t.Fatalf("GPU %d: no device chunk read from its summary", gpu)
			}
			ti := db.TorchSamples(span.run, gpu, 4100+gpu, span.from, span.to)
			for ti.Next() {
				ats, alloc = append(ats, ti.At().T), append(alloc, ti.At().Allocated)
			}
			if len(ats) == 0 {
				t.Fatalf("GPU %d: no allocator samples: the test's pid is wrong", gpu)
			}
			pieces, fromPieces = overviewOf(t, db.TorchOverview(span.run, gpu, 4100+gpu, span.from, span.to, true), TorchAllocated)
			checkPieces(t, "allocator", pieces, TorchAllocated, ats, alloc)
			if fromPieces == 0 && whole { // one chunk, which a range cuts
				t.Fatalf("GPU %d: no allocator chunk read from its summary", gpu)
			}
		}
	}
}

// dropSummaries deletes every run's summaries, as a file written before
// them has none.
func dropSummaries(t *testing.T, db *DB) {
	t.Helper()
	must(t, db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketData).ForEachBucket(func(k []byte) error {
			err := tx.Bucket(bucketData).Bucket(k).DeleteBucket(keySummaries)
			if errors.Is(err, berrors.ErrBucketNotFound) {
				return nil
			}
			return err
		})
	}))
}

// TestCompactAddsSummaries: a file without summaries reads as samples,
// and Compact gives it the summaries a new file is written with, byte for
// byte; a second Compact has none to add.
func TestCompactAddsSummaries(t *testing.T) {
	db, r := importMinutes(t, 1, 2*time.Minute)
	want := map[string][]byte{}
	must(t, db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketData).Bucket(idKey(r.ID)).Bucket(keySummaries).ForEach(func(k, v []byte) error {
			want[string(k)] = bytes.Clone(v)
			return nil
		})
	}))
	if len(want) == 0 {
		t.Fatal("an imported run has no summaries")
	}
	if n, err := db.Unsummarized(); err != nil || n != 0 {
		t.Fatalf("a new file: %d chunks without a summary, %v", n, err)
	}
	dropSummaries(t, db)
	if _, n := overviewOf(t, db.DeviceOverview(r, 0, MinTime, MaxTime, true), DeviceUsed); n != 0 {
		t.Fatalf("%d pieces from a file without summaries", n)
	}
	if n, err := db.Unsummarized(); err != nil || n != len(want) {
		t.Fatalf("without summaries: %d chunks counted, %d had one, %v", n, len(want), err)
	}
	path := db.Path()
	must(t, db.Close())
	res, err := Compact(path, CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Summarized != len(want) {
		t.Fatalf("compact added %d summaries, the writer makes %d", res.Summarized, len(want))
	}
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	must(t, db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketData).Bucket(idKey(r.ID)).Bucket(keySummaries).ForEach(func(k, v []byte) error {
			if !bytes.Equal(want[string(k)], v) {
				t.Errorf("chunk %x: the summary compact made differs from the writer's", k)
			}
			return nil
		})
	}))
	must(t, db.Check())
	must(t, db.Close())
	if res, err = Compact(path, CompactOptions{}); err != nil || res.Summarized != 0 {
		t.Fatalf("second compact: %+v, %v", res, err)
	}
}

// TestLiveSummaries: a live recording's sealed chunks carry summaries
// as it records (its open chunk is read as samples), and once it is closed
// every chunk does.
func TestLiveSummaries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "live.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	a, err := db.NewAppender(Run{Name: "live", GPUs: []GPU{{Index: 0}}, StartNS: 1e18}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	used := int64(10 << 30)
	var ts, vs []int64
	for tick := range 30000 {
		tns := int64(1e18) + int64(tick)*10e6
		used += int64(rng.IntN(5)-2) << 20
		must(t, a.AppendDevice(DeviceSample{T: tns, GPU: 0, Used: used}))
		ts, vs = append(ts, tns), append(vs, used)
		if tick%100 == 99 {
			must(t, a.Commit())
		}
	}
	r := a.Run()
	pieces, n := overviewOf(t, db.DeviceOverview(r, 0, MinTime, MaxTime, true), DeviceUsed)
	checkPieces(t, "while recording", pieces, DeviceUsed, ts, vs)
	if n == 0 || len(pieces) == n {
		t.Fatalf("while recording: %d of %d units from summaries; want the sealed chunks' and the open chunk's samples", n, len(pieces))
	}
	must(t, a.Close())
	pieces, n = overviewOf(t, db.DeviceOverview(r, 0, MinTime, MaxTime, true), DeviceUsed)
	checkPieces(t, "closed", pieces, DeviceUsed, ts, vs)
	if n != len(pieces) {
		t.Fatalf("closed: %d of %d units from summaries", n, len(pieces))
	}
	must(t, db.Check())
}

// TestDamagedSummary: a summary that fails its checksum, or is whole but
// disagrees with its chunk, is reported by Check and by a read as damage,
// never drawn.
func TestDamagedSummary(t *testing.T) {
	for _, how := range []string{"bit flip", "another chunk's"} {
		db, r := importMinutes(t, 1, 3*time.Minute)
		must(t, db.bolt.Update(func(tx *bolt.Tx) error {
			sums := tx.Bucket(bucketData).Bucket(idKey(r.ID)).Bucket(keySummaries)
			c := sums.Cursor()
			k, v := c.First()
			k2, v2 := c.Next()
			if k2 == nil {
				t.Fatal("one summary only")
			}
			switch how {
			case "bit flip":
				v = bytes.Clone(v)
				v[len(v)/2] ^= 4
			default:
				v = bytes.Clone(v2)
			}
			return sums.Put(bytes.Clone(k), v)
		}))
		if err := db.Check(); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: Check: %v", how, err)
		}
		if how == "bit flip" {
			o := db.DeviceOverview(r, 0, MinTime, MaxTime, true)
			for o.Next() {
			}
			if !errors.Is(o.Err(), ErrCorrupt) {
				t.Errorf("%s: read: %v", how, o.Err())
			}
		}
	}
}

// FuzzSummaryPieces: any bytes read as a summary give pieces or an error,
// never a panic or a huge allocation.
func FuzzSummaryPieces(f *testing.F) {
	sum := []byte{summaryVersion}
	sum = appendSummary(sum, 3, []int64{1, 2, 3, 5}, [][]int64{{7, 9, 4, 4}, {1, 1, 1, 1}})
	f.Add(sealSummary(sum))
	f.Add(sealSummary(appendSummary([]byte{1}, 3, []int64{1, 2, 3, 5}, [][]int64{{7 << 20, 9 << 20, 4 << 20, 4 << 20}})))
	f.Add([]byte{1, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, id := range []uint32{0, 3} {
			ps, found, err := summaryPieces(b, id, nil)
			if err == nil && found && len(ps) == 0 {
				t.Fatal("found with no pieces")
			}
		}
	})
}

// TestSummaryRoundTrip: a series' pieces read back from its summary, in
// both versions, are the first, last, lowest and highest values (and the
// times of the extremes' first samples) computed here from the samples;
// the values include multiples of a large power of two (which version 2
// stores in those units), negative and zero values.
func TestSummaryRoundTrip(t *testing.T) {
	const n = 2*PieceSamples + 77 // three pieces
	rng := rand.New(rand.NewPCG(4, 9))
	ts := make([]int64, n)
	for i := range ts {
		ts[i] = int64(i)*10_000 + rng.Int64N(60) // µs, jittered
	}
	col := func(f func(i int) int64) []int64 {
		vs := make([]int64, n)
		for i := range vs {
			vs[i] = f(i)
		}
		return vs
	}
	cols := [][]int64{
		col(func(i int) int64 { return (268 + rng.Int64N(40)) << 21 }),   // device used in 2 MiB pages
		col(func(int) int64 { return 0 }),                                // all zero
		col(func(i int) int64 { return (rng.Int64N(2000) - 1000) << 9 }), // negative too, 512 B blocks
		col(func(i int) int64 { return rng.Int64() - rng.Int64() }),      // no common unit
	}
	for _, version := range []byte{1, summaryVersion} {
		sum := sealSummary(appendSummary([]byte{version}, 5, ts, cols))
		ps, found, err := summaryPieces(sum, 5, nil)
		if err != nil || !found || len(ps) != 3 {
			t.Fatalf("version %d: %d pieces, found %v, %v", version, len(ps), found, err)
		}
		lo := 0
		for p, piece := range ps {
			hi := lo + int(piece.N)
			if piece.T0 != ts[lo]*1000 || piece.T1 != ts[hi-1]*1000 {
				t.Fatalf("version %d piece %d: times %d–%d, want %d–%d", version, p, piece.T0, piece.T1, ts[lo]*1000, ts[hi-1]*1000)
			}
			for c, vs := range cols {
				want := PieceCol{First: vs[lo], Last: vs[hi-1], Min: vs[lo], Max: vs[lo], TMin: ts[lo] * 1000, TMax: ts[lo] * 1000}
				for i := lo; i < hi; i++ {
					if vs[i] < want.Min {
						want.Min, want.TMin = vs[i], ts[i]*1000
					}
					if vs[i] > want.Max {
						want.Max, want.TMax = vs[i], ts[i]*1000
					}
				}
				if piece.Cols[c] != want {
					t.Fatalf("version %d piece %d column %d: %+v, want %+v", version, p, c, piece.Cols[c], want)
				}
			}
			lo = hi
		}
		if lo != n {
			t.Fatalf("version %d: pieces hold %d samples of %d", version, lo, n)
		}
	}
}

// TestSummaryColumns: a new file's summaries hold the columns an overview
// draws (the device's two, the allocator's first three) and no process
// series; a file whose summaries hold every column (version 1) still
// passes Check and reads its pieces.
func TestSummaryColumns(t *testing.T) {
	db, r := importMinutes(t, 1, 2*time.Minute)
	cols := func() map[seriesKind][]int {
		got := map[seriesKind][]int{}
		refs, err := db.Series(r)
		if err != nil {
			t.Fatal(err)
		}
		must(t, db.bolt.View(func(tx *bolt.Tx) error {
			known, err := knownSeries(tx, r.ID)
			if err != nil {
				return err
			}
			return tx.Bucket(bucketData).Bucket(idKey(r.ID)).Bucket(keySummaries).ForEach(func(_, v []byte) error {
				for id, s := range known {
					ps, found, err := summaryPieces(v, id, nil)
					if err != nil {
						return err
					}
					if found {
						got[s.Kind] = append(got[s.Kind], len(ps[0].Cols))
					}
				}
				return nil
			})
		}))
		if len(refs) == 0 {
			t.Fatal("no series")
		}
		return got
	}
	got := cols()
	for k, want := range map[seriesKind]int{kindDevice: DeviceReserved + 1, kindTorch: TorchReserved + 1} {
		if len(got[k]) == 0 {
			t.Fatalf("no %v series summarised", k)
		}
		for _, n := range got[k] {
			if n != want {
				t.Fatalf("a %v series' summary holds %d columns, want %d", k, n, want)
			}
		}
	}
	if len(got[kindProc]) > 0 {
		t.Fatalf("%d process series summarised", len(got[kindProc]))
	}

	// The same chunks with every column summarised, as version 1 did.
	must(t, db.bolt.Update(func(tx *bolt.Tx) error {
		known, err := knownSeries(tx, r.ID)
		if err != nil {
			return err
		}
		b := tx.Bucket(bucketData).Bucket(idKey(r.ID))
		var d chunk.Decoded
		return b.Bucket(keyChunks).ForEach(func(k, v []byte) error {
			if getIn(b.Bucket(keySummaries), k) == nil {
				return nil
			}
			sum, err := checkChunk(k, v, known, &d, 1)
			if err != nil {
				return err
			}
			return b.Bucket(keySummaries).Put(bytes.Clone(k), sum)
		})
	}))
	must(t, db.Check())
	got = cols()
	if len(got[kindProc]) == 0 || got[kindTorch][0] <= TorchReserved+1 {
		t.Fatalf("version 1 summaries: %v columns by kind, want every column and the process series", got)
	}
	var ts, used []int64
	for it := db.DeviceSamples(r, 0, MinTime, MaxTime); it.Next(); {
		ts, used = append(ts, it.At().T), append(used, it.At().Used)
	}
	pieces, fromPieces := overviewOf(t, db.DeviceOverview(r, 0, MinTime, MaxTime, true), DeviceUsed)
	if fromPieces == 0 {
		t.Fatal("no piece read from version 1 summaries")
	}
	checkPieces(t, "device, version 1", pieces, DeviceUsed, ts, used)
}
