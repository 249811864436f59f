package report

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
)

// The page's points are packed, not written as JSON numbers: a day of many
// lines is millions of points, and a point's two differences take a few
// bytes here where decimal digits and commas take several times that.
//
//	points  := base64(point*)            standard alphabet, padded
//	point   := dt dv
//	dt      := varint                    µs since the previous point (the first: since the run's start)
//	dv      := varint                    KiB added since the previous point (the first: since zero)
//	varint  := zigzag, then 7 bits a byte, low first, high bit set on all but the last
//
// (binary.AppendVarint's form). timeline.js's unpack reads it.

// packPoints packs a level's differences (dt[i], dv[i]) as above.
func packPoints(dt, dv []int64) string {
	b := make([]byte, 0, 6*len(dt))
	for i := range dt {
		b = binary.AppendVarint(b, dt[i])
		b = binary.AppendVarint(b, dv[i])
	}
	return base64.StdEncoding.EncodeToString(b)
}

// packedSize is what packPoints' string takes in the page.
func packedSize(dt, dv []int64) int {
	n := 0
	var tmp [binary.MaxVarintLen64]byte
	for i := range dt {
		n += binary.PutVarint(tmp[:], dt[i]) + binary.PutVarint(tmp[:], dv[i])
	}
	return base64.StdEncoding.EncodedLen(n)
}

var errPacked = errors.New("packed points: a varint is cut short or too long")

// unpackPoints reads what packPoints wrote.
func unpackPoints(s string) (dt, dv []int64, err error) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, nil, err
	}
	for len(b) > 0 {
		var v [2]int64
		for j := range v {
			x, n := binary.Varint(b)
			if n <= 0 {
				return nil, nil, errPacked
			}
			v[j], b = x, b[n:]
		}
		dt, dv = append(dt, v[0]), append(dv, v[1])
	}
	return dt, dv, nil
}
