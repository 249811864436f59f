package storage

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"github.com/memrec/memrec/storage/wire"
)

// An allocator trace is what one process asked of PyTorch's caching
// allocator on one GPU, in order, from its first request to the end of its
// first steps: each allocation's requested size and each free. The probe
// records it (torch.cuda.memory._record_memory_history from CUDA's
// initialisation, MEMREC_ALLOC_TRACE=1) and sends it as marks of kind
// "alloc_trace", so that it travels wherever marks do (files, exports,
// merges). analysis replays it through a model of the allocator, scaled to
// a larger batch, to find what fits.
//
// Its bytes, every integer an unsigned LEB128 varint:
//
//	version (1) · gpu · pid · steps · segments · segment bytes · ops · op…
//
// steps is how many steps the trace covers; segments and segment bytes are
// what the allocator itself took from the device in that time (the replay
// checks itself against them). An op is 2·size for an allocation of size
// bytes (as requested, before rounding) and 2·back+1 for the free of the
// allocation made back ops before it. Version 2 adds the request that
// failed with an out-of-memory error the job caught (cuDNN trying a smaller
// workspace): 1 (a free of nothing) followed by its size. A trace without
// one is written as version 1.
//
// A mark's text carries one piece: "i/n " and the base64 (standard, padded)
// of the i-th of n pieces of those bytes, or of their zlib stream (what the
// probe sends, at most 384 KiB a process, half the socket's 1 MiB a second
// in base64); the
// pieces of one trace share the mark's time, gpu and pid.

// MarkAllocTrace is the kind of the marks that carry an allocator trace.
const MarkAllocTrace wire.MarkKind = "alloc_trace"

// AllocOp is one request to the caching allocator: an allocation of Size
// bytes, or with Free the release of the allocation made by op Of; with
// Failed, an allocation of Size that ran out of memory and was caught (the
// allocator had released its cache; nothing was allocated).
type AllocOp struct {
	Free   bool
	Failed bool
	Of     int32
	Size   int64
}

// AllocTrace is one process's requests on one GPU (see above). The zero
// value is an empty trace.
type AllocTrace struct {
	GPU, PID int
	// Steps is how many steps the trace covers.
	Steps int
	// Segments and SegmentBytes are what the allocator took from the
	// device over the trace, by its own count.
	Segments     int
	SegmentBytes int64
	Ops          []AllocOp
}

// allocTracePiece is the most bytes of trace one mark carries: its base64
// (4 000 characters) and the "i/n " before it fit the longest mark text the
// recorder keeps (recorder.MaxMarkText, 4 KiB).
const allocTracePiece = 3000

// ErrAllocTrace is wrapped by every error about a malformed trace.
var ErrAllocTrace = errors.New("malformed allocator trace")

// Encode returns the trace's bytes.
func (t AllocTrace) Encode() []byte {
	version := uint64(1)
	for _, op := range t.Ops {
		if op.Failed {
			version = 2
		}
	}
	b := make([]byte, 0, 16+3*len(t.Ops))
	for _, v := range []uint64{version, uint64(t.GPU), uint64(t.PID), uint64(t.Steps), uint64(t.Segments), uint64(t.SegmentBytes), uint64(len(t.Ops))} {
		b = binary.AppendUvarint(b, v)
	}
	for i, op := range t.Ops {
		switch {
		case op.Failed:
			b = binary.AppendUvarint(binary.AppendUvarint(b, 1), uint64(op.Size))
		case op.Free:
			b = binary.AppendUvarint(b, uint64(i-int(op.Of))<<1|1)
		default:
			b = binary.AppendUvarint(b, uint64(op.Size)<<1)
		}
	}
	return b
}

// DecodeAllocTrace reads a trace's bytes. A free must release an
// allocation made before it and not yet freed. What it allocates is
// bounded by b's length (an op takes at least one byte).
func DecodeAllocTrace(b []byte) (AllocTrace, error) {
	return decodeTrace(bytes.NewReader(b), uint64(len(b)), NewDecodeBudget(int64(len(b))*allocOpCost))
}

// MaxTraceOps bounds the ops of one trace: several times what the probe
// can send of one process (it caps the trace's compressed bytes), so that
// replaying a trace (compare --by), which holds a block for each live
// allocation, stays within the commands' heap.
const MaxTraceOps = 1 << 22

