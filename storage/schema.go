package storage

import (
	"errors"
	"fmt"
	"math"

	"github.com/memrec/memrec/storage/internal/chunk"
	"github.com/memrec/memrec/storage/wire"
)

// This file is the one place that knows which column of a stored series
// holds which field. A kind's schema lists its columns and turns one value
// into a row of them and back; the writer, the iterators and the checks all
// go through it, so adding a field to a kind is an edit here (and to the
// type, and to docs/format.md). The sample kinds and the marks take their
// column names, order and checks from their wire tables
// (storage/wire/fields.go); put and get below are written by hand, since
// they are the hottest code memrec has, and the schema tests hold them to
// the tables: a field in a table that put or get forgets fails them.
//
// Rows are columns of int64 and of strings. Optional integers (a Mark's
// fields, a TorchSample's rank) are stored +1 so that absent (None) is 0.
// torch stores active minus allocated: the two are usually equal, so the
// difference is a column of zeros that costs almost nothing.

// seriesKind says what a series holds and so how many columns it has. The
// numbers are stored in the series table: never reuse one.
type seriesKind uint8

const (
	kindMark   seriesKind = 1
	kindDevice seriesKind = 2
	kindProc   seriesKind = 3
	kindTorch  seriesKind = 4
	kindSite   seriesKind = 5
)

// schema is the untyped part of a kind's schema: what a decoder must find.
type schema struct {
	name SeriesKind
	ints []string // int columns, in stored order (names for messages)
	// minInts is how many int columns a series written before the last
	// ones were added has; 0: all of them. Absent columns read as 0.
	minInts int
	strs    []string // string columns
	// count is the run's counter of this kind.
	count func(*Counts) *int64
}

// rowSchema is a kind's schema with the conversion of its Go type T.
type rowSchema[T any] struct {
	schema
	kind  seriesKind
	key   func(T) seriesKey
	time  func(T) int64
	check func(T) error
	// put appends v's columns to ints and strs, in schema order.
	put func(v T, ints []int64, strs []string) ([]int64, []string)
	// get builds the value of row i of a decoded series with key k.
	get func(d *chunk.Decoded, i int, k seriesKey) T
	// fields appends the values of row i's fields that are not keys, in
	// the order of the kind's wire table (what get's value gives through
	// the table's Get), without building a T; nil: the columns are those
	// values as they are, absent later ones 0 (Iter.BlockFields).
	fields func(d *chunk.Decoded, i int, dst []int64) []int64
}

var deviceSchema = rowSchema[DeviceSample]{
	schema: schema{name: SeriesDevice, ints: columnNames(wire.DeviceFields, nil),
		count: func(c *Counts) *int64 { return &c.Samples }},
	kind:  kindDevice,
	key:   func(s DeviceSample) seriesKey { return seriesKey{kind: kindDevice, gpu: s.GPU} },
	time:  func(s DeviceSample) int64 { return s.T },
	check: func(s DeviceSample) error { return checkFields(wire.DeviceFields, s) },
	put: func(s DeviceSample, ints []int64, strs []string) ([]int64, []string) {
		return append(ints, s.Used, s.Reserved), strs
	},
	get: func(d *chunk.Decoded, i int, k seriesKey) DeviceSample {
		return DeviceSample{T: d.T[i] * 1000, GPU: k.gpu, Used: d.Ints[0][i], Reserved: d.Ints[1][i]}
	},
}

var procSchema = rowSchema[ProcSample]{
	schema: schema{name: SeriesProc, ints: columnNames(wire.ProcFields, nil),
		count: func(c *Counts) *int64 { return &c.ProcSamples }},
	kind:  kindProc,
	key:   func(s ProcSample) seriesKey { return seriesKey{kind: kindProc, gpu: s.GPU, pid: s.PID} },
	time:  func(s ProcSample) int64 { return s.T },
	check: func(s ProcSample) error { return errors.Join(checkPID(s.PID), checkFields(wire.ProcFields, s)) },
	put: func(s ProcSample, ints []int64, strs []string) ([]int64, []string) {
		return append(ints, s.Used), strs
	},
	get: func(d *chunk.Decoded, i int, k seriesKey) ProcSample {
		return ProcSample{T: d.T[i] * 1000, GPU: k.gpu, PID: k.pid, Used: d.Ints[0][i]}
	},
}

