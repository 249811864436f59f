package chunk

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestIntColRoundTrip(t *testing.T) {
	cases := map[string][]int64{
		"empty":    {},
		"one":      {42},
		"constant": {7, 7, 7, 7, 7},
		"steps":    {0, 2 << 20, 2 << 20, 4 << 20, 4 << 20, 4 << 20, 0},
		"extremes": {math.MinInt64, math.MaxInt64, 0, math.MinInt64, -1, math.MaxInt64},
		"negative": {-5, -3, -3, -100, 50},
		"fixed":    {10000, 10000, 10000, 10000},
	}
	for name, vals := range cases {
		t.Run(name, func(t *testing.T) {
			b := appendIntCol(nil, vals)
			r := reader{b: b}
			got := r.intCol(nil, len(vals))
			if r.err != nil || len(r.b) != 0 {
				t.Fatalf("decode: err %v, %d bytes left", r.err, len(r.b))
			}
			if !slices.Equal(got, vals) && len(vals) > 0 {
				t.Fatalf("got %v, want %v", got, vals)
			}
		})
	}
}

func TestIntColSize(t *testing.T) {
	// A byte count that never changes costs two bytes for the whole column,
	// one that changes by a few 2 MiB segments one byte per change.
	constant := make([]int64, 10000)
	for i := range constant {
		constant[i] = 6254559232
	}
	if n := len(appendIntCol(nil, constant)); n > 8 {
		t.Errorf("constant column of 10000: %d bytes, want <= 8", n)
	}
	steps := []int64{1 << 30}
	for i := 1; i < 1000; i++ {
		steps = append(steps, steps[i-1]+int64(i%5-2|1)*(2<<20))
	}
	if n := len(appendIntCol(nil, steps)); n > 1000+20 {
		t.Errorf("segment steps: %d bytes for 1000 values", n)
	}
}

func TestIntColPackedForms(t *testing.T) {
	// A fixed schedule: every delta the same, no bits per value.
	fixed := make([]int64, 5000)
	for i := range fixed {
		fixed[i] = 1_764_430_000_000_000 + int64(i)*10_000
	}
	// Jittered ticks: one byte each.
	rng := rand.New(rand.NewPCG(5, 6))
	jitter := jitterTicks(5000, rng)
	// Deltas spanning all 64 bits.
	wide := []int64{0, math.MaxInt64, math.MinInt64, 1, -1, math.MaxInt64, 0, math.MinInt64 + 7}
	for name, tc := range map[string]struct {
		vals []int64
		max  int
	}{"fixed": {fixed, 16}, "jitter": {jitter, 5000 + 16}, "wide": {wide, 8*9 + 16}} {
		b := appendIntCol(nil, tc.vals)
		r := reader{b: b}
		got := r.intCol(nil, len(tc.vals))
		if r.err != nil || len(r.b) != 0 || !slices.Equal(got, tc.vals) {
			t.Fatalf("%s: round trip failed (%v)", name, r.err)
		}
		if len(b) > tc.max {
			t.Errorf("%s: %d bytes, want <= %d", name, len(b), tc.max)
		}
	}
}

func TestIntColOffsetsForm(t *testing.T) {
	// Allocator samples taken at random points of a step: multiples of
	// 512 B anywhere in 6 GiB. Their offsets from the first value span 24
	// bits, their deltas 25.
	rng := rand.New(rand.NewPCG(9, 10))
	vals := make([]int64, 4096)
	for i := range vals {
		vals[i] = 3<<30 + rng.Int64N(6<<30)/512*512
	}
	b := appendIntCol(nil, vals)
	r := reader{b: b}
	got := r.intCol(nil, len(vals))
	if r.err != nil || len(r.b) != 0 || !slices.Equal(got, vals) {
		t.Fatalf("round trip failed (%v)", r.err)
	}
	// first, gcd (512), mode, base; then 24 bits a value.
	if want := 24 * (len(vals) - 1) / 8; len(b) > want+20 {
		t.Errorf("%d bytes, want <= %d", len(b), want+20)
	}
	if mode := b[binary.PutVarint(make([]byte, 10), vals[0])+2]; mode != 66+24 {
		t.Errorf("mode %d, want the offsets form with 24 bits (%d)", mode, 66+24)
	}
}

