// Package chunk is memrec's chunk codec: the bytes every stored sample is.
//
// The storage package (its only importer) groups samples into chunks and
// keeps them in bbolt; this package turns one chunk's rows into bytes and
// back. Its surface: Encode writes a chunk from Blocks, DecodeSeries reads
// one series of a chunk into a Decoded, Body checks a chunk's checksum,
// SeriesIDs lists the series a chunk holds. None of it keeps state: every
// function is safe for concurrent use on distinct Decoded values.
//
// A chunk holds the rows of one group of series over a span of time. All
// series of a group that were sampled at the same instant share one row, so
// the timestamp is stored once per tick, not once per sample: an NVML tick
// over 8 GPUs and their processes is one timestamp for 16 samples.
//
// Every integer is an encoding/binary varint ("uvarint" unsigned, "varint"
// zig-zag signed). Timestamps are kept in microseconds (the time quantum:
// a stored time is the sample's Unix nanoseconds rounded down to 1 µs).
//
//	chunk    := version:byte nrows:uvarint span:uvarint timecol nseries:uvarint series*
//	timecol  := t0:varint  intcol(nrows-1 deltas t[i]-t[i-1])       (omitted if nrows == 0)
//	series   := size:uvarint id:uvarint presence nints:uvarint [forms] intcol* nstrs:uvarint strcol*
//	presence := nruns:uvarint run:uvarint*
//
// version is 4 for the chunks this code writes: version 2's grammar, with
// the common form below, followed by crc:4 bytes, the CRC-32C (Castagnoli)
// of every byte before it, little endian, so that damage to any value is
// found (ErrCorrupt) rather than read as data. Version 3 (no common form),
// version 2 (no checksum either) and version 1 (before column forms: no
// forms list, every int column a plain intcol, no offsets form of an
// intcol) were written by earlier memrec and are read as they are.
//
// span is t[last]-t0, so a reader learns the chunk's time range from its first
// bytes. size is the byte length of the rest of the series block, so a reader
// that wants one series skips the others without decoding them.
//
// presence lists run lengths of rows, alternating present/absent and starting
// with present (a first run of 0 means the series starts absent). A series
// sampled at every tick costs two bytes: nruns=1, run=nrows. Its columns hold
// one value per present row, in row order.
//
// An intcol of n values (n known from context) stores deltas, scaled by their
// greatest common divisor, and collapses runs of equal values:
//
//	intcol   := first:varint gcd:uvarint [mode:byte (tokens | packed | offsets)]
//	tokens   := token*                                   (mode 0)
//	packed   := base:varint bits                         (mode w+1, w in 0..64)
//	offsets  := base:varint bits                         (mode w+66, w in 0..64)
//
// gcd is the GCD of |v[i]-v[i-1]| over the column, 0 when all values are
// equal (then nothing follows). Otherwise the n-1 scaled deltas q = delta/gcd
// follow in whichever of three forms is smallest:
//   - tokens: z:uvarint = zigzag(q); when z is 0 it is followed by r:uvarint,
//     the number of further zero deltas in the same run;
//   - packed (frame of reference): every q - base, base the smallest q, in w
//     bits, little-endian bit order, ceil((n-1)·w/8) bytes. Timestamps with
//     tens of microseconds of jitter take one byte each this way, on a fixed
//     schedule none at all (w = 0), and they decode without branches;
//   - offsets: the same bits, but of o = (v[i]-v[0])/gcd, i ≥ 1, the scaled
//     offsets from the first value, less their smallest. Values that jump
//     around a range (allocator samples taken at random points of a step)
//     have offsets of half the span of their deltas: one bit less a value.
//     Used only where no offset overflows an int64.
//
// So a byte count that does not change for a whole chunk costs 2 bytes, one
// that changes by a multiple of the allocator's 2 MiB segment costs one byte
// per change, and a timestamp column on a fixed schedule (deltas all equal)
// costs a few bytes per chunk: the time column's deltas are themselves
// delta-coded, which makes this the delta-of-delta scheme of Gorilla,
// byte-aligned for decoding speed.
//
// A column may be coded against an earlier column of the same series, its
// reference, where that is smaller (version 2), or against one value
// (version 4). The forms list says which:
//
//	forms    := nforms:uvarint (col:uvarint ref:uvarint kind:byte)*   (col ascending)
//	kind 1, minus:  ref < col; the column's intcol holds v[i] - ref[i]
//	kind 2, same:   ref < col; the column is mask:ceil(n/8) bytes then
//	                intcol(m values): bit i (low bit of byte i/8 first) is set
//	                where v[i] == ref[i], and the intcol holds the m values
//	                whose bit is clear, in order
//	kind 3, common: ref is 0 and unused; the column is c:varint then the
//	                same's mask and intcol, bit i set where v[i] == c
//
// The writer tries minus and same against every earlier column, and common
// against the column's most frequent value where an eighth of the rows or
// more hold it, for each column whose plain form costs more than a bit a
// value, and keeps the smallest. Common is for
// a series that keeps coming back to one value: the allocator's memory at
// every step's end (weights and optimizer state) between samples taken at
// random points of the step: each row holding it costs a bit instead of
// the column's width. In
// allocator samples peak_allocated equals allocated whenever the peak was
// reached at the sample (the forward pass still climbing): same costs a bit
// there and the rest are the step's peak, nearly constant, where the plain
// column pays three bytes a value. active equals allocated in every run seen;
// the schema already stores it as active-allocated, a column of zeros.
//
//	strcol   := ndict:uvarint (len:uvarint bytes)* intcol(indices into the dictionary)
//
// Arithmetic on deltas wraps (two's complement), so every int64 column,
// including extreme values, round-trips exactly.
package chunk
