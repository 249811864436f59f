package tensorboard

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/bits"

	"google.golang.org/protobuf/encoding/protowire"
)

// This file is the tests' reader of event files. It checks the framing
// against its own CRC-32C (hash/crc32's Castagnoli table, masked by hand
// here, not by the writer's function) and decodes the events field by field.

type scalar struct {
	Tag  string
	Step int64
	Wall float64
	V    float32
}

type eventFile struct {
	Version  string
	Wall0    float64
	Scalars  []scalar
	ByTag    map[string][]scalar
	Records  int
	BadCRC   int
	Leftover int
}

func testMask(b []byte) uint32 {
	c := crc32.Checksum(b, crc32.MakeTable(0x82f63b78)) // Castagnoli, reversed form
	return bits.RotateLeft32(c, -15) + 0xa282ead8
}

// readRecords splits a TFRecord file into its records' data, checking both
// CRCs of each.
func readRecords(b []byte) ([][]byte, error) {
	var out [][]byte
	for off := 0; off < len(b); {
		if len(b)-off < 12 {
			return out, fmt.Errorf("offset %d: %d bytes left, a header needs 12", off, len(b)-off)
		}
		n := binary.LittleEndian.Uint64(b[off:])
		if got, want := binary.LittleEndian.Uint32(b[off+8:]), testMask(b[off:off+8]); got != want {
			return out, fmt.Errorf("offset %d: length CRC %#x, want %#x", off, got, want)
		}
		if uint64(len(b)-off-12) < n+4 {
			return out, fmt.Errorf("offset %d: record of %d bytes runs past the end", off, n)
		}
		data := b[off+12 : off+12+int(n)]
		if got, want := binary.LittleEndian.Uint32(b[off+12+int(n):]), testMask(data); got != want {
			return out, fmt.Errorf("offset %d: data CRC %#x, want %#x", off, got, want)
		}
		out = append(out, data)
		off += 12 + int(n) + 4
	}
	return out, nil
}

// fieldsOf decodes a message into its fields; repeated fields keep order.
func fieldsOf(b []byte) (map[protowire.Number][]any, error) {
	out := map[protowire.Number][]any{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		var v any
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			v, n = protowire.ConsumeFixed32(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			return nil, fmt.Errorf("field %d: unexpected wire type %d", num, typ)
		}
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		b = b[n:]
		out[num] = append(out[num], v)
	}
	return out, nil
}

func readEventFile(b []byte) (*eventFile, error) {
	recs, err := readRecords(b)
	if err != nil {
		return nil, err
	}
	ef := &eventFile{ByTag: map[string][]scalar{}, Records: len(recs)}
	for i, r := range recs {
		ev, err := fieldsOf(r)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		if len(ev[1]) != 1 {
			return nil, fmt.Errorf("record %d: %d wall_time fields", i, len(ev[1]))
		}
		wall := math.Float64frombits(ev[1][0].(uint64))
		if i == 0 {
			if len(ev[3]) != 1 {
				return nil, errors.New("the first event has no file_version")
			}
			ef.Version, ef.Wall0 = string(ev[3][0].([]byte)), wall
			continue
		}
		var step int64
		if len(ev[2]) == 1 {
			step = int64(ev[2][0].(uint64))
		}
		if len(ev[5]) != 1 {
			return nil, fmt.Errorf("record %d: no summary", i)
		}
		sum, err := fieldsOf(ev[5][0].([]byte))
		if err != nil {
			return nil, fmt.Errorf("record %d summary: %w", i, err)
		}
		for _, vb := range sum[1] {
			val, err := fieldsOf(vb.([]byte))
			if err != nil {
				return nil, fmt.Errorf("record %d value: %w", i, err)
			}
			if len(val[1]) != 1 || len(val[2]) != 1 {
				return nil, fmt.Errorf("record %d: value without tag or simple_value", i)
			}
			s := scalar{Tag: string(val[1][0].([]byte)), Step: step, Wall: wall, V: math.Float32frombits(val[2][0].(uint32))}
			ef.Scalars = append(ef.Scalars, s)
			ef.ByTag[s.Tag] = append(ef.ByTag[s.Tag], s)
		}
	}
	return ef, nil
}