// formsChunk is one allocator series whose columns relate as in real runs:
// active equal to allocated, peak equal to allocated at about half the
// samples, a column a constant above allocated, and one unrelated.
func formsChunk(rng *rand.Rand, n int) ([]int64, []Block) {
	rowT := make([]int64, n)
	rows := make([]int, n)
	cols := make([][]int64, 5)
	for i := range n {
		rowT[i], rows[i] = int64(i)*100_000+rng.Int64N(3000), i
		alloc := 1<<30 + rng.Int64N(6<<30)/512*512
		peak := alloc
		if rng.IntN(2) == 0 {
			peak = 7<<30 + int64(i/100)*512
		}
		vals := []int64{alloc, alloc, peak, alloc + 64<<20, rng.Int64N(1<<30) / 512 * 512}
		for c := range cols {
			cols[c] = append(cols[c], vals[c])
		}
	}
	return rowT, []Block{{ID: 2, Rows: rows, Ints: cols}}
}

func TestChunkColumnForms(t *testing.T) {
	rowT, blocks := formsChunk(rand.New(rand.NewPCG(11, 12)), 4096)
	cols := blocks[0].Ints
	b := Encode(nil, rowT, blocks)
	var d Decoded
	if ok, err := DecodeSeries(b, 2, &d); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for c := range cols {
		if !slices.Equal(d.Ints[c], cols[c]) {
			t.Fatalf("column %d differs", c)
		}
	}
	// The forms chosen: column 1 and 3 minus column 0, column 2 the same
	// as column 0 where equal; column 4 plain.
	r := reader{b: appendIntCols(nil, cols)}
	forms := r.forms(Version, len(cols), nil)
	want := []colForm{{1, 0, formMinus}, {2, 0, formSame}, {3, 0, formMinus}}
	if r.err != nil || !slices.Equal(forms, want) {
		t.Fatalf("forms %v (%v), want %v", forms, r.err, want)
	}
	// Each column alone, plain: what the forms save.
	plain := 0
	for _, c := range cols {
		plain += len(appendIntCol(nil, c))
	}
	withForms := len(appendIntCols(nil, cols))
	// Columns 1 and 3 cost a few bytes; column 2 a bit a value and its
	// other half's offsets (constant but for the slow climb): the
	// chunk is about the size of columns 0 and 4 alone.
	alone := len(appendIntCol(nil, cols[0])) + len(appendIntCol(nil, cols[4]))
	if withForms > alone+len(cols[0])/8+200 || withForms >= plain {
		t.Errorf("with forms %d bytes, plain %d, columns 0 and 4 alone %d", withForms, plain, alone)
	}
}

