package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/bits"
	"slices"

	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/storage/internal/chunk"
)

// Summaries: when a chunk is sealed, the writer also stores what each of
// its device and allocator series holds, in pieces of at most
// PieceSamples consecutive samples: the first and last time, the count,
// and per summarised column the first, last, lowest and highest value
// with the time of each extreme. They sit in the run's summaries bucket
// under the chunk's key, so an overview of a run (the viewer's and the
// report's zoomed-out lines) reads a few bytes per thousand samples
// instead of decoding every sample. Only what an overview draws is
// summarised (summaryCols): each summarised column of a moving series
// costs about as many bytes a piece as the next. A chunk without a
// summary (the open chunk of a recording, or a file written before
// summaries) is read sample by sample; Compact adds the missing ones.
//
// The bytes of a chunk's summary:
//
//	version (1 byte: 2; 1 in files written when a summary held every
//	  stored column; both read alike)
//	per series, ascending id: id, columns, pieces (uvarints), in version 2
//	  per column its shift (uvarint: the trailing zero bits every value of
//	  the column has, which every value below leaves out), then per piece
//	  samples (uvarint), first time (varint, µs: the first piece's against
//	  0, each next against the last time of the piece before), last time
//	  less first (uvarint), the columns that hold the last value of the
//	  piece before (0 for the first) throughout (a uvarint of bits, bit c
//	  for column c), and per other column: first value (varint, against
//	  that last value), first less
//	  lowest, highest less first (uvarints), last less first (varint), and
//	  the time of the lowest less the first time where the lowest is below
//	  the first value, and of the highest where it is above (uvarints)
//	CRC-32C of all of the above (4 bytes, big endian)
//
// The first occurrence of an extreme is the one kept, as the viewer's
// buckets keep it.

// PieceSamples is the most samples of a series one piece of a summary
// holds: windows with fewer samples a pixel are drawn from samples.
const PieceSamples = 1024

// summaryVersion is the form new summaries take: 2 holds the columns
// summaryCols names, 1 every stored column.
const summaryVersion = 2

// summaryCols is how many leading columns of a series of kind k (ncols
// stored) a summary of the given version holds; 0: the series has no
// summary. Version 2 holds those an overview draws: DeviceUsed and
// DeviceReserved, and the allocator's rank, TorchAllocated and
// TorchReserved; a process's series is drawn from its samples, so it has
// none. Version 1 held every column of the device, process and allocator
// series.
func summaryCols(version byte, k seriesKind, ncols int) int {
	switch {
	case !summarized(k):
		return 0
	case version < 2:
		return ncols
	case k == kindDevice:
		return min(ncols, DeviceReserved+1)
	case k == kindTorch:
		return min(ncols, TorchReserved+1)
	}
	return 0
}

// keySummaries names the bucket of a run's chunk summaries.
var keySummaries = []byte("summaries")

// Piece summarises consecutive samples of one series: their first and
// last time (ns), their number, and per summarised column (the kind's
// column constants, as Blocks.Ints numbers them; see summaryCols) its
// values.
type Piece struct {
	T0, T1 int64
	N      int64
	Cols   []PieceCol
}

// PieceCol is one column's first, last, lowest and highest value over a
// piece, with the time (ns) of the first sample holding each extreme.
type PieceCol struct {
	First, Last, Min, Max int64
	TMin, TMax            int64
}

// summarized says whether a kind's chunks may carry summaries: the
// sampled series (summaryCols says which of them a version summarises).
// Marks, sites and the budget (one row a step) do not.
func summarized(k seriesKind) bool {
	return k == kindDevice || k == kindProc || k == kindTorch
}

// appendSummary appends the summary of one series (times t in µs,
// ascending; the columns it summarises) to dst, which starts with the
// summary's version.
func appendSummary(dst []byte, id uint32, t []int64, cols [][]int64) []byte {
	n := len(t)
	pieces := (n + PieceSamples - 1) / PieceSamples
	dst = binary.AppendUvarint(dst, uint64(id))
	dst = binary.AppendUvarint(dst, uint64(len(cols)))
	dst = binary.AppendUvarint(dst, uint64(pieces))
	shift := make([]uint, len(cols))
	if dst[0] >= 2 {
		for c, col := range cols {
			shift[c] = commonShift(col)
			dst = binary.AppendUvarint(dst, uint64(shift[c]))
		}
	}
	prevT, prevV := int64(0), make([]int64, len(cols))
	for p := range pieces {
		lo, hi := p*n/pieces, (p+1)*n/pieces
		t0, t1 := t[lo], t[hi-1]
		dst = binary.AppendUvarint(dst, uint64(hi-lo))
		dst = binary.AppendVarint(dst, t0-prevT)
		dst = binary.AppendUvarint(dst, uint64(t1-t0))
		var flat uint64 // the columns that hold the last value of the piece before throughout
		for c, col := range cols {
			if c < 64 && unchanged(col[lo:hi], prevV[c]) {
				flat |= 1 << c
			}
		}
		dst = binary.AppendUvarint(dst, flat)
		for c, col := range cols {
			if flat&(1<<c) != 0 {
				continue
			}
			vs := col[lo:hi]
			first, lowest, highest := vs[0], 0, 0
			for i, v := range vs {
				if v < vs[lowest] {
					lowest = i
				} else if v > vs[highest] {
					highest = i
				}
			}
			sh := shift[c] // the differences of multiples of 1<<sh are too
			dst = binary.AppendVarint(dst, (first-prevV[c])>>sh)
			dst = binary.AppendUvarint(dst, uint64(first-vs[lowest])>>sh)
			dst = binary.AppendUvarint(dst, uint64(vs[highest]-first)>>sh)
			dst = binary.AppendVarint(dst, (vs[len(vs)-1]-first)>>sh)
			if vs[lowest] < first {
				dst = binary.AppendUvarint(dst, uint64(t[lo+lowest]-t0))
			}
			if vs[highest] > first {
				dst = binary.AppendUvarint(dst, uint64(t[lo+highest]-t0))
			}
			prevV[c] = vs[len(vs)-1]
		}
		prevT = t1
	}
	return dst
}