// allocOpCost is what decoding takes for each op: the AllocOp and a flag
// saying whether its allocation is live.
const allocOpCost = int64(unsafe.Sizeof(AllocOp{})) + 1

// decodeTrace reads a trace's bytes from r: at most maxOps ops, taking
// what they need from budget before they are allocated, and nothing may
// follow the last.
func decodeTrace(r io.ByteReader, maxOps uint64, budget *DecodeBudget) (AllocTrace, error) {
	// The names are made only for an error: an op's would cost more than
	// the op.
	next := func(what string, op int) (uint64, error) {
		v, err := binary.ReadUvarint(r)
		if err != nil {
			if op >= 0 {
				what = fmt.Sprintf(what, op)
			}
			return 0, fmt.Errorf("%w: %s: bad varint (%v)", ErrAllocTrace, what, err)
		}
		return v, nil
	}
	var head [7]uint64
	for i, what := range []string{"version", "gpu", "pid", "steps", "segments", "segment bytes", "ops"} {
		v, err := next(what, -1)
		if err != nil {
			return AllocTrace{}, err
		}
		head[i] = v
	}
	if head[0] != 1 && head[0] != 2 {
		return AllocTrace{}, fmt.Errorf("%w: version %d (want 1 or 2)", ErrAllocTrace, head[0])
	}
	if head[6] > maxOps || head[1] > MaxGPUIndex || head[2] > 1<<31 || head[3] > 1<<31 || head[4] > 1<<31 || head[5] > 1<<62 {
		return AllocTrace{}, fmt.Errorf("%w: header out of range", ErrAllocTrace)
	}
	if head[6] > MaxTraceOps {
		return AllocTrace{}, fmt.Errorf("%w: %d ops, more than %d", ErrAllocTrace, head[6], MaxTraceOps)
	}
	if err := budget.take(int64(head[6])*allocOpCost, fmt.Sprintf("a trace of %d ops", head[6])); err != nil {
		return AllocTrace{}, err
	}
	t := AllocTrace{GPU: int(head[1]), PID: int(head[2]), Steps: int(head[3]), Segments: int(head[4]),
		SegmentBytes: int64(head[5]), Ops: make([]AllocOp, head[6])}
	live := make([]bool, len(t.Ops))
	for i := range t.Ops {
		v, err := next("op %d", i)
		if err != nil {
			return AllocTrace{}, err
		}
		if v&1 == 0 {
			if v>>1 > 1<<50 {
				return AllocTrace{}, fmt.Errorf("%w: op %d allocates %d bytes", ErrAllocTrace, i, v>>1)
			}
			t.Ops[i], live[i] = AllocOp{Size: int64(v >> 1)}, true
			continue
		}
		back := v >> 1
		if back == 0 && head[0] == 2 {
			size, err := next("op %d's size", i)
			if err != nil {
				return AllocTrace{}, err
			}
			if size > 1<<50 {
				return AllocTrace{}, fmt.Errorf("%w: op %d asks for %d bytes", ErrAllocTrace, i, size)
			}
			t.Ops[i] = AllocOp{Failed: true, Size: int64(size)}
			continue
		}
		if back == 0 || back > uint64(i) || !live[i-int(back)] {
			return AllocTrace{}, fmt.Errorf("%w: op %d frees nothing live (%d back)", ErrAllocTrace, i, back)
		}
		of := i - int(back)
		live[of] = false
		t.Ops[i] = AllocOp{Free: true, Of: int32(of)}
	}
	switch _, err := r.ReadByte(); {
	case err == nil:
		return AllocTrace{}, fmt.Errorf("%w: bytes after the last op", ErrAllocTrace)
	case err != io.EOF:
		return AllocTrace{}, fmt.Errorf("%w: after the last op: %v", ErrAllocTrace, err)
	}
	return t, nil
}

// zlibCost is what one zlib stream takes to read, whatever its size: the
// decompressor's 32 KiB window, its Huffman tables and a read buffer.
const zlibCost = 64 << 10