func TestChunkFormsCorrupt(t *testing.T) {
	for name, forms := range map[string][]byte{
		"column out of range":  {1, 5, 0, formMinus},
		"reference not before": {1, 1, 1, formMinus},
		"unknown kind":         {1, 1, 0, 9},
		"not ascending":        {2, 1, 0, formMinus, 1, 0, formSame},
		"cut short":            {1, 1, 0},
		"common with a ref":    {1, 1, 1, formCommon},
	} {
		r := reader{b: forms}
		r.forms(Version, 2, nil)
		if r.err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A value form in a chunk written before it existed is damage.
	r := reader{b: []byte{1, 1, 0, formCommon}}
	if r.forms(3, 2, nil); r.err == nil {
		t.Error("common form in a version 3 chunk: no error")
	}
	r = reader{b: []byte{1, 1, 0, formCommon}}
	if f := r.forms(Version, 2, nil); r.err != nil || !slices.Equal(f, []colForm{{1, 0, formCommon}}) {
		t.Errorf("common form: %v, %v", f, r.err)
	}
}

// commonChunk is one allocator series of n samples, a third of them at a
// step's end where allocated and inactive_split hold the same values each
// time, the others at random points of the step.
func commonChunk(rng *rand.Rand, n int) ([]int64, []Block) {
	rowT := make([]int64, n)
	rows := make([]int, n)
	alloc, split := make([]int64, n), make([]int64, n)
	for i := range n {
		rowT[i], rows[i] = int64(i)*70_000+rng.Int64N(3000), i
		alloc[i] = 3<<30 + rng.Int64N(6<<30)/512*512
		split[i] = rng.Int64N(1<<30) / 512 * 512
		if i%3 == 0 {
			alloc[i], split[i] = 3<<30, 5<<20
		}
	}
	return rowT, []Block{{ID: 2, Rows: rows, Ints: [][]int64{alloc, split}}}
}

// TestChunkCommonForm: a column that keeps returning to one value (an
// allocator's memory at each step's end, between samples at random points
// of the step) is coded as that value, a bit a row, and the other values;
// it round-trips and costs less than its plain form.
func TestChunkCommonForm(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{9, 1000, 4099} {
		rowT, blocks := commonChunk(rng, n)
		cols := blocks[0].Ints
		b := Encode(nil, rowT, blocks)
		var d Decoded
		if ok, err := DecodeSeries(b, 2, &d); !ok || err != nil {
			t.Fatal(n, ok, err)
		}
		for c := range cols {
			if !slices.Equal(d.Ints[c], cols[c]) {
				t.Fatalf("%d rows: column %d differs", n, c)
			}
		}
		r := reader{b: appendIntCols(nil, cols)}
		forms := r.forms(Version, len(cols), nil)
		want := []colForm{{0, 0, formCommon}, {1, 0, formCommon}}
		if r.err != nil || n > 100 && !slices.Equal(forms, want) {
			t.Fatalf("%d rows: forms %v (%v), want %v", n, forms, r.err, want)
		}
		for c, col := range cols {
			var others []int64
			for _, v := range col {
				if v != col[0] {
					others = append(others, v)
				}
			}
			// the value, the bitmap and the other values: never more
			if got, limit := len(appendIntCols(nil, [][]int64{col})), 1+binary.MaxVarintLen64+(n+7)/8+len(appendIntCol(nil, others)); got > limit {
				t.Errorf("%d rows: column %d takes %d bytes, more than %d", n, c, got, limit)
			}
			if plain, got := len(appendIntCol(nil, col)), len(appendIntCols(nil, [][]int64{col})); n > 100 && got >= plain {
				t.Errorf("%d rows: column %d takes %d bytes, plain %d", n, c, got, plain)
			}
		}
	}
}

func TestChunkPresence(t *testing.T) {
	rowT := []int64{100, 200, 300, 400, 500, 600}
	blocks := []Block{
		{ID: 0, Rows: []int{0, 1, 2, 3, 4, 5}, Ints: [][]int64{{1, 2, 3, 4, 5, 6}}},
		{ID: 3, Rows: []int{2, 3, 5}, Ints: [][]int64{{30, 40, 60}}, Strs: [][]string{{"a", "b", "a"}}},
		{ID: 4, Rows: []int{0}, Ints: [][]int64{{9}}},
	}
	b := Encode(nil, rowT, blocks)
	ids, h, err := SeriesIDs(b)
	if err != nil || !slices.Equal(ids, []uint32{0, 3, 4}) || h.T0 != 100 || h.T1 != 600 {
		t.Fatalf("SeriesIDs = %v %+v %v", ids, h, err)
	}
	var d Decoded
	ok, err := DecodeSeries(b, 3, &d)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if !slices.Equal(d.T, []int64{300, 400, 600}) || !slices.Equal(d.Ints[0], []int64{30, 40, 60}) ||
		!slices.Equal(d.Strs[0], []string{"a", "b", "a"}) {
		t.Fatalf("Decoded %+v", d)
	}
	if ok, err := DecodeSeries(b, 7, &d); ok || err != nil {
		t.Fatalf("missing series: %v %v", ok, err)
	}
}

// FuzzChunkRoundTrip builds a chunk from fuzzer bytes and checks that
// every series decodes to exactly what was encoded; it also feeds the raw
// bytes to the decoder, which must fail cleanly, never panic.
func FuzzChunkRoundTrip(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add(Encode(nil, []int64{1, 2, 3}, []Block{{ID: 1, Rows: []int{0, 2}, Ints: [][]int64{{5, 6}}}}))
	rowT, blocks := formsChunk(rand.New(rand.NewPCG(7, 8)), 64)
	f.Add(Encode(nil, rowT, blocks))
	rowT, blocks = commonChunk(rand.New(rand.NewPCG(7, 8)), 300)
	f.Add(Encode(nil, rowT, blocks))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d Decoded
		DecodeSeries(data, 0, &d) // must not panic
		SeriesIDs(data)
		var rows []int64
		if body, err := Body(data); err == nil {
			DecodeSeriesSet(body, []uint32{0, 1}, []*Decoded{&d, new(Decoded)}, make([]bool, 2), &rows, 1)
			var rt RowTimes
			if rt.Decode(body) == nil {
				d.T = append(d.T[:0], rt.T...)
				DecodeSeriesAt(body, rt.At, 0, &d) // must not panic
			}
		}

		rowT, blocks := chunkFromBytes(data)
		b := Encode(nil, rowT, blocks)
		// Every series at once, and one the chunk does not hold, decode as
		// each does alone.
		ids, ds, found := []uint32{^uint32(0)}, []*Decoded{new(Decoded)}, []bool{false}
		for _, bl := range blocks {
			ids, ds, found = append(ids, bl.ID), append(ds, new(Decoded)), append(found, false)
		}
		body, err := Body(b)
		if err == nil {
			err = DecodeSeriesSet(body, ids, ds, found, &rows, 1)
		}
		if err != nil || found[0] {
			t.Fatalf("all series at once: %v, found the missing one: %v", err, found[0])
		}
		for i, bl := range blocks {
			if ok, _ := DecodeSeries(b, bl.ID, &d); !found[i+1] || !ok || !slices.Equal(ds[i+1].T, d.T) || !slices.EqualFunc(ds[i+1].Ints, d.Ints, slices.Equal) {
				t.Fatalf("series %d: decoded with the others (found %v) is not what it decodes to alone", bl.ID, found[i+1])
			}
		}
		// In ns, every time is the µs one times 1000.
		ns := make([]*Decoded, len(ds))
		for i := range ns {
			ns[i] = new(Decoded)
		}
		var rowsNS []int64
		if err := DecodeSeriesSet(body, ids, ns, make([]bool, len(ids)), &rowsNS, 1000); err != nil {
			t.Fatalf("all series at once in ns: %v", err)
		}
		times1000 := func(a, b []int64) bool {
			return slices.EqualFunc(a, b, func(x, y int64) bool { return x*1000 == y })
		}
		if !times1000(rows, rowsNS) {
			t.Fatalf("row times in ns are not the µs ones times 1000")
		}
		for i := range ds {
			if !times1000(ds[i].T, ns[i].T) || !slices.EqualFunc(ds[i].Ints, ns[i].Ints, slices.Equal) {
				t.Fatalf("series %d: decoded in ns is not its µs decode times 1000", ids[i])
			}
		}
		// Every series from row times decoded once (RowTimes) decodes as
		// it does alone.
		var rt RowTimes
		if err := rt.Decode(body); err != nil {
			t.Fatalf("row times: %v", err)
		}
		at := new(Decoded)
		for _, bl := range blocks {
			at.T = append(at.T[:0], rt.T...)
			okAt, errAt := DecodeSeriesAt(body, rt.At, bl.ID, at)
			ok, err := DecodeSeries(b, bl.ID, &d)
			if okAt != ok || errAt != nil || err != nil || !slices.Equal(at.T, d.T) || !slices.EqualFunc(at.Ints, d.Ints, slices.Equal) ||
				!slices.EqualFunc(at.Strs, d.Strs, slices.Equal) || at.one != d.one {
				t.Fatalf("series %d: decoded from the chunk's row times (%v, %v) is not what it decodes to alone (%v, %v)", bl.ID, okAt, errAt, ok, err)
			}
		}
		for _, bl := range blocks {
			ok, err := DecodeSeries(b, bl.ID, &d)
			if !ok || err != nil {
				t.Fatalf("series %d: %v %v", bl.ID, ok, err)
			}
			for i, r := range bl.Rows {
				if d.T[i] != rowT[r] {
					t.Fatalf("series %d row %d: t %d, want %d", bl.ID, i, d.T[i], rowT[r])
				}
			}
			for c := range bl.Ints {
				if !slices.Equal(d.Ints[c], bl.Ints[c]) {
					t.Fatalf("series %d col %d: %v, want %v", bl.ID, c, d.Ints[c], bl.Ints[c])
				}
			}
			for c := range bl.Strs {
				if !slices.Equal(d.Strs[c], bl.Strs[c]) {
					t.Fatalf("series %d str col %d differs", bl.ID, c)
				}
			}
		}
	})
}

