package storage

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

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
// probe sends: a quarter to a ninth of them on the H200 traces, at most
// 384 KiB a process, half the socket's 1 MiB a second in base64); the
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
// allocation made before it and not yet freed.
func DecodeAllocTrace(b []byte) (AllocTrace, error) {
	next := func(what string) (uint64, error) {
		v, n := binary.Uvarint(b)
		if n <= 0 {
			return 0, fmt.Errorf("%w: %s: bad varint", ErrAllocTrace, what)
		}
		b = b[n:]
		return v, nil
	}
	var head [7]uint64
	for i, what := range []string{"version", "gpu", "pid", "steps", "segments", "segment bytes", "ops"} {
		v, err := next(what)
		if err != nil {
			return AllocTrace{}, err
		}
		head[i] = v
	}
	if head[0] != 1 && head[0] != 2 {
		return AllocTrace{}, fmt.Errorf("%w: version %d (want 1 or 2)", ErrAllocTrace, head[0])
	}
	if head[6] > uint64(len(b)) || head[1] > MaxGPUIndex || head[2] > 1<<31 || head[3] > 1<<31 || head[4] > 1<<31 || head[5] > 1<<62 {
		return AllocTrace{}, fmt.Errorf("%w: header out of range", ErrAllocTrace)
	}
	t := AllocTrace{GPU: int(head[1]), PID: int(head[2]), Steps: int(head[3]), Segments: int(head[4]),
		SegmentBytes: int64(head[5]), Ops: make([]AllocOp, head[6])}
	live := make([]bool, len(t.Ops))
	for i := range t.Ops {
		v, err := next("op " + strconv.Itoa(i))
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
			size, err := next("op " + strconv.Itoa(i) + "'s size")
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
	if len(b) != 0 {
		return AllocTrace{}, fmt.Errorf("%w: %d bytes after the last op", ErrAllocTrace, len(b))
	}
	return t, nil
}

// maxTraceBytes bounds a trace's bytes once inflated: a million requests
// take about 3 MB.
const maxTraceBytes = 256 << 20

// inflateTrace returns the trace bytes b carries: as they are where b
// starts with a version (1 or 2), else b's zlib stream (its first byte
// 0x78), inflated to at most maxTraceBytes.
func inflateTrace(b []byte) ([]byte, error) {
	if len(b) == 0 || b[0] != 0x78 {
		return b, nil
	}
	z, err := zlib.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	out, err := io.ReadAll(io.LimitReader(z, maxTraceBytes+1))
	if err != nil {
		return nil, err
	}
	if len(out) > maxTraceBytes {
		return nil, fmt.Errorf("more than %d bytes inflated", maxTraceBytes)
	}
	return out, nil
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
// MarkAllocTrace (others are ignored), ordered by GPU then PID. A trace
// whose pieces are missing, repeated or malformed is left out, and the
// error says which.
func AllocTraces(marks []Mark) ([]AllocTrace, error) {
	type key struct {
		t        int64
		gpu, pid int
	}
	pieces := map[key][]string{}
	var keys []key
	var errs []error
	for _, m := range marks {
		if m.Kind != MarkAllocTrace {
			continue
		}
		k := key{m.T, m.GPU, m.PID}
		head, data, _ := strings.Cut(m.Text, " ")
		is, ns, _ := strings.Cut(head, "/")
		i, err1 := strconv.Atoi(is)
		n, err2 := strconv.Atoi(ns)
		if err1 != nil || err2 != nil || n < 1 || n > 1<<16 || i < 0 || i >= n {
			errs = append(errs, fmt.Errorf("%w: gpu %d pid %d: piece %q", ErrAllocTrace, m.GPU, m.PID, head))
			continue
		}
		p, ok := pieces[k]
		if !ok {
			p = make([]string, n)
			keys = append(keys, k)
		}
		if len(p) != n || p[i] != "" {
			errs = append(errs, fmt.Errorf("%w: gpu %d pid %d: piece %s repeated or of another trace", ErrAllocTrace, m.GPU, m.PID, head))
			continue
		}
		p[i] = data
		pieces[k] = p
	}
	var out []AllocTrace
	for _, k := range keys {
		var b []byte
		ok := true
		for i, s := range pieces[k] {
			d, err := base64.StdEncoding.DecodeString(s)
			if s == "" || err != nil {
				errs = append(errs, fmt.Errorf("%w: gpu %d pid %d: piece %d of %d missing or not base64", ErrAllocTrace, k.gpu, k.pid, i, len(pieces[k])))
				ok = false
				break
			}
			b = append(b, d...)
		}
		if !ok {
			continue
		}
		b, err := inflateTrace(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: gpu %d pid %d: %v", ErrAllocTrace, k.gpu, k.pid, err))
			continue
		}
		t, err := DecodeAllocTrace(b)
		if err != nil {
			errs = append(errs, fmt.Errorf("gpu %d pid %d: %w", k.gpu, k.pid, err))
			continue
		}
		out = append(out, t)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].GPU != out[j].GPU {
			return out[i].GPU < out[j].GPU
		}
		return out[i].PID < out[j].PID
	})
	return out, errors.Join(errs...)
}