var torchSchema = rowSchema[TorchSample]{
	schema: schema{name: SeriesTorch, ints: columnNames(wire.TorchFields, map[string]string{"active_bytes": "allocated_bytes"}),
		minInts: 9, // "largest_segment_bytes" came later
		count:   func(c *Counts) *int64 { return &c.TorchSamples }},
	kind: kindTorch,
	key:  func(s TorchSample) seriesKey { return seriesKey{kind: kindTorch, gpu: s.GPU, pid: s.PID} },
	time: func(s TorchSample) int64 { return s.T },
	check: func(s TorchSample) error {
		if err := checkPID(s.PID); err != nil {
			return err
		}
		return checkFields(wire.TorchFields, s)
	},
	put: func(s TorchSample, ints []int64, strs []string) ([]int64, []string) {
		return putTail(s, append(ints, optEncode(s.Rank), s.Allocated, s.Reserved, s.Active-s.Allocated,
			s.InactiveSplit, s.PeakAllocated, s.Segments, s.AllocRetries, s.OOMs, s.LargestSegment), strs)
	},
	get: func(d *chunk.Decoded, i int, k seriesKey) TorchSample {
		c := d.Ints
		s := TorchSample{T: d.T[i] * 1000, GPU: k.gpu, PID: k.pid, Rank: optDecode(c[0][i]),
			Allocated: c[1][i], Reserved: c[2][i], Active: c[3][i] + c[1][i], InactiveSplit: c[4][i],
			PeakAllocated: c[5][i], Segments: c[6][i], AllocRetries: c[7][i], OOMs: c[8][i]}
		if len(c) > 9 {
			s.LargestSegment = c[9][i]
		}
		for j := torchTail; j < len(c); j++ {
			torchTailFields[j-torchTail].Set(&s, c[j][i])
		}
		return s
	},
	fields: func(d *chunk.Decoded, i int, dst []int64) []int64 {
		alloc := intAt(d, 1, i)
		dst = append(dst, int64(optDecode(intAt(d, 0, i))), alloc, intAt(d, 2, i), intAt(d, 3, i)+alloc)
		for c := 4; c < len(d.Ints); c++ {
			dst = append(dst, intAt(d, c, i))
		}
		for range len(wire.TorchFields) - 1 - len(d.Ints) { // later columns a series written before them lacks
			dst = append(dst, 0)
		}
		return dst
	},
}

// intAt is row i of int column c of d, for a reader that reads a decoded
// chunk a row at a time long after decoding it (an export merging every
// series: an allocator or mark chunk spans minutes of the other series'
// lines, and its columns have left the caches by the time their rows are
// written). A column stored as one value is read at its first row, which
// the rows before kept in cache, so only the columns that change cost a
// miss.
func intAt(d *chunk.Decoded, c, i int) int64 {
	if d.OneValue(c) {
		i = 0
	}
	return d.Ints[c][i]
}

// torchTail is the number of allocator columns put and get name one by
// one (decoding is memrec's hottest path); the figures after them in
// wire.TorchFields are stored and read through the table, so a new one is
// a row there and no edit here. The table's first row is the pid, a key.
const torchTail = 10

var torchTailFields = wire.TorchFields[torchTail+1:]

// putTail appends the table-driven allocator columns of s to ints.
func putTail(s TorchSample, ints []int64, strs []string) ([]int64, []string) {
	for _, f := range torchTailFields {
		ints = append(ints, f.Get(s))
	}
	return ints, strs
}