// commonShift is how many trailing zero bits every value of vs has (0
// when they are all 0): memory sizes come in pages or blocks, so a
// summary stores them in those units.
func commonShift(vs []int64) uint {
	var or uint64
	for _, v := range vs {
		or |= uint64(v)
	}
	if or == 0 {
		return 0
	}
	return uint(bits.TrailingZeros64(or))
}

// unchanged says whether every value of vs is v.
func unchanged(vs []int64, v int64) bool {
	for _, x := range vs {
		if x != v {
			return false
		}
	}
	return true
}

// sealSummary closes a chunk's summary with its checksum; nil when it
// summarised no series.
func sealSummary(b []byte) []byte {
	if len(b) <= 1 {
		return nil
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errSummary is a summary that does not parse or fails its checksum.
var errSummary = fmt.Errorf("%w: bad chunk summary", ErrCorrupt)

// summaryReader reads a summary's varints.
type summaryReader struct {
	b   []byte
	bad bool
}

func (r *summaryReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad, r.b = true, nil
		return 0
	}
	r.b = r.b[n:]
	return v
}

// varint reads what binary.AppendVarint wrote: a zigzag uvarint.
func (r *summaryReader) varint() int64 {
	u := r.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

// count reads a count that the bytes left can hold (each counted thing
// takes a byte or more), so that damage cannot make a huge allocation.
func (r *summaryReader) count() int {
	v := r.uvarint()
	if v > uint64(len(r.b)) {
		r.bad, r.b = true, nil
		return 0
	}
	return int(v)
}

// summaryPieces finds series id in a chunk's summary and appends its
// pieces to dst; found is false when the summary does not hold it. It
// verifies the checksum and the bytes it reads.
func summaryPieces(sum []byte, id uint32, dst []Piece) (_ []Piece, found bool, err error) {
	if len(sum) < 5 || sum[0] < 1 || sum[0] > summaryVersion {
		return dst, false, errSummary
	}
	body := sum[:len(sum)-4]
	if binary.BigEndian.Uint32(sum[len(sum)-4:]) != crc32.Checksum(body, castagnoli) {
		return dst, false, errSummary
	}
	r := summaryReader{b: body[1:]}
	for len(r.b) > 0 && !r.bad {
		sid := r.uvarint()
		ncols, npieces := r.count(), r.count()
		want := sid == uint64(id)
		shift := make([]uint, ncols)
		if sum[0] >= 2 {
			for c := range shift {
				if shift[c] = uint(r.uvarint()); shift[c] > 63 {
					return dst, false, errSummary
				}
			}
		}
		prevT, prevV := int64(0), make([]int64, ncols)
		for range npieces {
			p := Piece{N: int64(r.uvarint())}
			t0 := prevT + r.varint()
			t1 := t0 + int64(r.uvarint())
			p.T0, p.T1 = t0*1000, t1*1000
			if want {
				p.Cols = make([]PieceCol, ncols)
			}
			flat := r.uvarint()
			for c := range ncols {
				if c < 64 && flat&(1<<c) != 0 {
					if want {
						v := prevV[c]
						p.Cols[c] = PieceCol{First: v, Last: v, Min: v, Max: v, TMin: t0 * 1000, TMax: t0 * 1000}
					}
					continue
				}
				sh := shift[c]
				first := prevV[c] + r.varint()<<sh
				lo, hi := first-int64(r.uvarint()<<sh), first+int64(r.uvarint()<<sh)
				last := first + r.varint()<<sh
				tmin, tmax := t0, t0
				if lo < first {
					tmin += int64(r.uvarint())
				}
				if hi > first {
					tmax += int64(r.uvarint())
				}
				if want {
					p.Cols[c] = PieceCol{First: first, Last: last, Min: lo, Max: hi, TMin: tmin * 1000, TMax: tmax * 1000}
				}
				prevV[c] = last
			}
			prevT = t1
			if want {
				if p.N <= 0 || t1 < t0 {
					return dst, false, errSummary
				}
				dst = append(dst, p)
			}
		}
		if want && !r.bad {
			return dst, true, nil
		}
	}
	if r.bad {
		return dst, false, errSummary
	}
	return dst, false, nil
}

// summarizeChunk computes a stored chunk's summary (of summaryVersion)
// from its samples, for Compact; nil when it holds no summarised series. A series the run's
// table does not know is left out (Check reports it).
func summarizeChunk(value []byte, known map[uint32]seriesInfo, d *chunk.Decoded) ([]byte, error) {
	body, err := chunk.Body(value)
	if err != nil {
		return nil, err
	}
	ids, _, err := chunk.SeriesIDsBody(body)
	if err != nil {
		return nil, err
	}
	slices.Sort(ids)
	sum := []byte{summaryVersion}
	for _, id := range ids {
		if summaryCols(summaryVersion, known[id].Kind, 1) == 0 {
			continue
		}
		if _, err := chunk.DecodeSeriesBody(body, id, d); err != nil {
			return nil, err
		}
		if len(d.T) > 0 {
			sum = appendSummary(sum, id, d.T, d.Ints[:summaryCols(summaryVersion, known[id].Kind, len(d.Ints))])
		}
	}
	return sealSummary(sum), nil
}

// unsummarized calls f, run by run, with each chunk that has no summary
// in a group that holds a summarised series (a file written before
// summaries, the last open chunk of a recording that did not end), and
// the run's series table. f must not write to the run's buckets.
func unsummarized(tx *bolt.Tx, f func(run []byte, known map[uint32]seriesInfo, k, v []byte) error) error {
	data := tx.Bucket(bucketData)
	if data == nil {
		return nil
	}
	return data.ForEachBucket(func(runKey []byte) error {
		b := data.Bucket(runKey)
		chunks, sums := b.Bucket(keyChunks), b.Bucket(keySummaries)
		if chunks == nil {
			return nil
		}
		known, err := knownSeries(tx, binary.BigEndian.Uint64(runKey))
		if err != nil {
			return err
		}
		groups := map[uint32]bool{} // the groups that hold a summarised series
		for _, s := range known {
			groups[s.Group] = groups[s.Group] || summaryCols(summaryVersion, s.Kind, 1) > 0
		}
		return chunks.ForEach(func(k, v []byte) error {
			if group, _, _, ok := parseChunkKey(k); ok && groups[group] && getIn(sums, k) == nil {
				return f(runKey, known, k, v)
			}
			return nil
		})
	})
}

// addSummaries writes the summary of every chunk that has none
// (unsummarized), in one transaction, and returns how many it wrote.
func addSummaries(ctx context.Context, db *bolt.DB) (added int, err error) {
	err = db.Update(func(tx *bolt.Tx) error {
		var d chunk.Decoded
		type keyed struct{ k, sum []byte }
		missing := map[string][]keyed{} // by run key: written once the walk is over
		err := unsummarized(tx, func(run []byte, known map[uint32]seriesInfo, k, v []byte) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			sum, err := summarizeChunk(v, known, &d)
			if err != nil {
				return fmt.Errorf("run %d chunk %x: %w", binary.BigEndian.Uint64(run), k, err)
			}
			if sum != nil {
				missing[string(run)] = append(missing[string(run)], keyed{bytes.Clone(k), sum})
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(missing) == 0 {
			return errNoSummaries // nothing to commit: the file stays byte for byte
		}
		for run, kvs := range missing {
			sums, err := tx.Bucket(bucketData).Bucket([]byte(run)).CreateBucketIfNotExists(keySummaries)
			if err != nil {
				return err
			}
			for _, kv := range kvs {
				if err := sums.Put(kv.k, kv.sum); err != nil {
					return err
				}
			}
			added += len(kvs)
		}
		return nil
	})
	if err == errNoSummaries {
		err = nil
	}
	return added, err
}

// errNoSummaries rolls back addSummaries' transaction when every chunk has
// its summary.
var errNoSummaries = errors.New("no chunk without a summary")

// sameSummary verifies that a chunk's stored summary is the one its
// samples give (Check): a summary that disagrees would draw a line the
// samples do not.
func sameSummary(stored, want []byte) error {
	if bytes.Equal(stored, want) {
		return nil
	}
	if _, _, err := summaryPieces(stored, 0, nil); err != nil {
		return err
	}
	return fmt.Errorf("%w: its summary does not match its samples", ErrCorrupt)
}

// Unsummarized counts the chunks of device, process and allocator series
// that have no summary (written before summaries, or the last open chunk
// of a recording that did not end): Compact gives them theirs.
func (db *DB) Unsummarized() (n int, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
		return unsummarized(tx, func([]byte, map[uint32]seriesInfo, []byte, []byte) error { n++; return nil })
	})
	return n, err
}
