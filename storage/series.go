package storage

import (
	"encoding/binary"
	"slices"

	"github.com/memrec/memrec/storage/internal/chunk"
)

// Groups: the chunks of a run are keyed by group. Marks are group 0, device
// and process series (sampled on the same NVML tick) share group 1, and each
// allocator series is a group of its own (probes report at their own times).
const (
	groupMarks  uint32 = 0
	groupDevice uint32 = 1
	groupTorch0 uint32 = 2
)

// seriesInfo is one row of a run's series table.
type seriesInfo struct {
	ID    uint32     `json:"id"`
	Kind  seriesKind `json:"kind"`
	GPU   int        `json:"gpu"`
	PID   int        `json:"pid,omitempty"`
	Group uint32     `json:"group"`
}

type seriesKey struct {
	kind seriesKind
	gpu  int
	pid  int
}

// chunkKey is group (4 bytes) | first time in µs (8) | sequence (4), all big
// endian, so a cursor Seek on (group, t) is a time-range scan.
func chunkKey(group uint32, t0 int64, seq uint32) []byte {
	k := make([]byte, 16)
	binary.BigEndian.PutUint32(k, group)
	binary.BigEndian.PutUint64(k[4:], uint64(t0)^(1<<63)) // sign flip keeps order for negative times
	binary.BigEndian.PutUint32(k[12:], seq)
	return k
}

func parseChunkKey(k []byte) (group uint32, t0 int64, seq uint32, ok bool) {
	if len(k) != 16 {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint32(k), int64(binary.BigEndian.Uint64(k[4:]) ^ (1 << 63)), binary.BigEndian.Uint32(k[12:]), true
}

// entry is one buffered sample: its time, series and where its values sit
// in the group's arenas.
type entry struct {
	t    int64 // µs
	id   uint32
	off  uint32 // into ints
	soff uint32 // into strs
}

// groupBuf buffers the entries of one group that are not yet in a sealed
// chunk. It is not safe for concurrent use.
type groupBuf struct {
	id      uint32
	entries []entry
	ints    []int64
	strs    []string
	sorted  bool
	lastT   int64
	floor   int64 // µs: entries before this time went into sealed chunks
	sealed  bool  // floor is set
	seq     uint32
	openKey []byte // key the open chunk was last written under
	pending []keyVal
	// strBytes is the length of strs' strings: a chunk's strings are
	// decoded whole by whoever reads one of its rows.
	strBytes int
}

// keyVal is a sealed chunk waiting for a commit, with its summary (nil
// for a group of no summarised series) and what it holds.
type keyVal struct {
	k, v, sum []byte
	counts    Counts
}

func newGroupBuf(id uint32) *groupBuf { return &groupBuf{id: id, sorted: true} }

func (g *groupBuf) add(t int64, id uint32, ints []int64, strs []string) {
	if len(g.entries) > 0 && t < g.lastT {
		g.sorted = false
	}
	g.lastT = t
	g.entries = append(g.entries, entry{t: t, id: id, off: uint32(len(g.ints)), soff: uint32(len(g.strs))})
	g.ints = append(g.ints, ints...)
	g.strs = append(g.strs, strs...)
	for _, s := range strs {
		g.strBytes += len(s)
	}
}

func (g *groupBuf) sort() {
	if g.sorted {
		return
	}
	slices.SortStableFunc(g.entries, func(a, b entry) int {
		switch {
		case a.t < b.t:
			return -1
		case a.t > b.t:
			return 1
		}
		return 0
	})
	g.sorted = true
}

// seal encodes the oldest n entries into a sealed chunk, kept in pending
// until the next flush, and keeps the rest buffered.
func (g *groupBuf) seal(n int, kinds func(uint32) seriesKind) {
	g.sort()
	es := g.entries[:n]
	var c Counts
	for _, e := range es {
		c.add(kinds(e.id), 1)
	}
	v, sum := g.encode(es, kinds, true)
	g.pending = append(g.pending, keyVal{chunkKey(g.id, es[0].t, g.seq), v, sum, c})
	g.seq++
	g.floor, g.sealed = es[n-1].t, true

	rest := g.entries[n:]
	ints := make([]int64, 0, len(g.ints))
	strs := make([]string, 0, len(g.strs))
	entries := make([]entry, 0, cap(g.entries))
	for _, e := range rest {
		ni, ns := kinds(e.id).cols()
		entries = append(entries, entry{t: e.t, id: e.id, off: uint32(len(ints)), soff: uint32(len(strs))})
		ints = append(ints, g.ints[e.off:e.off+uint32(ni)]...)
		strs = append(strs, g.strs[e.soff:e.soff+uint32(ns)]...)
	}
	g.entries, g.ints, g.strs = entries, ints, strs
	g.strBytes = 0
	for _, s := range strs {
		g.strBytes += len(s)
	}
}

// encode turns time-sorted entries into one chunk: a row per distinct time
// (a second row at the same time when a series repeats within it), and
// with summarize its summary (summary.go).
func (g *groupBuf) encode(es []entry, kinds func(uint32) seriesKind, summarize bool) (value, sum []byte) {
	// Count each series' entries first so that no column grows by copying:
	// the open chunk is encoded again at every commit.
	count := map[uint32]int{}
	for _, e := range es {
		count[e.id]++
	}
	rowT := make([]int64, 0, len(es))
	blocks := make([]chunk.Block, 0, len(count))
	index := make(map[uint32]int, len(count))
	lastRow := make([]int, 0, len(count))
	for _, e := range es {
		b, ok := index[e.id]
		if !ok {
			ni, ns := kinds(e.id).cols()
			n := count[e.id]
			bl := chunk.Block{ID: e.id, Rows: make([]int, 0, n), Ints: make([][]int64, ni), Strs: make([][]string, ns)}
			for i := range bl.Ints {
				bl.Ints[i] = make([]int64, 0, n)
			}
			for i := range bl.Strs {
				bl.Strs[i] = make([]string, 0, n)
			}
			b = len(blocks)
			index[e.id] = b
			blocks = append(blocks, bl)
			lastRow = append(lastRow, -1)
		}
		if len(rowT) == 0 || e.t != rowT[len(rowT)-1] || lastRow[b] == len(rowT)-1 {
			rowT = append(rowT, e.t)
		}
		row := len(rowT) - 1
		lastRow[b] = row
		bl := &blocks[b]
		bl.Rows = append(bl.Rows, row)
		for i := range bl.Ints {
			bl.Ints[i] = append(bl.Ints[i], g.ints[int(e.off)+i])
		}
		for i := range bl.Strs {
			bl.Strs[i] = append(bl.Strs[i], g.strs[int(e.soff)+i])
		}
	}
	slices.SortFunc(blocks, func(a, b chunk.Block) int { return int(a.ID) - int(b.ID) })
	value = chunk.Encode(make([]byte, 0, len(es)+64), rowT, blocks) // about a byte a sample
	if !summarize {
		return value, nil
	}
	sum = []byte{summaryVersion}
	var t []int64
	for _, b := range blocks {
		n := summaryCols(summaryVersion, kinds(b.ID), len(b.Ints))
		if n == 0 {
			continue
		}
		t = t[:0]
		for _, r := range b.Rows {
			t = append(t, rowT[r])
		}
		sum = appendSummary(sum, b.ID, t, b.Ints[:n])
	}
	return value, sealSummary(sum)
}
