package chunk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"
	"slices"
)

const Version = 3

// CRCSize is the length of a version 3 chunk's trailing checksum.
const CRCSize = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Body checks a chunk's checksum (version 3 and later) and returns
// its bytes without it; earlier versions are returned as they are.
func Body(b []byte) ([]byte, error) {
	if len(b) == 0 || b[0] < 3 {
		return b, nil
	}
	if len(b) < 1+CRCSize {
		return nil, fmt.Errorf("%w: %d bytes, too short for its checksum", ErrCorrupt, len(b))
	}
	body := b[:len(b)-CRCSize]
	if want, got := binary.LittleEndian.Uint32(b[len(body):]), crc32.Checksum(body, castagnoli); want != got {
		return nil, fmt.Errorf("%w: checksum %08x, computed %08x", ErrCorrupt, want, got)
	}
	return body, nil
}

// appendCRC appends the checksum of chunk to dst (which ends with it).
func appendCRC(dst, chunk []byte) []byte {
	return binary.LittleEndian.AppendUint32(dst, crc32.Checksum(chunk, castagnoli))
}

// maxChunkRows bounds a chunk's rows; writers seal chunks long before.
const maxChunkRows = 1 << 20

// maxCols bounds a series' columns (an empty column takes no bytes, so the
// chunk's length cannot bound them).
const maxCols = 64

// ErrCorrupt is returned, wrapped with the run and chunk, for a chunk that
// cannot be Decoded or whose series lack their kind's columns.
var ErrCorrupt = errors.New("corrupt chunk")

func zigzag(v int64) uint64   { return uint64(v<<1) ^ uint64(v>>63) }
func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// appendIntCol appends the intcol encoding of vals to dst.
func appendIntCol(dst []byte, vals []int64) []byte {
	if len(vals) == 0 {
		return dst
	}
	dst = binary.AppendVarint(dst, vals[0])
	var g uint64
	for i := 1; i < len(vals); i++ {
		d := vals[i] - vals[i-1]
		if d < 0 {
			d = -d // MinInt64 stays MinInt64; as uint64 it is 1<<63, still right for the GCD
		}
		if d != 0 {
			g = gcd(uint64(d), g)
			if g == 1 {
				break
			}
		}
	}
	dst = binary.AppendUvarint(dst, g)
	if g == 0 {
		return dst
	}
	// The scaled deltas, once; then write the tokens and, if packing them
	// is smaller, write that instead.
	q := make([]int64, len(vals)-1)
	base, span := int64(math.MaxInt64), uint64(0)
	for i := range q {
		q[i] = divDelta(vals[i+1]-vals[i], g)
		base = min(base, q[i])
	}
	for _, v := range q {
		span = max(span, uint64(v-base))
	}
	mark := len(dst)
	dst = append(dst, 0) // mode: tokens
	for i := 0; i < len(q); {
		if q[i] == 0 {
			j := i + 1
			for j < len(q) && q[j] == 0 {
				j++
			}
			dst = append(dst, 0)
			dst = binary.AppendUvarint(dst, uint64(j-i-1))
			i = j
			continue
		}
		dst = binary.AppendUvarint(dst, zigzag(q[i]))
		i++
	}
	w := bits.Len64(span)
	best := len(dst) - mark - 1 // the tokens' size
	packed := uvarintLen(zigzag(base)) + (len(q)*w+7)/8
	// The offsets from the first value, scaled: smaller than the deltas
	// when values jump around within a range (allocator samples taken at
	// random points of a step), as their span is half the deltas'.
	var off []int64
	var obase int64
	var ow int
	ok := false
	if w > 0 { // on a fixed schedule nothing beats 0 bits a delta
		off, obase, ow, ok = offsets(vals, g)
	}
	switch olen := uvarintLen(zigzag(obase)) + (len(off)*ow+7)/8; {
	case ok && olen < packed && olen < best:
		dst = append(dst[:mark], byte(ow+66))
		dst = binary.AppendVarint(dst, obase)
		return appendBits(dst, off, obase, ow)
	case packed < best:
		dst = append(dst[:mark], byte(w+1))
		dst = binary.AppendVarint(dst, base)
		return appendBits(dst, q, base, w)
	}
	return dst
}

