package storage

import "slices"

// Blocks read a series chunk by chunk as columns, for the passes that
// look at every sample: a loop over a column does in a nanosecond what a
// sample converted to a struct and handed over one by one does in ten.

// Blocks walks one series over a time range a chunk at a time. Use it as
//
//	for b.Next() { ts, used := b.T(), b.Ints(DeviceUsed) ... }
//	if err := b.Err(); err != nil { ... }
//
// The slices are valid until the next call of Next.
type Blocks struct {
	it *Iter[struct{}]
	t  []int64 // the block's times, ns
}

// The columns of the series that Blocks reads.
const (
	DeviceUsed     = 0 // device used, bytes
	DeviceReserved = 1 // driver reserved, bytes
	ProcUsed       = 0 // the process's used, bytes
	TorchAllocated = 1 // the allocator's allocated, bytes
	TorchReserved  = 2 // the allocator's reserved, bytes
	// The allocator's other figures, for a pass that reads every sample
	// as columns; TorchRow gives a whole sample where one is kept.
	TorchActiveOver     = 3 // active minus allocated, bytes
	TorchInactiveSplit  = 4 // inactive split, bytes
	TorchPeakAllocated  = 5 // peak allocated since the previous report, bytes
	TorchSegments       = 6
	TorchAllocRetries   = 7
	TorchOOMs           = 8
	TorchLargestSegment = 9 // absent from files written before it (Has)
)

func newBlocks(db *DB, r Run, sc *schema, k seriesKey, from, to int64) *Blocks {
	rs := &rowSchema[struct{}]{schema: *sc}
	return &Blocks{it: newIter(db, r, rs, k, from, to)}
}

// DeviceBlocks reads the device samples of one GPU of a run in [from, to)
// as columns DeviceUsed and DeviceReserved.
func (db *DB) DeviceBlocks(r Run, gpu int, from, to int64) *Blocks {
	return newBlocks(db, r, &deviceSchema.schema, seriesKey{kind: kindDevice, gpu: gpu}, from, to)
}

// ProcBlocks reads one process's samples on one GPU in [from, to) as
// column ProcUsed.
func (db *DB) ProcBlocks(r Run, gpu, pid int, from, to int64) *Blocks {
	return newBlocks(db, r, &procSchema.schema, seriesKey{kind: kindProc, gpu: gpu, pid: pid}, from, to)
}

// TorchBlocks reads one process's allocator samples on one GPU in [from,
// to) as columns TorchAllocated and TorchReserved.
func (db *DB) TorchBlocks(r Run, gpu, pid int, from, to int64) *Blocks {
	return newBlocks(db, r, &torchSchema.schema, seriesKey{kind: kindTorch, gpu: gpu, pid: pid}, from, to)
}

// Next moves to the next chunk's samples in range; false at the end or on
// an error.
func (b *Blocks) Next() bool { return b.setTimes(b.it.NextBlock()) }

// setTimes makes the block's times those of ts (µs, as stored) in ns;
// false when there are none.
func (b *Blocks) setTimes(ts []int64) bool {
	b.t = b.t[:0]
	for _, t := range ts {
		b.t = append(b.t, t*1000)
	}
	return len(ts) > 0
}

// T is the block's times, Unix ns, ascending.
func (b *Blocks) T() []int64 { return b.t }

// Ints is the block's column c.
func (b *Blocks) Ints(c int) []int64 { return b.it.d.Ints[c][b.it.lo : b.it.lo+len(b.t)] }

// Has says whether the block holds column c: a file written before a
// field was added lacks its column, which reads as 0.
func (b *Blocks) Has(c int) bool { return c < len(b.it.d.Ints) }

// TorchColumn is the column of Blocks from TorchBlocks that holds the
// allocator field of wire.TorchFields named name as sent; false for a
// key, a field stored otherwise (rank, active_bytes) or an unknown name.
func TorchColumn(name string) (int, bool) {
	c := slices.Index(torchSchema.ints, name)
	return c, c >= 0
}

// TorchRow is the block's allocator sample i, every field as
// TorchSamples gives it. The block must be of TorchBlocks.
func (b *Blocks) TorchRow(i int) TorchSample {
	_ = b.t[i] // i in the block
	return torchSchema.get(b.it.d, b.it.lo+i, b.it.key)
}

// Err returns the error that stopped the walk, if any.
func (b *Blocks) Err() error { return b.it.err }

// Overview walks one series over a time range a chunk at a time, as
// Blocks do, but gives a chunk that lies wholly in the range and has a
// summary as its pieces, decoding only the others (the open chunk of a
// recording, the chunks the range cuts, files written before summaries):
// for a line drawn zoomed out, a few bytes a thousand samples. Use it as
//
//	for o.Next() {
//		if ps := o.Pieces(); ps != nil { ... } else { o.T(), o.Ints(c) ... }
//	}
//	if err := o.Err(); err != nil { ... }
//
// Pieces and samples come in time order. The slices are valid until the
// next call of Next.
type Overview struct {
	Blocks
	pieces []Piece
}

func newOverview(db *DB, r Run, sc *schema, k seriesKey, from, to int64, summaries bool) *Overview {
	o := &Overview{Blocks: *newBlocks(db, r, sc, k, from, to)}
	o.it.overview = summaries
	return o
}

// DeviceOverview reads GPU gpu's device samples in [from, to) as Overview
// pieces or blocks, columns as DeviceBlocks numbers them. Without
// summaries every chunk is given as samples.
func (db *DB) DeviceOverview(r Run, gpu int, from, to int64, summaries bool) *Overview {
	return newOverview(db, r, &deviceSchema.schema, seriesKey{kind: kindDevice, gpu: gpu}, from, to, summaries)
}

// TorchOverview reads one process's allocator samples on one GPU in
// [from, to) as Overview pieces or blocks, columns as TorchBlocks numbers
// them. Without summaries every chunk is given as samples.
func (db *DB) TorchOverview(r Run, gpu, pid int, from, to int64, summaries bool) *Overview {
	return newOverview(db, r, &torchSchema.schema, seriesKey{kind: kindTorch, gpu: gpu, pid: pid}, from, to, summaries)
}

// Next moves to the next chunk in range, as pieces or as samples; false
// at the end or on an error.
func (o *Overview) Next() bool {
	o.pieces, o.t = nil, o.t[:0]
	if !o.it.more() {
		return false
	}
	if len(o.it.pieces) > 0 {
		o.pieces = o.it.pieces
		o.it.pieces = o.it.pieces[:0] // reused by the next chunk's
		return true
	}
	return o.setTimes(o.it.take())
}

// Pieces is the chunk's summary of the series, nil when the chunk is
// given as samples.
func (o *Overview) Pieces() []Piece { return o.pieces }