// traceReader returns a reader of the trace bytes b carries: b itself
// where it starts with a version (1 or 2), else b's zlib stream (its
// first byte 0x78), inflated as it is read. The ops it can hold are at
// most b's length for bytes as they are; an inflated stream has no such
// bound but the budget.
func traceReader(b []byte, budget *DecodeBudget) (io.ByteReader, uint64, error) {
	if len(b) == 0 || b[0] != 0x78 {
		return bytes.NewReader(b), uint64(len(b)), nil
	}
	if err := budget.take(zlibCost, "a zlib stream"); err != nil {
		return nil, 0, err
	}
	z, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, 0, err
	}
	return bufio.NewReaderSize(z, 4096), math.MaxUint64, nil
}

// Marks returns the marks that carry the trace, at time t.
func (tr AllocTrace) Marks(t int64) []Mark {
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(tr.Encode())
	w.Close()
	b := z.Bytes()
	n := (len(b) + allocTracePiece - 1) / allocTracePiece
	out := make([]Mark, 0, n)
	for i := 0; i < n; i++ {
		m := NewMark(t, MarkAllocTrace)
		m.GPU, m.PID = tr.GPU, tr.PID
		m.Text = fmt.Sprintf("%d/%d %s", i, n, base64.StdEncoding.EncodeToString(b[i*allocTracePiece:min(len(b), (i+1)*allocTracePiece)]))
		out = append(out, m)
	}
	return out
}

// AllocTraces reassembles the traces carried by marks of kind
// MarkAllocTrace (others are ignored), ordered by GPU then PID, taking
// what it keeps and decodes from budget. A trace whose pieces are missing,
// repeated or malformed, or that would take more than budget has left, is
// left out, and the error says how many and the first.
func AllocTraces(marks []Mark, budget *DecodeBudget) ([]AllocTrace, error) {
	s := NewAllocTraceSet(budget)
	for _, m := range marks {
		s.Add(m)
	}
	return s.Traces()
}

// AllocTraceSet gathers the pieces of a run's allocator traces as its
// marks are read, keeping only their text, and within its budget. Not
// safe for concurrent use; the zero value is not usable.
type AllocTraceSet struct {
	budget *DecodeBudget
	traces map[traceKey]*tracePieces
	keys   []traceKey
	errs   traceErrors
}

type traceKey struct {
	t        int64
	gpu, pid int
}

// tracePieces are the pieces of one trace, as they came.
type tracePieces struct {
	n    int
	data []tracePiece
}

type tracePiece struct {
	i    int
	data string
}

// pieceCost and traceCost are what a piece and a trace cost to keep
// besides the mark's text (which the piece shares): the piece's entry,
// and the trace's map entry and slice header.
const (
	pieceCost = int64(unsafe.Sizeof(tracePiece{})) * 2 // slices grow by doubling
	traceCost = 128
)

// NewAllocTraceSet returns an empty set that takes from budget.
func NewAllocTraceSet(budget *DecodeBudget) *AllocTraceSet {
	return &AllocTraceSet{budget: budget, traces: map[traceKey]*tracePieces{}}
}

// Add keeps m's piece if m is of kind MarkAllocTrace (other marks are
// ignored). Once the budget is spent, pieces are counted, not kept.
func (s *AllocTraceSet) Add(m Mark) {
	if m.Kind != MarkAllocTrace {
		return
	}
	if s.errs.budget != nil {
		s.errs.skipped++
		return
	}
	k := traceKey{m.T, m.GPU, m.PID}
	head, data, _ := strings.Cut(m.Text, " ")
	is, ns, _ := strings.Cut(head, "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if err1 != nil || err2 != nil || n < 1 || n > 1<<16 || i < 0 || i >= n {
		s.errs.add(fmt.Errorf("%w: gpu %d pid %d: piece %.40q", ErrAllocTrace, m.GPU, m.PID, head))
		return
	}
	p, ok := s.traces[k]
	cost := int64(len(m.Text)) + pieceCost
	if !ok {
		cost += traceCost
	}
	if err := s.budget.take(cost, "allocator trace pieces"); err != nil {
		s.errs.budget = err
		s.errs.skipped++
		return
	}
	if !ok {
		p = &tracePieces{n: n}
		s.traces[k] = p
		s.keys = append(s.keys, k)
	}
	if p.n != n {
		s.errs.add(fmt.Errorf("%w: gpu %d pid %d: piece %s of another trace (of %d pieces)", ErrAllocTrace, m.GPU, m.PID, head, p.n))
		return
	}
	p.data = append(p.data, tracePiece{i, data})
}