// offsets returns the scaled offsets (v[i]-v[0])/g of vals[1:], their
// smallest value and the bits their span takes. ok is
// false when an offset overflows (then only deltas, which wrap, code the
// column).
func offsets(vals []int64, g uint64) (off []int64, base int64, w int, ok bool) {
	if g > math.MaxInt64 {
		return nil, 0, 0, false
	}
	off = make([]int64, len(vals)-1)
	base, hi := int64(math.MaxInt64), int64(math.MinInt64)
	for i, v := range vals[1:] {
		d := v - vals[0]
		if (v >= vals[0]) != (d >= 0) {
			return nil, 0, 0, false // v-v[0] overflows
		}
		if off[i] = d / int64(g); off[i]*int64(g) != d {
			return nil, 0, 0, false // only the wrapped deltas divide by g
		}
		base, hi = min(base, off[i]), max(hi, off[i])
	}
	if hi-base < 0 {
		return nil, 0, 0, false // the span overflows
	}
	return off, base, bits.Len64(uint64(hi - base)), true
}

// appendBits appends every v-base in w bits, little-endian bit order.
func appendBits(dst []byte, vals []int64, base int64, w int) []byte {
	var acc uint64 // bits not yet written, low first
	n := 0         // how many
	for _, v := range vals {
		u := uint64(v - base)
		acc |= u << n
		if n+w >= 64 { // the word is full: write it, keep the rest of u
			dst = binary.LittleEndian.AppendUint64(dst, acc)
			if n > 0 {
				acc = u >> (64 - n)
			} else {
				acc = 0
			}
			n = n + w - 64
		} else {
			n += w
		}
	}
	for ; n > 0; n -= 8 {
		dst = append(dst, byte(acc))
		acc >>= 8
	}
	return dst
}

func uvarintLen(v uint64) int { return (bits.Len64(v|1) + 6) / 7 }

// divDelta divides a delta by the column's GCD. A delta of MinInt64 (only
// possible with wrapping) has a GCD that is a power of two; dividing the
// unsigned value keeps it exact.
func divDelta(d int64, g uint64) int64 {
	if g == 1 {
		return d
	}
	if d < 0 {
		return -int64(uint64(-d) / g)
	}
	return int64(uint64(d) / g)
}

// reader decodes varints from a byte slice, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if len(r.b) > 0 && r.b[0] < 0x80 { // fast path: one byte
		v := uint64(r.b[0])
		r.b = r.b[1:]
		return v
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 { return unzigzag(r.uvarint()) }

func (r *reader) bytes(n uint64) []byte {
	if n > uint64(len(r.b)) {
		r.fail()
		return nil
	}
	s := r.b[:n]
	r.b = r.b[n:]
	return s
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = ErrCorrupt
	}
	r.b = nil
}

// count reads a length that must not exceed limit (so corrupt input cannot
// make the decoder allocate without bound).
func (r *reader) count(limit uint64) int {
	n := r.uvarint()
	if n > limit {
		r.fail()
		return 0
	}
	return int(n)
}

// intCol decodes an intcol of n values, appending them to dst. It is the
// decoder's hot loop: varints are read inline from a local slice and values
// written by index into space grown once.
func (r *reader) intCol(dst []int64, n int) []int64 {
	if n == 0 || r.err != nil {
		return dst
	}
	v := r.varint()
	g := r.uvarint()
	if r.err != nil {
		return dst
	}
	base := len(dst)
	dst = slices.Grow(dst, n)[:base+n]
	out := dst[base:]
	out[0] = v
	if g == 0 {
		fill(out[1:], v)
		return dst
	}
	if len(r.b) == 0 {
		r.fail()
		return dst[:base+1]
	}
	mode := r.b[0]
	r.b = r.b[1:]
	if mode > 130 {
		r.fail()
		return dst[:base+1]
	}
	if mode >= 66 {
		return r.unpackOffsets(dst, base, v, g, int(mode-66), n)
	}
	if mode > 0 {
		return r.unpack(dst, base, v, g, int(mode-1), n)
	}
	b := r.b
	for i := 1; i < n; {
		var z uint64
		if len(b) > 0 && b[0] < 0x80 {
			z, b = uint64(b[0]), b[1:]
		} else if len(b) > 2 && b[1] < 0x80 {
			z, b = uint64(b[0]&0x7f)|uint64(b[1])<<7, b[2:]
		} else if len(b) > 3 && b[2] < 0x80 {
			z, b = uint64(b[0]&0x7f)|uint64(b[1]&0x7f)<<7|uint64(b[2])<<14, b[3:]
		} else {
			var k int
			if z, k = binary.Uvarint(b); k <= 0 {
				r.fail()
				return dst[:base+i]
			}
			b = b[k:]
		}
		if z != 0 {
			v += int64(uint64(unzigzag(z)) * g)
			out[i] = v
			i++
			continue
		}
		run, k := binary.Uvarint(b)
		if k <= 0 || run >= uint64(n-i) {
			r.fail()
			return dst[:base+i]
		}
		b = b[k:]
		end := i + int(run) + 1
		fill(out[i:end], v)
		i = end
	}
	r.b = b
	return dst
}

