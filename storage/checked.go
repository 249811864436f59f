package storage

import (
	"encoding/binary"
	"sync"

	"github.com/memrec/memrec/storage/internal/chunk"
)

// checkedChunks remembers the chunks whose checksum a handle has verified,
// so that a chunk holding the series of eight GPUs is checked once, not
// once for each series read from it: a long analysis of 8 GPUs reads its
// allocator chunks once a GPU, and the checksum was then a large share of
// its CPU (see bench/README.md, "Figures behind the code's constants"). A
// chunk is known by its run, its key, its length and the
// checksum it stores: one rewritten since (the open tail of a live run)
// differs in length or checksum and is checked again. runs --check and
// compact check every chunk themselves.
type checkedChunks struct {
	mu   sync.Mutex
	seen map[chunkID]struct{}
}

type chunkID struct {
	run uint64
	key [16]byte
	n   int
	crc uint32
}

// body returns the chunk v (stored under key k of run) without its
// checksum, checking the checksum the first time this handle reads it.
func (c *checkedChunks) body(run uint64, k, v []byte) ([]byte, error) {
	if len(k) != 16 || len(v) < 1+chunk.CRCSize || v[0] < 3 {
		return chunk.Body(v) // no checksum, or too short for one: Body says so
	}
	id := chunkID{run: run, n: len(v), crc: binary.LittleEndian.Uint32(v[len(v)-chunk.CRCSize:])}
	copy(id.key[:], k)
	c.mu.Lock()
	_, ok := c.seen[id]
	c.mu.Unlock()
	if ok {
		return v[:len(v)-chunk.CRCSize], nil
	}
	b, err := chunk.Body(v)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.seen == nil {
		c.seen = map[chunkID]struct{}{}
	}
	c.seen[id] = struct{}{}
	c.mu.Unlock()
	return b, nil
}