var markSchema = rowSchema[Mark]{
	schema: schema{name: seriesMarks, ints: columnNames(wire.MarkFields, nil),
		strs: []string{"kind", "text"}, count: func(c *Counts) *int64 { return &c.Marks }},
	kind: kindMark,
	key:  func(Mark) seriesKey { return seriesKey{kind: kindMark} },
	time: func(m Mark) int64 { return m.T },
	check: func(m Mark) error {
		if m.Kind == "" {
			return errors.New("mark has no kind")
		}
		if err := checkFields(wire.MarkFields, m); err != nil {
			return fmt.Errorf("mark %w", err)
		}
		return nil
	},
	put: func(m Mark, ints []int64, strs []string) ([]int64, []string) {
		return append(ints, optEncode(m.Epoch), optEncode(m.Step), optEncode(m.Rank),
			optEncode(m.GPU), optEncode(m.PID), optEncode(m.Code)), append(strs, string(m.Kind), m.Text)
	},
	// Most marks' columns hold one value a chunk (a run's marks are steps
	// without a gpu, pid or code): intAt, for the export.
	get: func(d *chunk.Decoded, i int, _ seriesKey) Mark {
		return Mark{T: d.T[i] * 1000, Kind: MarkKind(d.Strs[0][i]), Text: d.Strs[1][i],
			Epoch: optDecode(intAt(d, 0, i)), Step: optDecode(intAt(d, 1, i)), Rank: optDecode(intAt(d, 2, i)),
			GPU: optDecode(intAt(d, 3, i)), PID: optDecode(intAt(d, 4, i)), Code: optDecode(intAt(d, 5, i))}
	},
}

// siteSchema stores one row per site of a snapshot. The strings repeat
// from one snapshot to the next and the codec keeps each distinct one once
// per chunk, so a site costs its byte counts and a few index bytes.
var siteSchema = rowSchema[SiteSample]{
	schema: schema{name: SeriesSites, ints: []string{"rank+1", "epoch+1", "since_ns", "line", "live_bytes", "live_blocks",
		"alloc_bytes", "allocs", "freed_bytes", "frees", "sites", "bad", "sampled_every×1000"},
		minInts: 12, // "sampled_every" came later
		strs:    []string{"reason", "name", "file", "func", "stack"},
		count:   func(c *Counts) *int64 { return &c.Sites }},
	kind: kindSite,
	key:  func(s SiteSample) seriesKey { return seriesKey{kind: kindSite, gpu: s.GPU, pid: s.PID} },
	time: func(s SiteSample) int64 { return s.T },
	check: func(s SiteSample) error {
		if err := checkPID(s.PID); err != nil {
			return err
		}
		if s.File == "" {
			return errors.New("site has no file")
		}
		if s.Reason == "" {
			return errors.New("site snapshot has no reason")
		}
		if s.SampledEvery != 0 && !(s.SampledEvery >= 1 && s.SampledEvery <= 1e9) {
			return fmt.Errorf("site %s: sampled_every %g is not from 1 to 1e9", s.Label(), s.SampledEvery)
		}
		if s.Rank < None || s.Epoch < None || s.Line < 0 {
			return fmt.Errorf("site %s: negative rank, epoch or line", s.Label())
		}
		if s.Line > math.MaxInt32 {
			return fmt.Errorf("site %s: line %d is past %d: %w", s.Label(), s.Line, math.MaxInt32, ErrLimit)
		}
		if s.SinceNS > LatestTime {
			return fmt.Errorf("site %s: since_ns %d is past 2200: %w", s.Label(), s.SinceNS, ErrLimit)
		}
		for _, c := range []struct {
			name string
			v    string
			max  int
		}{{"file", s.File, MaxSiteText}, {"func", s.Func, MaxSiteText}, {"name", s.Name, MaxSiteText},
			{"reason", string(s.Reason), MaxSiteText}, {"stack", s.Stack, MaxStackText}} {
			if err := checkText("site's "+c.name, c.v, c.max); err != nil {
				return err
			}
		}
		if err := checkBytes("since_ns", s.SinceNS); err != nil {
			return err
		}
		for _, c := range []struct {
			name string
			v    int64
		}{{"live_bytes", s.LiveBytes}, {"live_blocks", s.LiveBlocks},
			{"alloc_bytes", s.AllocBytes}, {"allocs", s.Allocs}, {"freed_bytes", s.FreedBytes},
			{"frees", s.Frees}, {"sites", s.Sites}, {"bad", s.Bad}} {
			if err := errors.Join(checkBytes(c.name, c.v), checkFigure(c.name, c.v)); err != nil {
				return err
			}
		}
		return nil
	},
	put: func(s SiteSample, ints []int64, strs []string) ([]int64, []string) {
		return append(ints, optEncode(s.Rank), optEncode(s.Epoch), s.SinceNS, int64(s.Line), s.LiveBytes,
				s.LiveBlocks, s.AllocBytes, s.Allocs, s.FreedBytes, s.Frees, s.Sites, s.Bad, int64(math.Round(s.SampledEvery*1000))),
			append(strs, string(s.Reason), s.Name, s.File, s.Func, s.Stack)
	},
	get: func(d *chunk.Decoded, i int, k seriesKey) SiteSample {
		c, st := d.Ints, d.Strs
		s := SiteSample{T: d.T[i] * 1000, GPU: k.gpu, PID: k.pid, Rank: optDecode(c[0][i]), Epoch: optDecode(c[1][i]),
			SinceNS: c[2][i], Line: int(c[3][i]), LiveBytes: c[4][i], LiveBlocks: c[5][i], AllocBytes: c[6][i],
			Allocs: c[7][i], FreedBytes: c[8][i], Frees: c[9][i], Sites: c[10][i], Bad: c[11][i],
			Reason: SitesReason(st[0][i]), Name: st[1][i], File: st[2][i], Func: st[3][i], Stack: st[4][i]}
		if len(c) > 12 {
			s.SampledEvery = float64(c[12][i]) / 1000
		}
		return s
	},
}