// fill sets every element of out to v: by doubling copies, which move
// memory many words at a time where a loop stores one (a chunk's
// constant columns and runs are most of what some series hold).
func fill(out []int64, v int64) {
	if len(out) == 0 {
		return
	}
	out[0] = v
	for k := 1; k < len(out); k *= 2 {
		copy(out[k:], out[:k])
	}
}

// rowTimes appends the row times of the chunk whose header is h to dst.
func (r *reader) rowTimes(h Header, dst []int64) []int64 {
	if h.NRows == 0 {
		return dst
	}
	return r.timeCol(dst, h.T0, h.NRows)
}

// timeCol decodes a chunk's row times: t0, then an intcol of the n−1
// deltas between them, appended to dst. It is intCol followed by running
// sums, with the two common forms done in one pass: rows at a fixed
// interval (a constant intcol: t0 + i·d) and rows whose deltas jitter
// about it (the offsets form: each delta's offset added as it is
// unpacked). Every series read from a chunk decodes its row times, so a
// chunk of 8 GPUs' devices and processes does this 16 times.
func (r *reader) timeCol(dst []int64, t0 int64, n int) []int64 {
	base := len(dst)
	dst = append(dst, t0)
	if n <= 1 || r.err != nil {
		return dst
	}
	save := r.b
	d0, g := r.varint(), r.uvarint()
	switch {
	case r.err != nil:
		return dst
	case g == 0:
		dst = slices.Grow(dst, n-1)[:base+n]
		out := dst[base:]
		for i := range out {
			out[i] = t0 + int64(i)*d0
		}
		return dst
	case n > 2 && len(r.b) > 0 && r.b[0] >= 66 && r.b[0] <= 130:
		w := int(r.b[0] - 66)
		r.b = r.b[1:]
		q0 := r.varint()
		data := r.bytes(uint64(((n-2)*w + 7) / 8))
		if r.err != nil {
			return dst
		}
		dst = slices.Grow(dst, n-1)[:base+n]
		out := dst[base:]
		t := t0 + d0
		out[1] = t
		unbits(out[2:], data, w)
		c := d0 + int64(uint64(q0)*g) // each delta is c + q·g
		for i, q := range out[2:] {
			t += c + int64(uint64(q)*g)
			out[i+2] = t
		}
		return dst
	}
	r.b = save // read again as any intcol
	dst = r.intCol(dst, n-1)
	if r.err == nil {
		out := dst[base:]
		for i := 1; i < len(out); i++ { // deltas to times
			out[i] += out[i-1]
		}
	}
	return dst
}

// unpack decodes the packed form of an intcol into dst[base+1:base+n]:
// running sums of the scaled deltas.
func (r *reader) unpack(dst []int64, base int, v int64, g uint64, w, n int) []int64 {
	q0 := r.varint()
	data := r.bytes(uint64(((n-1)*w + 7) / 8))
	if r.err != nil {
		return dst[:base+1]
	}
	out := dst[base+1 : base+n]
	unbits(out, data, w)
	for i, q := range out {
		v += int64(uint64(q0+q) * g)
		out[i] = v
	}
	return dst
}

