package storage

import (
	"fmt"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/storage/internal/chunk"
)

// GroupBlocks reads a GPU's device series and its processes' series as
// columns over a time range, a chunk at a time. They share the device
// group's chunks, and each chunk's row times, from which every series'
// times are drawn, are decoded once for all of them: read as a Blocks
// each, the row times of a chunk of 8 GPUs' devices and processes are
// decoded 16 times. Use it as
//
//	for g.Next() {
//		if ts := g.T(0); len(ts) > 0 { used := g.Ints(0, DeviceUsed) ... } // the device
//		for i := 1; i <= len(pids); i++ { ts := g.T(i) ... }              // process pids[i-1]
//	}
//	if err := g.Err(); err != nil { ... }
//
// A series may have no samples in a chunk (T empty). The slices are valid
// until the next call of Next.
type GroupBlocks struct {
	db       *DB
	run      uint64
	from, to int64 // µs, to exclusive
	fromNS   int64 // and as asked, ns: a time t in µs is in range when t·1000 is in [fromNS, toNS)
	toNS     int64
	series   []groupSeries
	group    uint32
	known    bool // the run has one of the series
	ids      []uint32
	ds       []*chunk.Decoded
	found    []bool
	rows     []int64 // the chunk's row times, ns
	lastKey  []byte
	started  bool
	done     bool
	err      error
	// ahead are the chunks read in the last transaction and not yet
	// decoded, as offsets of their keys and values in buf: the
	// transaction, the run's buckets and the cursor's seek are paid once
	// for several chunks, not once a chunk (see bench/README.md, "analyze
	// on long runs: one look a sample, columns kept from GPU to GPU").
	ahead []aheadChunk
	buf   []byte
}

// aheadChunk is a chunk copied into GroupBlocks.buf: its key at [at,
// at+k), its value after it, v bytes long.
type aheadChunk struct{ at, k, v int }

// readAhead bounds the chunks, and their bytes, that one transaction of a
// walk copies out.
const (
	readAheadChunks = 16
	readAheadBytes  = 1 << 20
)

type groupSeries struct {
	key    seriesKey
	schema *schema
	lo, hi int     // its samples in range in the decoded chunk
	t      []int64 // their times, ns (its own, or part of rows)
}

// DeviceGroupBlocks reads the device samples of one GPU of a run (series
// 0: columns DeviceUsed and DeviceReserved) and the samples of its
// processes pids (series 1 to len(pids): column ProcUsed) in [from, to).
func (db *DB) DeviceGroupBlocks(r Run, gpu int, pids []int, from, to int64) *GroupBlocks {
	if w := r.window; w != nil {
		from, to = max(from, w.from), min(to, w.to)
	}
	g := &GroupBlocks{db: db, run: r.ID, from: ceilMicro(from), to: ceilMicro(to), fromNS: from, toNS: to}
	g.add(seriesKey{kind: kindDevice, gpu: gpu}, &deviceSchema.schema)
	for _, pid := range pids {
		g.add(seriesKey{kind: kindProc, gpu: gpu, pid: pid}, &procSchema.schema)
	}
	g.err = db.bolt.View(func(tx *bolt.Tx) error {
		table, err := seriesTable(tx, r.ID)
		for i, s := range g.series {
			for _, t := range table {
				if t.Kind != s.key.kind || t.GPU != s.key.gpu || t.PID != s.key.pid {
					continue
				}
				if g.known && t.Group != g.group {
					return fmt.Errorf("run %d: %w: series %d is in group %d, not %d with the GPU's others", r.ID, ErrCorrupt, t.ID, t.Group, g.group)
				}
				g.ids[i], g.group, g.known = t.ID, t.Group, true
			}
		}
		return err
	})
	g.done = g.err != nil || !g.known
	return g
}

func (g *GroupBlocks) add(k seriesKey, sc *schema) {
	g.series = append(g.series, groupSeries{key: k, schema: sc})
	g.ids = append(g.ids, noSeries)
	g.ds = append(g.ds, decodedPool.Get().(*chunk.Decoded))
	g.found = append(g.found, false)
}

// noSeries stands for a series the run does not have: no chunk holds it.
const noSeries = ^uint32(0)

