package storage

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"

	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/storage/internal/chunk"
)

// Summaries: when a chunk is sealed, the writer also stores what each of
// its device, process and allocator series holds, in pieces of at most
// PieceSamples consecutive samples: the first and last time, the count,
// and per stored column the first, last, lowest and highest value with the
// time of each extreme. They sit in the run's summaries bucket under the
// chunk's key, so an overview of a run (the viewer's and the report's
// zoomed-out lines) reads a few bytes per thousand samples instead of
// decoding every sample. A chunk without a summary (the open chunk of a
// recording, or a file written before summaries) is read sample by sample;
// Compact adds the missing ones.
//
// The bytes of a chunk's summary:
//
//	version (1 byte, 1)
//	per series, ascending id: id, columns, pieces (uvarints), then per piece
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

const summaryVersion = 1

// keySummaries names the bucket of a run's chunk summaries.
var keySummaries = []byte("summaries")

// Piece summarises consecutive samples of one series: their first and
// last time (ns), their number, and per stored column (the kind's column
// constants, as Blocks.Ints numbers them) its values.
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

// summarized says whether a kind's chunks carry summaries: the sampled
// series. Marks, sites and the budget (one row a step) do not.
func summarized(k seriesKind) bool {
	return k == kindDevice || k == kindProc || k == kindTorch
}

// appendSummary appends the summary of one series (times t in µs,
// ascending; its stored columns) to dst.
func appendSummary(dst []byte, id uint32, t []int64, cols [][]int64) []byte {
	n := len(t)
	pieces := (n + PieceSamples - 1) / PieceSamples
	dst = binary.AppendUvarint(dst, uint64(id))
	dst = binary.AppendUvarint(dst, uint64(len(cols)))
	dst = binary.AppendUvarint(dst, uint64(pieces))
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
			dst = binary.AppendVarint(dst, first-prevV[c])
			dst = binary.AppendUvarint(dst, uint64(first-vs[lowest]))
			dst = binary.AppendUvarint(dst, uint64(vs[highest]-first))
			dst = binary.AppendVarint(dst, vs[len(vs)-1]-first)
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
	if len(sum) < 5 || sum[0] != summaryVersion {
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
				first := prevV[c] + r.varint()
				lo, hi := first-int64(r.uvarint()), first+int64(r.uvarint())
				last := first + r.varint()
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

// summarizeChunk computes a stored chunk's summary from its samples, for
// Compact and Check; nil when it holds no summarised series.
func summarizeChunk(value []byte, kinds map[uint32]seriesKind, d *chunk.Decoded) ([]byte, error) {
	body, err := chunk.Body(value)
	if err != nil {
		return nil, err
	}
	ids, _, err := chunk.SeriesIDsBody(body)
	if err != nil {
		return nil, err
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	sum := []byte{summaryVersion}
	for _, id := range ids {
		if !summarized(kinds[id]) {
			continue
		}
		if _, err := chunk.DecodeSeriesBody(body, id, d); err != nil {
			return nil, err
		}
		if len(d.T) > 0 {
			sum = appendSummary(sum, id, d.T, d.Ints)
		}
	}
	return sealSummary(sum), nil
}

// seriesKinds maps a run's series ids to their kinds.
func seriesKinds(tx *bolt.Tx, run uint64) (map[uint32]seriesKind, error) {
	series, err := seriesTable(tx, run)
	kinds := make(map[uint32]seriesKind, len(series))
	for _, s := range series {
		kinds[s.ID] = s.Kind
	}
	return kinds, err
}

// addSummaries writes the summary of every chunk of every run that has
// none (files written before summaries; the last open chunk of a
// recording that ended without closing), in one transaction, and returns
// how many it wrote.
func addSummaries(db *bolt.DB) (added int, err error) {
	err = db.Update(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketData)
		if data == nil {
			return nil
		}
		var d chunk.Decoded
		return data.ForEachBucket(func(runKey []byte) error {
			b := data.Bucket(runKey)
			chunks := b.Bucket(keyChunks)
			if chunks == nil {
				return nil
			}
			kinds, err := seriesKinds(tx, binary.BigEndian.Uint64(runKey))
			if err != nil {
				return err
			}
			var missing [][2][]byte
			have := b.Bucket(keySummaries)
			err = chunks.ForEach(func(k, v []byte) error {
				if have != nil && have.Get(k) != nil {
					return nil
				}
				if group, _, _, _ := parseChunkKey(k); group == groupMarks {
					return nil
				}
				sum, err := summarizeChunk(v, kinds, &d)
				if err != nil {
					return fmt.Errorf("run %d chunk %x: %w", binary.BigEndian.Uint64(runKey), k, err)
				}
				if sum != nil {
					missing = append(missing, [2][]byte{bytes.Clone(k), sum})
				}
				return nil
			})
			if err != nil || len(missing) == 0 {
				return err
			}
			sums, err := b.CreateBucketIfNotExists(keySummaries)
			if err != nil {
				return err
			}
			for _, kv := range missing {
				if err := sums.Put(kv[0], kv[1]); err != nil {
					return err
				}
			}
			added += len(missing)
			return nil
		})
	})
	return added, err
}

// checkSummary verifies that a chunk's stored summary is the one its
// samples give (Check): a summary that disagrees would draw a line the
// samples do not.
func checkSummary(stored, value []byte, kinds map[uint32]seriesKind, d *chunk.Decoded) error {
	want, err := summarizeChunk(value, kinds, d)
	if err != nil {
		return err
	}
	if !bytes.Equal(stored, want) {
		if _, _, err := summaryPieces(stored, 0, nil); err != nil {
			return err
		}
		return fmt.Errorf("%w: its summary does not match its samples", ErrCorrupt)
	}
	return nil
}

// Unsummarized counts the chunks of device, process and allocator series
// that have no summary (written before summaries, or the last open chunk
// of a recording that did not end): Compact gives them theirs.
func (db *DB) Unsummarized() (n int, err error) {
	err = db.bolt.View(func(tx *bolt.Tx) error {
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
			series, err := seriesTable(tx, binary.BigEndian.Uint64(runKey))
			if err != nil {
				return err
			}
			groups := map[uint32]bool{} // the groups that hold a summarised series
			for _, s := range series {
				groups[s.Group] = groups[s.Group] || summarized(s.Kind)
			}
			return chunks.ForEach(func(k, _ []byte) error {
				if group, _, _, ok := parseChunkKey(k); ok && groups[group] && getIn(sums, k) == nil {
					n++
				}
				return nil
			})
		})
	})
	return n, err
}