// chunkFromBytes derives a valid chunk layout (ascending times, series with
// presence and columns) from arbitrary bytes.
func chunkFromBytes(data []byte) ([]int64, []Block) {
	next := func() int64 {
		if len(data) == 0 {
			return 0
		}
		v, n := binary.Varint(data)
		if n <= 0 {
			v, n = int64(data[0]), 1
		}
		data = data[n:]
		return v
	}
	nrows := int(uint64(next()) % 64)
	rowT := make([]int64, nrows)
	t := next()
	for i := range rowT {
		rowT[i] = t
		t += int64(uint64(next()) % 1e6)
	}
	var blocks []Block
	nseries := int(uint64(next())%4) + 1
	for s := 0; s < nseries && nrows > 0; s++ {
		bl := Block{ID: uint32(s * 3), Ints: make([][]int64, uint64(next())%3+1)}
		mask := next()
		for r := 0; r < nrows; r++ {
			if mask>>(r%63)&1 == 1 || r == s {
				bl.Rows = append(bl.Rows, r)
			}
		}
		for c := range bl.Ints {
			// Later columns may follow the first, so that the forms
			// against it are chosen too.
			follow := c > 0 && next()%2 == 0
			for i := range bl.Rows {
				v := next()
				if follow && v%4 != 0 {
					v = bl.Ints[0][i] + v%2
				}
				bl.Ints[c] = append(bl.Ints[c], v)
			}
		}
		if next()%2 == 0 {
			col := make([]string, len(bl.Rows))
			for i := range col {
				col[i] = string(rune('a' + next()%5&7))
			}
			bl.Strs = [][]string{col}
		}
		blocks = append(blocks, bl)
	}
	return rowT, blocks
}