// Traces decodes the traces gathered, ordered by GPU then PID, and says
// what was left out (see AllocTraces). The set is empty after it.
func (s *AllocTraceSet) Traces() ([]AllocTrace, error) {
	var out []AllocTrace
	for _, k := range s.keys {
		t, err := s.decode(k, s.traces[k])
		delete(s.traces, k)
		if err != nil {
			if errors.Is(err, ErrDecodeBudget) {
				s.errs.budget = err
				s.errs.skipped++
			} else {
				s.errs.add(fmt.Errorf("gpu %d pid %d: %w", k.gpu, k.pid, err))
			}
			continue
		}
		out = append(out, t)
	}
	s.keys = nil
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].GPU != out[j].GPU {
			return out[i].GPU < out[j].GPU
		}
		return out[i].PID < out[j].PID
	})
	if s.errs.n == 0 && s.errs.budget == nil {
		return out, nil
	}
	e := s.errs
	return out, &e
}

// decode joins one trace's pieces and decodes them.
func (s *AllocTraceSet) decode(k traceKey, p *tracePieces) (AllocTrace, error) {
	if s.errs.budget != nil {
		return AllocTrace{}, s.errs.budget
	}
	sort.SliceStable(p.data, func(i, j int) bool { return p.data[i].i < p.data[j].i })
	var size int64
	for j, d := range p.data {
		if d.i != j {
			if d.i < j {
				return AllocTrace{}, fmt.Errorf("%w: piece %d of %d repeated", ErrAllocTrace, d.i, p.n)
			}
			return AllocTrace{}, fmt.Errorf("%w: piece %d of %d missing", ErrAllocTrace, j, p.n)
		}
		size += int64(base64.StdEncoding.DecodedLen(len(d.data)))
	}
	if len(p.data) != p.n {
		return AllocTrace{}, fmt.Errorf("%w: piece %d of %d missing", ErrAllocTrace, len(p.data), p.n)
	}
	if err := s.budget.take(size, "an allocator trace's pieces, decoded"); err != nil {
		return AllocTrace{}, err
	}
	b := make([]byte, 0, size)
	for _, d := range p.data {
		var err error
		if b, err = base64.StdEncoding.AppendDecode(b, []byte(d.data)); err != nil || d.data == "" {
			return AllocTrace{}, fmt.Errorf("%w: piece %d of %d empty or not base64", ErrAllocTrace, d.i, p.n)
		}
	}
	p.data = nil
	r, maxOps, err := traceReader(b, s.budget)
	if err != nil {
		if errors.Is(err, ErrDecodeBudget) {
			return AllocTrace{}, err
		}
		return AllocTrace{}, fmt.Errorf("%w: %v", ErrAllocTrace, err)
	}
	return decodeTrace(r, maxOps, s.budget)
}

// traceErrors is what was wrong with a run's allocator traces, in one
// line however many pieces were bad: how many, and the first.
type traceErrors struct {
	n     int
	first error
	// budget is the error of the first trace past the budget; skipped
	// counts the pieces and traces left out after it.
	budget  error
	skipped int
}

func (e *traceErrors) add(err error) {
	if e.n == 0 {
		e.first = err
	}
	e.n++
}

func (e *traceErrors) Error() string {
	var parts []string
	switch {
	case e.n == 1:
		parts = append(parts, e.first.Error())
	case e.n > 1:
		parts = append(parts, fmt.Sprintf("%d malformed pieces or traces, the first: %v", e.n, e.first))
	}
	if e.budget != nil {
		parts = append(parts, fmt.Sprintf("%d pieces or traces left out: %v", e.skipped, e.budget))
	}
	return strings.Join(parts, "; ")
}

func (e *traceErrors) Unwrap() []error {
	var out []error
	for _, err := range []error{e.first, e.budget} {
		if err != nil {
			out = append(out, err)
		}
	}
	return out
}
