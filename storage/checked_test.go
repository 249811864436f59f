package storage

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"
)

// withCRC is a chunk of version 3 with its checksum.
func withCRC(body ...byte) []byte {
	b := append([]byte{3}, body...)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli)))
}

// TestCheckedChunks: a chunk's checksum is verified the first time a
// handle reads it and remembered; a corrupt chunk is refused every time,
// and one rewritten under the same key (the open tail of a live run) is
// checked again.
func TestCheckedChunks(t *testing.T) {
	var c checkedChunks
	k := chunkKey(1, 100, 0)
	v := withCRC(1, 2, 3)
	for range 2 {
		b, err := c.body(7, k, v)
		if err != nil || string(b) != string(v[:len(v)-4]) {
			t.Fatalf("body %v, %v", b, err)
		}
	}
	if len(c.seen) != 1 {
		t.Fatalf("%d chunks remembered, want 1", len(c.seen))
	}
	bad := withCRC(1, 2, 3, 4)
	bad[2] ^= 0xff
	for range 2 {
		if _, err := c.body(7, k, bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("corrupt chunk: %v, want ErrCorrupt", err)
		}
	}
	// Rewritten: another length, then the same length with other bytes.
	for _, w := range [][]byte{withCRC(1, 2, 3, 4, 5), withCRC(9, 9, 9)} {
		if b, err := c.body(7, k, w); err != nil || string(b) != string(w[:len(w)-4]) {
			t.Fatalf("rewritten chunk: %v, %v", b, err)
		}
	}
	// The same bytes in another run are another chunk.
	if _, err := c.body(8, k, v); err != nil || len(c.seen) != 4 {
		t.Fatalf("another run: %v, %d remembered", err, len(c.seen))
	}
}