// jitterTicks makes n row times 10 ms apart (µs) with ±50 µs of jitter.
func jitterTicks(n int, rng *rand.Rand) []int64 {
	rowT := make([]int64, n)
	for i := range rowT {
		rowT[i] = 1_764_430_000_000_000 + int64(i)*10_000 + rng.Int64N(100) - 50
	}
	return rowT
}

// benchChunk is one device-group chunk like a recorder writes: 8 GPUs and
// their 8 processes sampled on every tick, memory changing by 2 MiB now and
// then.
func benchChunk(rng *rand.Rand, nrows int) ([]int64, []Block, int) {
	rowT := jitterTicks(nrows, rng)
	rows := make([]int, nrows)
	for i := range rows {
		rows[i] = i
	}
	var blocks []Block
	samples := 0
	for g := 0; g < 16; g++ {
		used := make([]int64, nrows)
		v := int64(20 << 30)
		for i := range used {
			if rng.IntN(200) == 0 {
				v += int64(rng.IntN(5)-2) * (2 << 20)
			}
			used[i] = v
		}
		cols := [][]int64{used}
		if g < 8 {
			cols = append(cols, slices.Repeat([]int64{644939776}, nrows))
		}
		blocks = append(blocks, Block{ID: uint32(g), Rows: rows, Ints: cols})
		samples += nrows
	}
	return rowT, blocks, samples
}

func BenchmarkEncodeDeviceChunk(b *testing.B) {
	rowT, blocks, samples := benchChunk(rand.New(rand.NewPCG(1, 2)), 1024)
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out = Encode(out[:0], rowT, blocks)
	}
	b.ReportMetric(float64(len(out))/float64(samples), "B/sample")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
}

func BenchmarkDecodeDeviceChunk(b *testing.B) {
	rowT, blocks, samples := benchChunk(rand.New(rand.NewPCG(1, 2)), 1024)
	chunk := Encode(nil, rowT, blocks)
	var d Decoded
	b.ReportAllocs()
	for b.Loop() {
		for _, bl := range blocks {
			if ok, err := DecodeSeries(chunk, bl.ID, &d); !ok || err != nil {
				b.Fatal(ok, err)
			}
		}
	}
	b.ReportMetric(float64(len(chunk))/float64(samples), "B/sample")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
	b.ReportMetric(float64(b.N*samples)/b.Elapsed().Seconds()/1e6, "Msamples/s")
}

// BenchmarkDecodeTorchChunk decodes an allocator series, whose values
// change at every sample (the hardest case for the codec).
func BenchmarkDecodeTorchChunk(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	n := 4096
	rowT := make([]int64, n)
	rows := make([]int, n)
	cols := make([][]int64, 9)
	t := int64(1_764_430_000_000_000)
	for i := 0; i < n; i++ {
		t += 100_000 + rng.Int64N(3000)
		rowT[i], rows[i] = t, i
		alloc := int64(300<<20) + rng.Int64N(1<<30)/512*512
		vals := []int64{1, alloc, 6 << 30, 0, rng.Int64N(64<<20) / 512 * 512, 3 << 30, 48, 0, 0}
		for c := range cols {
			cols[c] = append(cols[c], vals[c])
		}
	}
	chunk := Encode(nil, rowT, []Block{{ID: 0, Rows: rows, Ints: cols}})
	var d Decoded
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := DecodeSeries(chunk, 0, &d); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64(len(chunk))/float64(n), "B/sample")
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds()/1e6, "Msamples/s")
}