// Next moves to the next chunk with samples of one of the series in
// range; false at the end or on an error.
func (g *GroupBlocks) Next() bool {
	for !g.done {
		g.load()
		for i := range g.series {
			if g.series[i].hi > g.series[i].lo {
				return true
			}
		}
	}
	g.release()
	return false
}

// T is series i's times in the chunk, Unix ns, ascending.
func (g *GroupBlocks) T(i int) []int64 { return g.series[i].t }

// Ints is column c of series i in the chunk.
func (g *GroupBlocks) Ints(i, c int) []int64 {
	s := &g.series[i]
	return g.ds[i].Ints[c][s.lo:s.hi]
}

// OneValue says whether column c of series i holds one value in the chunk
// (chunk.Decoded.OneValue): Ints(i, c)[0] is then its lowest and highest.
func (g *GroupBlocks) OneValue(i, c int) bool { return g.ds[i].OneValue(c) }

// Err returns the error that stopped the walk, if any.
func (g *GroupBlocks) Err() error { return g.err }

// load decodes the next chunk of the group and sets each series' samples
// in range; at the group's end, or past the range, it sets done.
func (g *GroupBlocks) load() {
	for i := range g.series {
		s := &g.series[i]
		s.lo, s.hi, s.t = 0, 0, nil
	}
	if len(g.ahead) == 0 {
		if g.readAhead(); len(g.ahead) == 0 {
			g.done = true
			return
		}
	}
	c := g.ahead[0]
	g.ahead = g.ahead[1:]
	k, v := g.buf[c.at:c.at+c.k], g.buf[c.at+c.k:c.at+c.k+c.v]
	body, err := g.db.checked.body(g.run, k, v)
	if err == nil {
		// The times come in ns, as T gives them, from the decode itself.
		err = chunk.DecodeSeriesSet(body, g.ids, g.ds, g.found, &g.rows, 1000)
	}
	for i := range g.series {
		if err == nil && g.found[i] {
			err = g.series[i].schema.checkCols(g.ds[i])
		}
	}
	if err != nil {
		g.err, g.done = fmt.Errorf("run %d chunk %x: %w", g.run, k, err), true
		return
	}
	from, to := g.fromNS, g.toNS
	if n := len(g.rows); n > 0 && g.rows[n-1] >= to {
		g.done = true // no later chunk starts before the range's end
	}
	// A series present in every row has the chunk's row times, one
	// array for all such series.
	for i := range g.series {
		s, ts := &g.series[i], g.ds[i].T
		s.lo = sort.Search(len(ts), func(i int) bool { return ts[i] >= from })
		s.hi = sort.Search(len(ts), func(i int) bool { return ts[i] >= to })
		if len(ts) < len(g.rows) {
			s.t = ts[s.lo:s.hi]
			continue
		}
		s.t = g.rows[s.lo:s.hi]
	}
}

// readAhead copies the group's next chunks that may hold samples in range
// into ahead, in one read transaction; none at the group's end or past
// the range.
func (g *GroupBlocks) readAhead() {
	g.buf = g.buf[:0]
	err := g.db.bolt.View(func(tx *bolt.Tx) error {
		data, chunks, err := runChunks(tx, g.run)
		if err != nil || data == nil {
			return err
		}
		c := chunks.Cursor()
		for k, v := resumeChunks(c, g.group, g.from, &g.started, g.lastKey); len(g.ahead) < readAheadChunks && len(g.buf) < readAheadBytes; k, v = c.Next() {
			group, t0, _, ok := parseChunkKey(k)
			if k == nil || !ok || group != g.group || t0 >= g.to {
				return nil
			}
			g.lastKey = append(g.lastKey[:0], k...)
			g.ahead = append(g.ahead, aheadChunk{at: len(g.buf), k: len(k), v: len(v)})
			g.buf = append(append(g.buf, k...), v...)
		}
		return nil
	})
	if err != nil {
		g.err = err
	}
}

// release returns the decode buffers to the pool once the walk is over.
func (g *GroupBlocks) release() {
	for i, d := range g.ds {
		if d != nil {
			decodedPool.Put(d)
			g.ds[i] = nil
		}
	}
}
