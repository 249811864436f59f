package storage

import (
	"encoding/binary"
	"sync"

	"github.com/memrec/memrec/storage/internal/chunk"
)

// rowTimesCache keeps the row times of the chunk whose series an iterator
// decoded last, for the iterators of the chunk's other series: an export
// walks the device and process series of every GPU side by side, each
// with its own iterator, and they load the same chunk one after another.
// A chunk is known as checkedChunks knows it (run, key, length and stored
// checksum); one without a checksum is decoded as it is. Safe for
// concurrent use: the times are copied out under the lock, the series
// decoded outside it.
type rowTimesCache struct {
	mu   sync.Mutex
	id   chunkID
	ok   bool
	rows chunk.RowTimes
}

// decode is chunk.DecodeSeriesBody(body, id, d) of the chunk v stored
// under key k of run (body is v checked, Body), the row times taken from
// the cache where the chunk is the one it holds.
func (c *rowTimesCache) decode(run uint64, k, v, body []byte, id uint32, d *chunk.Decoded) (bool, error) {
	if len(k) != 16 || len(v) < 1+chunk.CRCSize || v[0] < 3 {
		return chunk.DecodeSeriesBody(body, id, d)
	}
	cid := chunkID{run: run, n: len(v), crc: binary.LittleEndian.Uint32(v[len(v)-chunk.CRCSize:])}
	copy(cid.key[:], k)
	c.mu.Lock()
	if !c.ok || c.id != cid {
		if err := c.rows.Decode(body); err != nil {
			c.ok = false
			c.mu.Unlock()
			return false, err
		}
		c.id, c.ok = cid, true
	}
	d.T = append(d.T[:0], c.rows.T...)
	at := c.rows.At
	c.mu.Unlock()
	return chunk.DecodeSeriesAt(body, at, id, d)
}