// unpackOffsets decodes the offsets form of an intcol into
// dst[base+1:base+n]: v0 plus each scaled offset.
func (r *reader) unpackOffsets(dst []int64, base int, v0 int64, g uint64, w, n int) []int64 {
	q0 := r.varint()
	data := r.bytes(uint64(((n-1)*w + 7) / 8))
	if r.err != nil {
		return dst[:base+1]
	}
	out := dst[base+1 : base+n]
	unbits(out, data, w)
	for i, q := range out {
		out[i] = v0 + int64(uint64(q0+q)*g)
	}
	return dst
}

// unbits sets out[i] to the i-th w-bit field of data (little-endian bit
// order, w in 0..64), the bits of both the packed and the offsets form.
// Fields that lie within an 8-byte load from their first byte (all but
// the last few, for w ≤ 57) are one load and a shift each, in a loop the
// compiler keeps free of calls; the rest go through bitsAt.
func unbits(out []int64, data []byte, w int) {
	if w == 0 {
		clear(out)
		return
	}
	mask := ^uint64(0) >> (64 - w)
	i := 0
	if w <= 57 {
		for ; i < len(out); i++ {
			at := i * w >> 3
			if at+8 > len(data) {
				break
			}
			out[i] = int64(binary.LittleEndian.Uint64(data[at:]) >> uint(i*w&7) & mask)
		}
	}
	for ; i < len(out); i++ {
		out[i] = int64(bitsAt(data, i*w, w) & mask)
	}
}

// bitsAt returns the (at most 64) bits of data from bit position bit on,
// low first; the caller masks off what is beyond its width.
func bitsAt(data []byte, bit, w int) uint64 {
	at, shift := bit>>3, uint(bit&7)
	var x uint64
	if at+8 <= len(data) {
		x = binary.LittleEndian.Uint64(data[at:]) >> shift
		if shift+uint(w) > 64 {
			x |= uint64(data[at+8]) << (64 - shift)
		}
		return x
	}
	for k := len(data) - 1; k >= at; k-- { // the last bytes: gather what is left
		x = x<<8 | uint64(data[k])
	}
	return x >> shift
}

// strCol decodes a strcol of n values, appending them to dst.
func (r *reader) strCol(dst []string, n int) []string {
	ndict := r.count(uint64(len(r.b)))
	dict := make([]string, ndict)
	for i := range dict {
		dict[i] = string(r.bytes(r.uvarint()))
	}
	idx := r.intCol(make([]int64, 0, n), n)
	if r.err != nil {
		return dst
	}
	for _, i := range idx {
		if i < 0 || i >= int64(len(dict)) {
			r.fail()
			return dst
		}
		dst = append(dst, dict[i])
	}
	return dst
}

