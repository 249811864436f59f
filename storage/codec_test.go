package storage

import (
	"encoding/binary"
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

func TestChunkPresence(t *testing.T) {
	rowT := []int64{100, 200, 300, 400, 500, 600}
	blocks := []block{
		{id: 0, rows: []int{0, 1, 2, 3, 4, 5}, ints: [][]int64{{1, 2, 3, 4, 5, 6}}},
		{id: 3, rows: []int{2, 3, 5}, ints: [][]int64{{30, 40, 60}}, strs: [][]string{{"a", "b", "a"}}},
		{id: 4, rows: []int{0}, ints: [][]int64{{9}}},
	}
	b := encodeChunk(nil, rowT, blocks)
	ids, h, err := chunkSeries(b)
	if err != nil || !slices.Equal(ids, []uint32{0, 3, 4}) || h.t0 != 100 || h.t1 != 600 {
		t.Fatalf("chunkSeries = %v %+v %v", ids, h, err)
	}
	var d decoded
	ok, err := decodeSeries(b, 3, &d)
	if !ok || err != nil {
		t.Fatal(ok, err)
	}
	if !slices.Equal(d.t, []int64{300, 400, 600}) || !slices.Equal(d.ints[0], []int64{30, 40, 60}) ||
		!slices.Equal(d.strs[0], []string{"a", "b", "a"}) {
		t.Fatalf("decoded %+v", d)
	}
	if ok, err := decodeSeries(b, 7, &d); ok || err != nil {
		t.Fatalf("missing series: %v %v", ok, err)
	}
}

// FuzzChunkRoundTrip builds a chunk from fuzzer bytes and checks that
// every series decodes to exactly what was encoded; it also feeds the raw
// bytes to the decoder, which must fail cleanly, never panic.
func FuzzChunkRoundTrip(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add(encodeChunk(nil, []int64{1, 2, 3}, []block{{id: 1, rows: []int{0, 2}, ints: [][]int64{{5, 6}}}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		var d decoded
		decodeSeries(data, 0, &d) // must not panic
		chunkSeries(data)

		rowT, blocks := chunkFromBytes(data)
		b := encodeChunk(nil, rowT, blocks)
		for _, bl := range blocks {
			ok, err := decodeSeries(b, bl.id, &d)
			if !ok || err != nil {
				t.Fatalf("series %d: %v %v", bl.id, ok, err)
			}
			for i, r := range bl.rows {
				if d.t[i] != rowT[r] {
					t.Fatalf("series %d row %d: t %d, want %d", bl.id, i, d.t[i], rowT[r])
				}
			}
			for c := range bl.ints {
				if !slices.Equal(d.ints[c], bl.ints[c]) {
					t.Fatalf("series %d col %d: %v, want %v", bl.id, c, d.ints[c], bl.ints[c])
				}
			}
			for c := range bl.strs {
				if !slices.Equal(d.strs[c], bl.strs[c]) {
					t.Fatalf("series %d str col %d differs", bl.id, c)
				}
			}
		}
	})
}

// chunkFromBytes derives a valid chunk layout (ascending times, series with
// presence and columns) from arbitrary bytes.
func chunkFromBytes(data []byte) ([]int64, []block) {
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
	var blocks []block
	nseries := int(uint64(next())%4) + 1
	for s := 0; s < nseries && nrows > 0; s++ {
		bl := block{id: uint32(s * 3), ints: make([][]int64, uint64(next())%3+1)}
		mask := next()
		for r := 0; r < nrows; r++ {
			if mask>>(r%63)&1 == 1 || r == s {
				bl.rows = append(bl.rows, r)
			}
		}
		for c := range bl.ints {
			for range bl.rows {
				bl.ints[c] = append(bl.ints[c], next())
			}
		}
		if next()%2 == 0 {
			col := make([]string, len(bl.rows))
			for i := range col {
				col[i] = string(rune('a' + next()%5&7))
			}
			bl.strs = [][]string{col}
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
func benchChunk(rng *rand.Rand, nrows int) ([]int64, []block, int) {
	rowT := jitterTicks(nrows, rng)
	rows := make([]int, nrows)
	for i := range rows {
		rows[i] = i
	}
	var blocks []block
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
		blocks = append(blocks, block{id: uint32(g), rows: rows, ints: cols})
		samples += nrows
	}
	return rowT, blocks, samples
}

func BenchmarkEncodeDeviceChunk(b *testing.B) {
	rowT, blocks, samples := benchChunk(rand.New(rand.NewPCG(1, 2)), 1024)
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		out = encodeChunk(out[:0], rowT, blocks)
	}
	b.ReportMetric(float64(len(out))/float64(samples), "B/sample")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*samples), "ns/sample")
}

func BenchmarkDecodeDeviceChunk(b *testing.B) {
	rowT, blocks, samples := benchChunk(rand.New(rand.NewPCG(1, 2)), 1024)
	chunk := encodeChunk(nil, rowT, blocks)
	var d decoded
	b.ReportAllocs()
	for b.Loop() {
		for _, bl := range blocks {
			if ok, err := decodeSeries(chunk, bl.id, &d); !ok || err != nil {
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
	chunk := encodeChunk(nil, rowT, []block{{id: 0, rows: rows, ints: cols}})
	var d decoded
	b.ReportAllocs()
	for b.Loop() {
		if ok, err := decodeSeries(chunk, 0, &d); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
	b.ReportMetric(float64(len(chunk))/float64(n), "B/sample")
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds()/1e6, "Msamples/s")
}
