package chunk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
)

const Version = 4

// CRCSize is the length of the trailing checksum of a chunk of version 3
// and later.
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

// Column forms (chunk version 2): how a series' int column is coded
// against an earlier column of the same series, its reference, or
// (version 4) against one value.
const (
	formMinus  byte = 1 // the intcol holds v[i] - ref[i]
	formSame   byte = 2 // a bitmap of the rows where v[i] == ref[i], then the others
	formCommon byte = 3 // a value, a bitmap of the rows that hold it, then the others
)

// colForm says column col is coded in form kind against column ref (0
// and unused for formCommon).
type colForm struct {
	col, ref int
	kind     byte
}

// Header is what a reader learns from a chunk's first bytes.
type Header struct {
	Version byte
	NRows   int
	T0, T1  int64 // first and last row time, µs
}