func appendStrCol(dst []byte, vals []string) []byte {
	index := map[string]int64{}
	var dict []string
	idx := make([]int64, len(vals))
	for i, s := range vals {
		k, ok := index[s]
		if !ok {
			k = int64(len(dict))
			index[s] = k
			dict = append(dict, s)
		}
		idx[i] = k
	}
	dst = binary.AppendUvarint(dst, uint64(len(dict)))
	for _, s := range dict {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return appendIntCol(dst, idx)
}

// Block is the encoder's view of one series in a chunk: the rows it is
// present in and its columns, one value per present row.
type Block struct {
	ID   uint32
	Rows []int // ascending row indices
	Ints [][]int64
	Strs [][]string
}

// Encode encodes rows with times rowT (µs, ascending) and the series
// blocks. scratch is reused for series blocks to avoid allocations.
func Encode(dst []byte, rowT []int64, blocks []Block) []byte {
	start := len(dst)
	dst = append(dst, Version)
	dst = binary.AppendUvarint(dst, uint64(len(rowT)))
	if len(rowT) == 0 {
		dst = binary.AppendUvarint(dst, 0)
		dst = binary.AppendUvarint(dst, 0)
		return appendCRC(dst, dst[start:])
	}
	dst = binary.AppendUvarint(dst, uint64(rowT[len(rowT)-1]-rowT[0]))
	dst = binary.AppendVarint(dst, rowT[0])
	deltas := make([]int64, len(rowT)-1)
	for i := range deltas {
		deltas[i] = rowT[i+1] - rowT[i]
	}
	dst = appendIntCol(dst, deltas)
	dst = binary.AppendUvarint(dst, uint64(len(blocks)))
	var body []byte
	for _, b := range blocks {
		body = body[:0]
		body = binary.AppendUvarint(body, uint64(b.ID))
		body = appendPresence(body, b.Rows, len(rowT))
		body = binary.AppendUvarint(body, uint64(len(b.Ints)))
		body = appendIntCols(body, b.Ints)
		body = binary.AppendUvarint(body, uint64(len(b.Strs)))
		for _, c := range b.Strs {
			body = appendStrCol(body, c)
		}
		dst = binary.AppendUvarint(dst, uint64(len(body)))
		dst = append(dst, body...)
	}
	return appendCRC(dst, dst[start:])
}

// Column forms (chunk version 2): how a series' int column is coded
// against an earlier column of the same series, its reference.
const (
	formMinus byte = 1 // the intcol holds v[i] - ref[i]
	formSame  byte = 2 // a bitmap of the rows where v[i] == ref[i], then the others
)

// colForm says column col is coded in form kind against column ref.
type colForm struct {
	col, ref int
	kind     byte
}

// appendIntCols appends the forms list and the int columns of one series,
// each in the smallest of its plain form and its forms against every
// earlier column. Columns that already cost under a bit a value are left
// plain without trying.
func appendIntCols(dst []byte, cols [][]int64) []byte {
	var forms []colForm
	coded := make([][]byte, len(cols))
	var scratch []int64
	for c, vals := range cols {
		best := appendIntCol(nil, vals)
		if len(best) <= len(vals)/8+8 {
			coded[c] = best
			continue
		}
		form := colForm{col: c}
		for r := range c {
			ref := cols[r]
			scratch = scratch[:0]
			for i, v := range vals {
				scratch = append(scratch, v-ref[i])
			}
			if b := appendIntCol(nil, scratch); len(b) < len(best) {
				best, form.ref, form.kind = b, r, formMinus
			}
			if b := appendSame(nil, vals, ref, scratch); len(b) < len(best) {
				best, form.ref, form.kind = b, r, formSame
			}
		}
		coded[c] = best
		if form.kind != 0 {
			forms = append(forms, form)
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(forms)))
	for _, f := range forms {
		dst = binary.AppendUvarint(dst, uint64(f.col))
		dst = binary.AppendUvarint(dst, uint64(f.ref))
		dst = append(dst, f.kind)
	}
	for _, b := range coded {
		dst = append(dst, b...)
	}
	return dst
}

// appendSame appends the formSame coding of vals against ref: a bitmap of
// len(vals) bits, low bit first, set where the values are equal, then the
// intcol of the values where they are not. scratch is reused.
func appendSame(dst []byte, vals, ref, scratch []int64) []byte {
	mark := len(dst)
	dst = append(dst, make([]byte, (len(vals)+7)/8)...)
	scratch = scratch[:0]
	for i, v := range vals {
		if v == ref[i] {
			dst[mark+i/8] |= 1 << (i % 8)
		} else {
			scratch = append(scratch, v)
		}
	}
	return appendIntCol(dst, scratch)
}

func appendPresence(dst []byte, rows []int, nrows int) []byte {
	var runs []uint64
	next := 0 // the row index that continues the current present run
	var cur uint64
	for _, r := range rows {
		if r != next { // a gap: close the present run, add the absent one
			runs = append(runs, cur, uint64(r-next))
			cur = 0
		}
		cur++
		next = r + 1
	}
	runs = append(runs, cur)
	if next < nrows {
		runs = append(runs, uint64(nrows-next))
	}
	dst = binary.AppendUvarint(dst, uint64(len(runs)))
	for _, n := range runs {
		dst = binary.AppendUvarint(dst, n)
	}
	return dst
}

// Header is what a reader learns from a chunk's first bytes.
type Header struct {
	Version byte
	NRows   int
	T0, T1  int64 // first and last row time, µs
}

func readHeader(r *reader) Header {
	if len(r.b) == 0 || r.b[0] < 1 || r.b[0] > Version {
		r.fail()
		return Header{}
	}
	h := Header{Version: r.b[0]}
	r.b = r.b[1:]
	h.NRows = r.count(maxChunkRows)
	span := r.uvarint()
	if h.NRows == 0 {
		return h
	}
	h.T0 = r.varint()
	h.T1 = h.T0 + int64(span)
	return h
}

// Decoded is one series Decoded from one chunk: times (µs) and columns.
type Decoded struct {
	T     []int64 // times, µs
	Ints  [][]int64
	Strs  [][]string
	forms []colForm // scratch
	tmp   []int64   // scratch
}

// forms reads a series' forms list: ascending columns below ncols, each
// coded against an earlier one.
func (r *reader) forms(ncols int, dst []colForm) []colForm {
	n := r.count(uint64(ncols))
	prev := -1
	for range n {
		f := colForm{col: int(r.count(maxCols)), ref: int(r.count(maxCols))}
		if len(r.b) == 0 {
			r.fail()
			return nil
		}
		f.kind, r.b = r.b[0], r.b[1:]
		if f.col >= ncols || f.col <= prev || f.ref >= f.col || (f.kind != formMinus && f.kind != formSame) {
			r.fail()
			return nil
		}
		prev = f.col
		dst = append(dst, f)
	}
	return dst
}

// same decodes a formSame column of len(ref) values into dst.
func (r *reader) same(dst, ref []int64, tmp *[]int64) []int64 {
	n := len(ref)
	bitmap := r.bytes(uint64((n + 7) / 8))
	if r.err != nil {
		return dst
	}
	eq := 0
	for _, b := range bitmap {
		eq += bits.OnesCount8(b)
	}
	if n%8 != 0 && bitmap[len(bitmap)-1]>>(n%8) != 0 {
		r.fail() // bits past the last row
		return dst
	}
	other := r.intCol((*tmp)[:0], n-eq)
	*tmp = other
	if r.err != nil {
		return dst
	}
	dst = slices.Grow(dst, n)
	for i, v := range ref {
		if bitmap[i/8]>>(i%8)&1 == 0 {
			v, other = other[0], other[1:]
		}
		dst = append(dst, v)
	}
	return dst
}

// DecodeSeries decodes series id from chunk b, reusing d's slices. It
// reports false (and no error) when the chunk does not hold the series.
func DecodeSeries(b []byte, id uint32, d *Decoded) (bool, error) {
	b, err := Body(b)
	if err != nil {
		return false, err
	}
	return DecodeSeriesBody(b, id, d)
}

// DecodeSeriesBody is DecodeSeries of a chunk whose checksum was checked
// and cut off (Body).
func DecodeSeriesBody(b []byte, id uint32, d *Decoded) (bool, error) {
	r := reader{b: b}
	h := readHeader(&r)
	if r.err != nil {
		return false, r.err
	}
	rowT := r.rowTimes(h, d.T[:0])
	for w := r.seriesBlocks(); ; {
		sid, br, ok := w.next()
		if !ok {
			break
		}
		if sid != id {
			continue
		}
		found := decodeBlock(&br, h.Version, rowT, d)
		if br.err != nil {
			return false, br.err
		}
		return found, nil
	}
	d.T = rowT[:0]
	return false, r.err
}

// DecodeSeriesSet is DecodeSeriesBody for several series of one chunk:
// ds[i] gets series ids[i], and found[i] says whether the chunk holds it.
// The chunk's row times, from which every series' times are drawn, are
// decoded once (into rows, kept for the next call) where DecodeSeriesBody
// decodes them for each series read.
func DecodeSeriesSet(b []byte, ids []uint32, ds []*Decoded, found []bool, rows *[]int64) error {
	r := reader{b: b}
	h := readHeader(&r)
	if r.err != nil {
		return r.err
	}
	rowT := r.rowTimes(h, (*rows)[:0])
	*rows = rowT
	clear(found)
	for i := range ds {
		ds[i].T = ds[i].T[:0]
	}
	for w := r.seriesBlocks(); ; {
		sid, br, ok := w.next()
		if !ok {
			break
		}
		i := slices.Index(ids, sid)
		if i < 0 || found[i] {
			continue
		}
		d := ds[i]
		// decodeBlock keeps the present rows by moving them down in place:
		// each series does it in its own copy.
		found[i] = decodeBlock(&br, h.Version, append(d.T[:0], rowT...), d)
		if br.err != nil {
			return br.err
		}
	}
	return r.err
}

// blockWalk walks the series blocks that follow a chunk's header and row
// times (seriesBlocks); a fault in their framing is left in the chunk's
// reader.
type blockWalk struct {
	r    *reader
	n, s int
}

func (r *reader) seriesBlocks() blockWalk {
	return blockWalk{r: r, n: r.count(uint64(len(r.b)))}
}

// next is the next block's series id and a reader of the rest of the
// block; false after the last, or at a fault.
func (w *blockWalk) next() (id uint32, br reader, ok bool) {
	r := w.r
	if w.s >= w.n || r.err != nil {
		return 0, reader{}, false
	}
	w.s++
	size := r.uvarint()
	body := r.bytes(size)
	if r.err != nil {
		return 0, reader{}, false
	}
	br = reader{b: body}
	return uint32(br.uvarint()), br, true
}

// decodeBlock decodes a series block's presence and columns into d, turning
// the chunk's row times into the series' own times.
func decodeBlock(r *reader, version byte, rowT []int64, d *Decoded) bool {
	nruns := r.count(uint64(len(r.b)))
	row, n := 0, 0 // rows walked, present rows kept (compacted in place)
	for i := 0; i < nruns && r.err == nil; i++ {
		k := r.uvarint()
		if k > uint64(len(rowT)-row) {
			r.fail()
			return false
		}
		if i%2 == 0 {
			copy(rowT[n:], rowT[row:row+int(k)])
			n += int(k)
		}
		row += int(k)
	}
	if row != len(rowT) {
		r.fail()
		return false
	}
	d.T = rowT[:n]
	nints := r.count(maxCols)
	d.Ints = resize(d.Ints, nints)
	var forms []colForm
	if version >= 2 {
		forms = r.forms(nints, d.forms[:0])
		d.forms = forms
	}
	for i := range d.Ints {
		if len(forms) > 0 && forms[0].col == i {
			f := forms[0]
			forms = forms[1:]
			ref := d.Ints[f.ref]
			if f.kind == formSame {
				d.Ints[i] = r.same(d.Ints[i][:0], ref, &d.tmp)
				continue
			}
			d.Ints[i] = r.intCol(d.Ints[i][:0], n)
			if r.err == nil {
				for k, v := range ref {
					d.Ints[i][k] += v
				}
			}
			continue
		}
		d.Ints[i] = r.intCol(d.Ints[i][:0], n)
	}
	nstrs := r.count(maxCols)
	d.Strs = resize(d.Strs, nstrs)
	for i := range d.Strs {
		d.Strs[i] = r.strCol(d.Strs[i][:0], n)
	}
	return r.err == nil
}

func resize[T any](s [][]T, n int) [][]T {
	if cap(s) >= n {
		return s[:n]
	}
	return append(s[:cap(s)], make([][]T, n-cap(s))...)
}

// SeriesIDs lists the ids of the series a chunk holds (for consistency checks).
func SeriesIDs(b []byte) ([]uint32, Header, error) {
	b, err := Body(b)
	if err != nil {
		return nil, Header{}, err
	}
	return SeriesIDsBody(b)
}

// SeriesIDsBody is SeriesIDs of a chunk whose checksum was checked and
// cut off (Body).
func SeriesIDsBody(b []byte) ([]uint32, Header, error) {
	r := reader{b: b}
	h := readHeader(&r)
	if h.NRows > 0 {
		r.intCol(nil, h.NRows-1)
	}
	var ids []uint32
	nseries := r.count(uint64(len(r.b)))
	for s := 0; s < nseries && r.err == nil; s++ {
		body := r.bytes(r.uvarint())
		br := reader{b: body}
		id := br.uvarint()
		if br.err != nil || id > 1<<32-1 {
			r.fail()
			break
		}
		ids = append(ids, uint32(id))
	}
	if r.err != nil {
		return nil, h, fmt.Errorf("%w: %d bytes", r.err, len(b))
	}
	return ids, h, nil
}