// BenchmarkDecodePackedIntCol decodes one intcol in the packed form alone
// (4096 jittered timestamps: deltas of 100 ms ± 3 ms, 12 bits a value),
// the loop that reads a time column.
func BenchmarkDecodePackedIntCol(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	vals := make([]int64, 4096)
	t := int64(1_764_430_000_000_000)
	for i := range vals {
		t += 100_000 + rng.Int64N(3000)
		vals[i] = t
	}
	enc := appendIntCol(nil, vals)
	r := reader{b: enc}
	r.varint()
	r.uvarint()
	if mode := r.b[0]; mode < 1 || mode > 65 {
		b.Fatalf("mode %d, want packed", mode)
	}
	var dst []int64
	b.ReportAllocs()
	for b.Loop() {
		r := reader{b: enc}
		dst = r.intCol(dst[:0], len(vals))
	}
	if !slices.Equal(dst, vals) {
		b.Fatal("round trip differs")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(vals)), "ns/value")
}

// TestCommon holds common to a plain count of every value (a map): the
// most frequent value, the smallest among ties, where it is held by an
// eighth of the values or more and more than once.
func TestCommon(t *testing.T) {
	count := func(vals []int64) (int64, bool) {
		n := map[int64]int{}
		for _, v := range vals {
			n[v]++
		}
		var c int64
		best := 0
		for v, k := range n {
			if k > best || k == best && v < c {
				c, best = v, k
			}
		}
		return c, best > 1 && best >= len(vals)/8
	}
	rng := rand.New(rand.NewPCG(3, 4))
	cases := map[string][]int64{
		"empty":        {},
		"one":          {5},
		"all distinct": {1, 2, 3, 4, 5, 6, 7, 8, 9},
		"tie":          {9, 9, 4, 4, 7},
		"constant":     {3, 3, 3, 3},
	}
	for _, share := range []int{2, 5, 8, 9, 20} { // one value at every share-th row, the rest random
		for _, n := range []int{16, 1000, 8354} {
			vals := make([]int64, n)
			for i := range vals {
				vals[i] = rng.Int64N(1 << 20)
				if i%share == 0 {
					vals[i] = 1 << 30
				}
			}
			cases[fmt.Sprintf("every %d of %d", share, n)] = vals
		}
	}
	for name, vals := range cases {
		c, ok := common(vals)
		wc, wok := count(vals)
		if ok != wok || ok && c != wc {
			t.Errorf("%s: common %d, %v; counted %d, %v", name, c, ok, wc, wok)
		}
	}
}

// TestOneValue: a column stored as one value for every row says so, and
// holds it in every row; a column whose values differ, even in one row,
// or one of a series read after it in the same Decoded, does not.
func TestOneValue(t *testing.T) {
	rowT := []int64{10, 20, 30, 40, 50, 60, 70, 80}
	rows := []int{0, 1, 2, 3, 4, 5, 6, 7}
	same := []int64{644939776, 644939776, 644939776, 644939776, 644939776, 644939776, 644939776, 644939776}
	oneOff := slices.Clone(same)
	oneOff[5]++
	ramp := []int64{1, 2, 3, 4, 5, 6, 7, 8}
	b := Encode(nil, rowT, []Block{
		{ID: 1, Rows: rows, Ints: [][]int64{ramp, same, oneOff}},
		{ID: 2, Rows: rows, Ints: [][]int64{ramp, ramp}},
	})
	var d Decoded
	if ok, err := DecodeSeries(b, 1, &d); !ok || err != nil {
		t.Fatal(ok, err)
	}
	for c, want := range []bool{false, true, false} {
		if d.OneValue(c) != want {
			t.Errorf("column %d: OneValue %v, want %v", c, d.OneValue(c), want)
		}
	}
	if !slices.Equal(d.Ints[1], same) {
		t.Errorf("the one-value column reads %v", d.Ints[1])
	}
	if ok, err := DecodeSeries(b, 2, &d); !ok || err != nil || d.OneValue(1) {
		t.Errorf("the next series read: OneValue(1) %v (%v, %v)", d.OneValue(1), ok, err)
	}
}
