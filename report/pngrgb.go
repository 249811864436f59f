package report

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
	"sync"
)

// rgbPNG writes an opaque RGBA image as image/png's Encoder at BestSpeed
// writes it, byte for byte, where that encoder spends much of its time
// choosing each row's filter (BenchmarkEncodeChart). The choice (libpng's:
// the filter whose bytes have the least sum of absolute values, tried in
// the order Up, Paeth, None, Sub, Average, the first of equal sums kept)
// is the same, made without trying the filters on a row equal to the row
// above, common in a chart (background, margins, the inside of a band):
// there Up gives zeros, which no other filter beats; and where a row is
// mostly the row above, 8 bytes at a time. ok is false, and nothing is
// written, for an image with a pixel not opaque or not at the origin:
// image/png writes those.
//
// The file (PNG, RFC 2083): the 8-byte signature, then chunks of a
// 4-byte big-endian length, a 4-byte type, the data and the CRC-32
// (IEEE) of type and data: IHDR (width, height, bit depth 8, colour
// type 2 (RGB), compression, filter and interlace 0), IDAT chunks of at
// most 32 KiB holding a zlib stream of the rows (each a filter byte and
// the row's R, G, B bytes filtered), IEND.
func rgbPNG(img *image.RGBA) (out []byte, ok bool) {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	if b.Min != (image.Point{}) || w <= 0 || h <= 0 {
		return nil, false
	}
	e, _ := rgbEncoders.Get().(*rgbEncoder)
	if e == nil {
		e = &rgbEncoder{}
		e.idat = bufio.NewWriterSize(idatWriter{e}, 1<<15)
		e.z, _ = zlib.NewWriterLevel(e.idat, zlib.BestSpeed)
	}
	defer rgbEncoders.Put(e)
	e.out = bytes.Buffer{}
	e.out.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 2
	e.chunk("IHDR", ihdr[:])
	e.idat.Reset(idatWriter{e})
	e.z.Reset(e.idat)
	if !e.rows(img) {
		return nil, false
	}
	if err := e.z.Close(); err != nil {
		return nil, false
	}
	if err := e.idat.Flush(); err != nil {
		return nil, false
	}
	e.chunk("IEND", nil)
	return e.out.Bytes(), true
}

// rgbEncoders keep the compressor and row buffers of the charts encoded
// at once, each reset for the next chart.
var rgbEncoders sync.Pool

type rgbEncoder struct {
	out  bytes.Buffer
	idat *bufio.Writer // IDAT chunks of what it is given, 32 KiB at most
	z    *zlib.Writer
	// cr[0] is a row's bytes, cr[f] the row filtered by filter f, each
	// led by its filter byte; pr is the row above's bytes (zeros above
	// the first).
	cr [5][]byte
	pr []byte
	// same is the row that repeats the row above: Up, and zeros.
	same []byte
}

// idatWriter writes what it is given as an IDAT chunk.
type idatWriter struct{ e *rgbEncoder }

func (w idatWriter) Write(p []byte) (int, error) {
	w.e.chunk("IDAT", p)
	return len(p), nil
}

// chunk appends a chunk of type typ holding data.
func (e *rgbEncoder) chunk(typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	e.out.Write(n[:])
	at := e.out.Len()
	e.out.WriteString(typ)
	e.out.Write(data)
	binary.BigEndian.PutUint32(n[:], crc32.ChecksumIEEE(e.out.Bytes()[at:]))
	e.out.Write(n[:])
}

// PNG's filter types.
const (
	ftNone = iota
	ftSub
	ftUp
	ftAverage
	ftPaeth
)

// rows filters and compresses img's rows; false where a pixel is not
// opaque.
func (e *rgbEncoder) rows(img *image.RGBA) bool {
	w, h := img.Bounds().Dx(), img.Bounds().Dy()
	sz := 1 + 3*w
	for i := range e.cr {
		if cap(e.cr[i]) < sz {
			e.cr[i] = make([]byte, sz)
		}
		e.cr[i] = e.cr[i][:sz]
		e.cr[i][0] = byte(i)
	}
	if cap(e.pr) < sz {
		e.pr = make([]byte, sz)
	}
	e.pr = e.pr[:sz]
	clear(e.pr)
	if cap(e.same) < sz {
		e.same = make([]byte, sz)
	}
	e.same = e.same[:sz]
	clear(e.same)
	e.same[0] = ftUp
	cr, pr := e.cr, e.pr
	var above []byte
	for y := range h {
		pix := img.Pix[y*img.Stride : y*img.Stride+4*w]
		if above != nil && bytes.Equal(pix, above) {
			// The row above again: Up gives zeros, and pr holds its bytes.
			e.z.Write(e.same) // its errors are the IDAT writer's: none
			continue
		}
		row := cr[0][1:]
		for x := range w {
			p := pix[4*x : 4*x+4 : 4*x+4]
			if p[3] != 0xff {
				return false
			}
			o := row[3*x : 3*x+3 : 3*x+3]
			o[0], o[1], o[2] = p[0], p[1], p[2]
		}
		f := filter(&cr, pr)
		e.z.Write(cr[f])
		pr, cr[0] = cr[0], pr
		above = pix
	}
	e.cr, e.pr = cr, pr
	return true
}