// columnNames names the stored int columns of a wire table, for messages:
// every field but the keys, in the table's order, which is the order put
// and get use (the schema tests hold them to it). Optional fields are
// stored +1 so that absent (None) is 0 ("rank+1"); minus names fields
// stored as the difference to another ("active_bytes-allocated_bytes").
func columnNames[T any](fs []wire.Field[T], minus map[string]string) []string {
	var names []string
	for _, f := range fs {
		if f.Key {
			continue
		}
		name := f.Name
		if b, ok := minus[f.Name]; ok {
			name += "-" + b
		}
		if f.Optional {
			name += "+1"
		}
		names = append(names, name)
	}
	return names
}

// checkFields refuses a negative value of v's fields in fs, or an optional
// one below None (absent).
func checkFields[T any](fs []wire.Field[T], v T) error {
	for _, f := range fs {
		n := f.Get(v)
		if f.Key {
			continue
		}
		if f.Optional {
			if n < wire.None {
				return fmt.Errorf("%s is negative (%d)", f.Name, n)
			}
			continue
		}
		if err := checkBytes(f.Name, n); err != nil {
			return err
		}
	}
	return nil
}

// schemas indexes the untyped schemas by kind.
var schemas = map[seriesKind]*schema{
	kindDevice: &deviceSchema.schema,
	kindProc:   &procSchema.schema,
	kindTorch:  &torchSchema.schema,
	kindMark:   &markSchema.schema,
	kindSite:   &siteSchema.schema,
}

// cols is the number of int and string columns of kind k.
func (k seriesKind) cols() (ints, strs int) {
	if s := schemas[k]; s != nil {
		return len(s.ints), len(s.strs)
	}
	return 0, 0
}

// checkCols returns ErrCorrupt unless d has the columns of kind k.
func (s *schema) checkCols(d *chunk.Decoded) error {
	minInts := len(s.ints)
	if s.minInts > 0 {
		minInts = s.minInts
	}
	if len(d.Ints) < minInts || len(d.Ints) > len(s.ints) || len(d.Strs) != len(s.strs) {
		return fmt.Errorf("%w: a %s series has %d int and %d string columns, want %d and %d",
			ErrCorrupt, s.name, len(d.Ints), len(d.Strs), len(s.ints), len(s.strs))
	}
	return nil
}

func optEncode(v int) int64 {
	if v < 0 {
		return 0
	}
	return int64(v) + 1
}

func optDecode(v int64) int { return int(v) - 1 }

func checkBytes(name string, v int64) error {
	if v < 0 {
		return fmt.Errorf("%s is negative (%d)", name, v)
	}
	return nil
}
