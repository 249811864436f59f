package chunk

import (
	"encoding/binary"
	"math"
	"math/bits"
)

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

// appendIntCols appends the forms list and the int columns of one series,
// each in the smallest of its plain form, its forms against every
// earlier column and its form against its most common value. Columns that
// already cost under a bit a value are left plain without trying.
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
			equal := 0
			for i, v := range vals {
				scratch = append(scratch, v-ref[i])
				if v == ref[i] {
					equal++
				}
			}
			if b := appendIntCol(nil, scratch); len(b) < len(best) {
				best, form.ref, form.kind = b, r, formMinus
			}
			if equal == 0 {
				continue // same would be the plain form and a mask
			}
			if b := appendSame(nil, vals, ref, 0, scratch); len(b) < len(best) {
				best, form.ref, form.kind = b, r, formSame
			}
		}
		if v, ok := common(vals); ok {
			b := binary.AppendVarint(nil, v)
			if b = appendSame(b, vals, nil, v, scratch); len(b) < len(best) {
				best, form.ref, form.kind = b, 0, formCommon
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

// appendSame appends the formSame coding of vals against ref (or, where
// ref is nil, against the value c): a bitmap of len(vals) bits, low bit
// first, set where the values are equal, then the intcol of the values
// where they are not. scratch is reused.
func appendSame(dst []byte, vals, ref []int64, c int64, scratch []int64) []byte {
	mark := len(dst)
	dst = append(dst, make([]byte, (len(vals)+7)/8)...)
	scratch = scratch[:0]
	for i, v := range vals {
		if ref != nil {
			c = ref[i]
		}
		if v == c {
			dst[mark+i/8] |= 1 << (i % 8)
		} else {
			scratch = append(scratch, v)
		}
	}
	return appendIntCol(dst, scratch)
}

// common returns the value vals hold most often, where that is an
// eighth of them or more: a series that keeps coming back to one value
// (the allocator's memory at every step's end) then pays a bit each time
// instead of the column's width. Ties go to the smallest.
//
// It finds it without a map: Misra and Gries' frequent items keep k
// candidates, so that every value held by more than n/(k+1) of the n
// values is among them after one pass; a second pass counts them.
func common(vals []int64) (c int64, ok bool) {
	const k = 8 // n/(k+1) is below the eighth asked for
	var cand [k]int64
	var left [k]int // 0: the slot is free
	for _, v := range vals {
		free := -1
		for i := range k {
			if left[i] > 0 && cand[i] == v {
				left[i]++
				free = k // counted
				break
			}
			if left[i] == 0 && free < 0 {
				free = i
			}
		}
		switch {
		case free == k:
		case free >= 0:
			cand[free], left[free] = v, 1
		default:
			for i := range left {
				left[i]--
			}
		}
	}
	var count [k]int
	for _, v := range vals {
		for i := range k {
			if left[i] > 0 && cand[i] == v {
				count[i]++
				break
			}
		}
	}
	best := 0
	for i := range k {
		if left[i] > 0 && (count[i] > best || count[i] == best && cand[i] < c) {
			c, best = cand[i], count[i]
		}
	}
	return c, best > 1 && best >= len(vals)/8
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
