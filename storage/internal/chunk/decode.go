package chunk

import (
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
)

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

// rowTimes appends the row times of the chunk whose header is h to dst,
// each multiplied by unit.
func (r *reader) rowTimes(h Header, dst []int64, unit int64) []int64 {
	if h.NRows == 0 {
		return dst
	}
	return r.timeCol(dst, h.T0, h.NRows, unit)
}

// timeCol decodes a chunk's row times: t0, then an intcol of the n−1
// deltas between them, appended to dst. It is intCol followed by running
// sums, with the two common forms done in one pass: rows at a fixed
// interval (a constant intcol: t0 + i·d) and rows whose deltas jitter
// about it (the offsets form: each delta's offset added as it is
// unpacked). DecodeSeriesBody decodes them for each series it reads, so
// a reader of several series of one chunk (the device group holds the
// devices and processes of every GPU) keeps them (RowTimes). Each time is
// multiplied by unit (1, or 1000 for ns from the stored µs): the delta
// forms scale as their parts do, so the times come in the unit as they
// are decoded, not in a pass of their own after.
func (r *reader) timeCol(dst []int64, t0 int64, n int, unit int64) []int64 {
	base := len(dst)
	dst = append(dst, t0*unit)
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
		t0, d0 := t0*unit, d0*unit
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
		out[1] = (t0 + d0) * unit
		c := d0 + int64(uint64(q0)*g) // each delta is c + q·g
		offsetTimes(out[1:], data, w, c*unit, g*uint64(unit))
		return dst
	}
	r.b = save // read again as any intcol
	dst = r.intCol(dst, n-1)
	if r.err == nil {
		out := dst[base:]
		out[0] = t0
		for i := 1; i < len(out); i++ { // deltas to times
			out[i] += out[i-1]
		}
		if unit != 1 {
			for i := range out {
				out[i] *= unit
			}
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
	// Several fields a load, as in offsetTimes.
	u := uint(w)
	if w <= 14 {
		for ; i+3 < len(out); i += 4 {
			bit := i * w
			at := bit >> 3
			if at+8 > len(data) {
				break
			}
			x := binary.LittleEndian.Uint64(data[at:]) >> uint(bit&7)
			out[i], out[i+1] = int64(x&mask), int64(x>>u&mask)
			out[i+2], out[i+3] = int64(x>>(2*u)&mask), int64(x>>(3*u)&mask)
		}
	}
	if w <= 28 {
		for ; i+1 < len(out); i += 2 {
			bit := i * w
			at := bit >> 3
			if at+8 > len(data) {
				break
			}
			x := binary.LittleEndian.Uint64(data[at:]) >> uint(bit&7)
			out[i], out[i+1] = int64(x&mask), int64(x>>u&mask)
		}
	}
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

// offsetTimes sets out[i+1] = out[i] + c + q_i·g for the w-bit fields q_i
// of data (as unbits reads them): the times of the offsets form, each
// summed as its field is read rather than in a second pass over out.
func offsetTimes(out []int64, data []byte, w int, c int64, g uint64) {
	if w == 0 || w > 57 {
		unbits(out[1:], data, w)
		for i, q := range out[1:] {
			out[i+1] = out[i] + c + int64(uint64(q)*g)
		}
		return
	}
	mask := ^uint64(0) >> (64 - w)
	t, q := out[0], out[1:]
	i := 0
	// Several fields a load where they lie within the 64 bits from the
	// first one's byte (at most 7 bits in): four up to 14 bits wide, two
	// up to 28.
	u := uint(w)
	if w <= 14 {
		for ; i+3 < len(q); i += 4 {
			bit := i * w
			at := bit >> 3
			if at+8 > len(data) {
				break
			}
			x := binary.LittleEndian.Uint64(data[at:]) >> uint(bit&7)
			t += c + int64((x&mask)*g)
			q[i] = t
			t += c + int64((x>>u&mask)*g)
			q[i+1] = t
			t += c + int64((x>>(2*u)&mask)*g)
			q[i+2] = t
			t += c + int64((x>>(3*u)&mask)*g)
			q[i+3] = t
		}
	}
	if w <= 28 {
		for ; i+1 < len(q); i += 2 {
			bit := i * w
			at := bit >> 3
			if at+8 > len(data) {
				break
			}
			x := binary.LittleEndian.Uint64(data[at:]) >> uint(bit&7)
			t += c + int64((x&mask)*g)
			q[i] = t
			t += c + int64((x>>u&mask)*g)
			q[i+1] = t
		}
	}
	for ; i < len(q); i++ {
		at := i * w >> 3
		if at+8 > len(data) {
			break
		}
		t += c + int64((binary.LittleEndian.Uint64(data[at:])>>uint(i*w&7)&mask)*g)
		q[i] = t
	}
	for ; i < len(q); i++ {
		t += c + int64((bitsAt(data, i*w, w)&mask)*g)
		q[i] = t
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

// strCol decodes a strcol of n values, appending them to dst; its indices
// are decoded into *tmp, kept for the next column.
func (r *reader) strCol(dst []string, n int, tmp *[]int64) []string {
	ndict := r.count(uint64(len(r.b)))
	dict := make([]string, ndict)
	for i := range dict {
		dict[i] = string(r.bytes(r.uvarint()))
	}
	idx := r.intCol((*tmp)[:0], n)
	*tmp = idx
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
	// one has bit c set where int column c was stored as one value for
	// every row (OneValue).
	one uint64
}

// OneValue says whether int column c holds one value in every row, as
// stored (a constant column, or every row at the common value): a reader
// may take its first as its lowest and highest without a look at the
// rest. False does not say the values differ.
func (d *Decoded) OneValue(c int) bool { return c < 64 && d.one>>c&1 != 0 }

// oneValue says whether the intcol at the start of b holds one value: its
// deltas' divisor is 0, and intCol fills the column with its first.
func oneValue(b []byte) bool {
	r := reader{b: b}
	r.varint()
	return r.uvarint() == 0 && r.err == nil
}

// forms reads a series' forms list: ascending columns below ncols, each
// coded against an earlier one or, from version 4, against a value.
func (r *reader) forms(version byte, ncols int, dst []colForm) []colForm {
	n := r.count(uint64(ncols))
	prev := -1
	for range n {
		f := colForm{col: int(r.count(maxCols)), ref: int(r.count(maxCols))}
		if len(r.b) == 0 {
			r.fail()
			return nil
		}
		f.kind, r.b = r.b[0], r.b[1:]
		var ok bool
		switch f.kind {
		case formMinus, formSame:
			ok = f.ref < f.col
		case formCommon:
			ok = version >= 4 && f.ref == 0
		}
		if !ok || f.col >= ncols || f.col <= prev {
			r.fail()
			return nil
		}
		prev = f.col
		dst = append(dst, f)
	}
	return dst
}

// same decodes a formSame column of n values into dst: ref[i] where
// bit i is set, or where ref is nil (formCommon) the value c.
func (r *reader) same(dst []int64, n int, ref []int64, c int64, tmp *[]int64) []int64 {
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
	base := len(dst)
	dst = slices.Grow(dst, n)[:base+n]
	out := dst[base:]
	if ref != nil {
		copy(out, ref)
	} else {
		fill(out, c)
	}
	// Then the rows whose bit is clear, a byte of the mask at a time.
	j := 0
	for k, b := range bitmap {
		for m := ^b; m != 0; m &= m - 1 {
			i := k*8 + bits.TrailingZeros8(m)
			if i >= n {
				break
			}
			out[i] = other[j]
			j++
		}
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
	rowT := r.rowTimes(h, d.T[:0], 1)
	return seriesBlock(&r, h.Version, id, rowT, d)
}

// seriesBlock decodes series id from r, a chunk's body past its row times
// rowT, into d; rowT becomes d.T (the series' times).
func seriesBlock(r *reader, version byte, id uint32, rowT []int64, d *Decoded) (bool, error) {
	d.one = 0
	for w := r.seriesBlocks(); ; {
		sid, br, ok := w.next()
		if !ok {
			break
		}
		if sid != id {
			continue
		}
		found := decodeBlock(&br, version, rowT, d)
		if br.err != nil {
			return false, br.err
		}
		return found, nil
	}
	d.T = rowT[:0]
	return false, r.err
}

// RowTimes is a chunk's row times, decoded once for the several series a
// reader takes from the chunk one at a time (DecodeSeriesAt), where
// DecodeSeriesBody decodes them again for each: the device group's chunk
// holds the device and process series of every GPU.
type RowTimes struct {
	T  []int64  // µs
	At BlocksAt // where the series blocks follow them
}

// BlocksAt is where a chunk body's series blocks begin, past its row
// times, and the chunk's version.
type BlocksAt struct {
	version byte
	offset  int
}

// Decode decodes the row times of chunk body b (as DecodeSeriesBody
// takes it) into rt, reusing rt.T.
func (rt *RowTimes) Decode(b []byte) error {
	r := reader{b: b}
	h := readHeader(&r)
	if r.err == nil {
		rt.T = r.rowTimes(h, rt.T[:0], 1)
	}
	if r.err != nil {
		rt.T = rt.T[:0]
		return r.err
	}
	rt.At = BlocksAt{version: h.Version, offset: len(b) - len(r.b)}
	return nil
}

// DecodeSeriesAt is DecodeSeriesBody of body b without decoding its row
// times: d.T holds them on entry (a copy of RowTimes.T of b, whose At is
// at), and the series' own times on return.
func DecodeSeriesAt(b []byte, at BlocksAt, id uint32, d *Decoded) (bool, error) {
	if at.offset > len(b) {
		return false, ErrCorrupt
	}
	r := reader{b: b[at.offset:]}
	return seriesBlock(&r, at.version, id, d.T, d)
}

// DecodeSeriesSet is DecodeSeriesBody for several series of one chunk:
// ds[i] gets series ids[i], and found[i] says whether the chunk holds it.
// The chunk's row times, from which every series' times are drawn, are
// decoded once (into rows, kept for the next call) where DecodeSeriesBody
// decodes them for each series read. The times, the rows' and the
// series', are multiplied by unit (1 for µs as stored, 1000 for ns).
func DecodeSeriesSet(b []byte, ids []uint32, ds []*Decoded, found []bool, rows *[]int64, unit int64) error {
	r := reader{b: b}
	h := readHeader(&r)
	if r.err != nil {
		return r.err
	}
	rowT := r.rowTimes(h, (*rows)[:0], unit)
	*rows = rowT
	clear(found)
	for i := range ds {
		ds[i].T, ds[i].one = ds[i].T[:0], 0
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
		forms = r.forms(version, nints, d.forms[:0])
		d.forms = forms
	}
	d.one = 0
	for i := range d.Ints {
		if len(forms) > 0 && forms[0].col == i {
			f := forms[0]
			forms = forms[1:]
			switch f.kind {
			case formSame:
				d.Ints[i] = r.same(d.Ints[i][:0], n, d.Ints[f.ref], 0, &d.tmp)
				continue
			case formCommon:
				c := r.varint()
				d.Ints[i] = r.same(d.Ints[i][:0], n, nil, c, &d.tmp)
				if n > 0 && len(d.tmp) == 0 && r.err == nil { // no row apart from the common value
					d.one |= 1 << i
				}
				continue
			}
			ref := d.Ints[f.ref]
			d.Ints[i] = r.intCol(d.Ints[i][:0], n)
			if r.err == nil {
				for k, v := range ref {
					d.Ints[i][k] += v
				}
			}
			continue
		}
		if n > 0 && oneValue(r.b) {
			d.one |= 1 << i
		}
		d.Ints[i] = r.intCol(d.Ints[i][:0], n)
	}
	nstrs := r.count(maxCols)
	d.Strs = resize(d.Strs, nstrs)
	for i := range d.Strs {
		d.Strs[i] = r.strCol(d.Strs[i][:0], n, &d.tmp)
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