// filter applies the filters to cr[0] and returns the one chosen: the
// least sum of absolute values, the first of equal sums in the order
// Up, Paeth, None, Sub, Average, as image/png chooses. A filter is
// abandoned once its sum reaches the best so far.
func filter(cr *[5][]byte, pr []byte) int {
	const bpp = 3
	cur, up, paeth, sub, avg := cr[0][1:], cr[ftUp][1:], cr[ftPaeth][1:], cr[ftSub][1:], cr[ftAverage][1:]
	prev := pr[1:]
	n := len(cur)

	// Most of a row is the row above: 8 bytes at a time where they are.
	sum := 0
	for i := 0; i < n; i++ {
		if i+8 <= n && binary.LittleEndian.Uint64(cur[i:]) == binary.LittleEndian.Uint64(prev[i:]) {
			binary.LittleEndian.PutUint64(up[i:], 0)
			i += 7
			continue
		}
		up[i] = cur[i] - prev[i]
		sum += abs8(up[i])
	}
	best, f := sum, ftUp

	sum = 0
	for i := 0; i < bpp; i++ {
		paeth[i] = cur[i] - prev[i]
		sum += abs8(paeth[i])
	}
	for i := bpp; i < n; i++ {
		// Where the byte to the left equals the one above it, the
		// predictor is the byte above: Paeth is Up, and 0 where that
		// byte is the one above too, 8 at a time. The sum does not grow
		// there, so it passes best no sooner than byte by byte.
		if i+8 <= n && binary.LittleEndian.Uint64(up[i-bpp:]) == 0 && binary.LittleEndian.Uint64(up[i:]) == 0 {
			binary.LittleEndian.PutUint64(paeth[i:], 0)
			i += 7
			continue
		}
		if up[i-bpp] == 0 {
			paeth[i] = up[i]
		} else {
			paeth[i] = cur[i] - paethPredictor(cur[i-bpp], prev[i], prev[i-bpp])
		}
		sum += abs8(paeth[i])
		if sum >= best {
			break
		}
	}
	if sum < best {
		best, f = sum, ftPaeth
	}

	sum = 0
	for i := range n {
		sum += abs8(cur[i])
		if sum >= best {
			break
		}
	}
	if sum < best {
		best, f = sum, ftNone
	}

	sum = 0
	for i := 0; i < bpp; i++ {
		sub[i] = cur[i]
		sum += abs8(sub[i])
	}
	for i := bpp; i < n; i++ {
		// 0 where a pixel repeats the one to its left, 8 bytes at a time.
		if i+8 <= n && binary.LittleEndian.Uint64(cur[i:]) == binary.LittleEndian.Uint64(cur[i-bpp:]) {
			binary.LittleEndian.PutUint64(sub[i:], 0)
			i += 7
			continue
		}
		sub[i] = cur[i] - cur[i-bpp]
		sum += abs8(sub[i])
		if sum >= best {
			break
		}
	}
	if sum < best {
		best, f = sum, ftSub
	}

	sum = 0
	for i := 0; i < bpp; i++ {
		avg[i] = cur[i] - prev[i]/2
		sum += abs8(avg[i])
	}
	for i := bpp; i < n; i++ {
		// 0 where a pixel repeats the one to its left and the one above.
		if i+8 <= n && binary.LittleEndian.Uint64(up[i:]) == 0 && binary.LittleEndian.Uint64(cur[i:]) == binary.LittleEndian.Uint64(cur[i-bpp:]) {
			binary.LittleEndian.PutUint64(avg[i:], 0)
			i += 7
			continue
		}
		avg[i] = cur[i] - uint8((int(cur[i-bpp])+int(prev[i]))/2)
		sum += abs8(avg[i])
		if sum >= best {
			break
		}
	}
	if sum < best {
		f = ftAverage
	}
	return f
}

// abs8 is |d| for d read as a signed byte.
func abs8(d uint8) int {
	if d < 128 {
		return int(d)
	}
	return 256 - int(d)
}

// paethPredictor is PNG's Paeth predictor of a byte from the one to its
// left (a), above (b) and above left (c).
func paethPredictor(a, b, c uint8) uint8 {
	pc := int(c)
	pa := int(b) - pc
	pb := int(a) - pc
	pc = abs(pa + pb)
	pa = abs(pa)
	pb = abs(pb)
	if pa <= pb && pa <= pc {
		return a
	} else if pb <= pc {
		return b
	}
	return c
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}
