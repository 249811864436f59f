// Package pickletest writes small pickles (protocol 4) for tests: the
// snapshots PyTorch would write, and hostile ones built opcode by opcode.
package pickletest

import (
	"bytes"
	"encoding/binary"
	"fmt"
)

// Dict is a Python dict with its keys in order.
type Dict []KV

// KV is one key and value of a Dict.
type KV struct {
	K string
	V any
}

// Dumps pickles v: nil, bool, int (any size up to int64), string, []any
// (a list), Dict. Nothing is memoised.
func Dumps(v any) []byte {
	var b bytes.Buffer
	b.Write([]byte{0x80, 4})
	write(&b, v)
	b.WriteByte('.')
	return b.Bytes()
}

func write(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteByte('N')
	case bool:
		if x {
			b.WriteByte(0x88)
		} else {
			b.WriteByte(0x89)
		}
	case int:
		Int(b, int64(x))
	case int64:
		Int(b, x)
	case string:
		Str(b, x)
	case []any:
		b.WriteByte(']')
		if len(x) > 0 {
			b.WriteByte('(')
			for _, it := range x {
				write(b, it)
			}
			b.WriteByte('e')
		}
	case Dict:
		b.WriteByte('}')
		if len(x) > 0 {
			b.WriteByte('(')
			for _, kv := range x {
				Str(b, kv.K)
				write(b, kv.V)
			}
			b.WriteByte('u')
		}
	default:
		panic(fmt.Sprintf("pickletest: cannot pickle %T", v))
	}
}

// Int writes an integer as LONG1 (8 bytes, two's complement).
func Int(b *bytes.Buffer, v int64) {
	b.Write([]byte{0x8a, 8})
	binary.Write(b, binary.LittleEndian, v)
}

// Str writes a string as BINUNICODE8.
func Str(b *bytes.Buffer, s string) {
	b.WriteByte(0x8d)
	binary.Write(b, binary.LittleEndian, uint64(len(s)))
	b.WriteString(s)
}

// Frame is one frame dict of a stack.
func Frame(file string, line int, fn string) Dict {
	return Dict{{"filename", file}, {"line", line}, {"name", fn}}
}

// Block is one block dict.
func Block(addr, size int64, state string, frames ...any) Dict {
	return Dict{{"address", addr}, {"size", size}, {"state", state}, {"frames", frames}}
}

// Entry is one trace entry dict.
func Entry(action string, addr, size, timeUS int64, frames ...any) Dict {
	return Dict{{"action", action}, {"addr", addr}, {"size", size}, {"time_us", timeUS}, {"frames", frames}}
}

// Snapshot is a snapshot dict of one segment of blocks on device 0 and
// device 0's trace.
func Snapshot(blocks []any, trace []any) Dict {
	return Dict{
		{"segments", []any{Dict{{"device", 0}, {"blocks", blocks}}}},
		{"device_traces", []any{trace}},
	}
}
