package storage

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
)

// bombMarks are the marks of one trace (GPU 0, pid 1, at t) whose header
// claims ops allocations of 0 bytes and whose zlib stream holds them all:
// each op is one zero byte, so a few KiB of marks inflate to ops bytes.
func bombMarks(t int64, ops uint64) []Mark { return claimMarks(t, ops, ops) }

// claimMarks is bombMarks whose header claims ops but whose stream holds
// only held of them: a bomb refused at its header need not be generated
// whole, which is slow for hundreds of MiB under the race detector.
func claimMarks(t int64, ops, held uint64) []Mark {
	var head []byte
	for _, v := range []uint64{1, 0, 1, 1, 0, 0, ops} {
		head = binary.AppendUvarint(head, v)
	}
	var z bytes.Buffer
	w, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	w.Write(head)
	zero := make([]byte, 1<<16)
	for left := held; left > 0; left -= min(left, uint64(len(zero))) {
		w.Write(zero[:min(left, uint64(len(zero)))])
	}
	w.Close()
	return piecesOf(t, z.Bytes())
}

// piecesOf cuts b into marks the way AllocTrace.Marks does.
func piecesOf(t int64, b []byte) []Mark {
	n := (len(b) + allocTracePiece - 1) / allocTracePiece
	var out []Mark
	for i := 0; i < n; i++ {
		m := NewMark(t, MarkAllocTrace)
		m.GPU, m.PID = 0, 1
		m.Text = fmt.Sprintf("%d/%d %s", i, n, base64.StdEncoding.EncodeToString(b[i*allocTracePiece:min(len(b), (i+1)*allocTracePiece)]))
		out = append(out, m)
	}
	return out
}

// allocated runs f and returns the bytes it allocated on the heap (the
// peak of what it holds is at most that).
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestAllocTracesBudgetAtTheBound decodes hostile traces with a budget
// right at what they take and one byte under it: at the bound they
// decode, and allocate no more than the budget counted (plus a fixed
// slack for the decoder's own small values); under it they are refused
// with ErrDecodeBudget. A trace that claims far more than the budget
// allocates almost nothing before it is refused. The old decoder
// inflated up to 256 MiB a trace and then allocated 17 bytes an op,
// whatever the sum over a run's traces.
func TestAllocTracesBudgetAtTheBound(t *testing.T) {
	const slack = 256 << 10
	for _, ops := range []uint64{1, 1 << 10, 1 << 20, 4 << 20} {
		marks := bombMarks(5, ops)
		probe := NewDecodeBudget(1 << 40)
		if trs, err := AllocTraces(marks, probe); err != nil || len(trs) != 1 || uint64(len(trs[0].Ops)) != ops {
			t.Fatalf("%d ops: %d traces, %v", ops, len(trs), err)
		}
		cost := probe.Used()
		if min := int64(ops) * allocOpCost; cost < min {
			t.Fatalf("%d ops: the budget counted %d bytes, less than the ops alone (%d)", ops, cost, min)
		}
		at := NewDecodeBudget(cost)
		var trs []AllocTrace
		var err error
		got := allocated(func() { trs, err = AllocTraces(marks, at) })
		if err != nil || len(trs) != 1 {
			t.Errorf("%d ops at the bound %d: %d traces, %v", ops, cost, len(trs), err)
		}
		if got > uint64(cost)+slack {
			t.Errorf("%d ops at the bound %d: allocated %d bytes", ops, cost, got)
		}
		under := NewDecodeBudget(cost - 1)
		got = allocated(func() { trs, err = AllocTraces(marks, under) })
		if len(trs) != 0 || !errors.Is(err, ErrDecodeBudget) {
			t.Errorf("%d ops one byte past the bound: %d traces, %v", ops, len(trs), err)
		}
		if got > uint64(cost)+slack || under.Used() > under.Limit() {
			t.Errorf("%d ops one byte past the bound: allocated %d bytes, budget used %d of %d", ops, got, under.Used(), under.Limit())
		}
	}
	// 256 Mi ops claimed in a few KiB that inflate to 16 MiB (four times
	// the bound on what the refusal allocates, so a decoder that inflated
	// the stream before it read the header fails): refused at the header,
	// past MaxTraceOps; the most ops a trace may have, past what is left of
	// a budget: refused before they are allocated.
	var err error
	marks := claimMarks(5, 256<<20, 16<<20)
	if got := allocated(func() { _, err = AllocTraces(marks, NewDecodeBudget(DefaultDecodeBudget)) }); got > 4<<20 || !errors.Is(err, ErrAllocTrace) || !strings.Contains(err.Error(), "ops, more than") {
		t.Errorf("a bomb claiming 256 Mi ops: allocated %d bytes, %v", got, err)
	}
	marks = bombMarks(5, MaxTraceOps)
	if got := allocated(func() { _, err = AllocTraces(marks, NewDecodeBudget(MaxTraceOps*allocOpCost-1)) }); got > 4<<20 || !errors.Is(err, ErrDecodeBudget) {
		t.Errorf("MaxTraceOps past the budget: allocated %d bytes, %v", got, err)
	}
	if _, err := AllocTraces(bombMarks(5, MaxTraceOps+1), NewDecodeBudget(1<<40)); !errors.Is(err, ErrAllocTrace) {
		t.Errorf("MaxTraceOps+1 ops: %v", err)
	}
}

// TestAllocTracesBudgetIsShared: one budget over several runs' traces
// holds their sum. Each of two traces fits the budget alone; the second
// of them, read with the same budget, is refused.
func TestAllocTracesBudgetIsShared(t *testing.T) {
	marks := bombMarks(5, 1<<20)
	probe := NewDecodeBudget(1 << 40)
	if _, err := AllocTraces(marks, probe); err != nil {
		t.Fatal(err)
	}
	b := NewDecodeBudget(probe.Used() * 3 / 2)
	if trs, err := AllocTraces(marks, b); err != nil || len(trs) != 1 {
		t.Fatalf("first run: %d traces, %v", len(trs), err)
	}
	if trs, err := AllocTraces(marks, b); len(trs) != 0 || !errors.Is(err, ErrDecodeBudget) {
		t.Errorf("second run with the same budget: %d traces, %v", len(trs), err)
	}
	// Within one run, two traces at other times share it too.
	b = NewDecodeBudget(probe.Used() * 3 / 2)
	if trs, err := AllocTraces(append(bombMarks(5, 1<<20), bombMarks(6, 1<<20)...), b); len(trs) != 1 || !errors.Is(err, ErrDecodeBudget) {
		t.Errorf("two traces of one run: %d traces, %v", len(trs), err)
	}
}

// TestAllocTracesManyBadPieces: 20 000 marks "0/65536 AAAA", each of its
// own trace, cost their text and a little more, not a slot for each of
// the 65 536 pieces they announce (the old code made those, 1 MiB a
// mark), and the error is one line with the count and the first.
func TestAllocTracesManyBadPieces(t *testing.T) {
	var marks []Mark
	for i := 0; i < 20000; i++ {
		m := NewMark(int64(i), MarkAllocTrace)
		m.GPU, m.PID, m.Text = 0, 1, "0/65536 AAAA"
		marks = append(marks, m)
	}
	var err error
	var trs []AllocTrace
	b := NewDecodeBudget(DefaultDecodeBudget)
	got := allocated(func() { trs, err = AllocTraces(marks, b) })
	if len(trs) != 0 || !errors.Is(err, ErrAllocTrace) {
		t.Fatalf("%d traces, %v", len(trs), err)
	}
	if got > 32<<20 {
		t.Errorf("allocated %d bytes for %d marks", got, len(marks))
	}
	if msg := err.Error(); strings.Count(msg, "\n") != 0 || !strings.Contains(msg, "20000 ") || !strings.Contains(msg, "piece 1 of 65536 missing") {
		t.Errorf("error %q: want one line with the count and the first", msg)
	}
}

// FuzzAllocTraceMarks reads arbitrary marks as trace pieces (one mark a
// line: its time, GPU and pid from the line's first bytes, its text the
// rest) within a small budget: nothing panics, the budget is never
// overspent, it counted every op it returned, and every trace read back
// round-trips through its own marks.
func FuzzAllocTraceMarks(f *testing.F) {
	tr := AllocTrace{GPU: 1, PID: 7, Steps: 2, Ops: []AllocOp{{Size: 512}, {Failed: true, Size: 1 << 30}, {Free: true, Of: 0}}}
	var seed []byte
	for _, m := range tr.Marks(5) {
		seed = append(append(append(seed, 5, 1, 7), m.Text...), '\n')
	}
	f.Add(seed)
	f.Add([]byte("\x00\x00\x010/65536 AAAA\n\x01\x00\x010/65536 AAAA\n"))
	f.Add([]byte("\x00\x00\x010/2 eJw=\n\x00\x00\x010/2 eJw=\n\x00\x00\x011/2 \n"))
	big := bombMarks(5, 1<<16)
	var b []byte
	for _, m := range big {
		b = append(append(append(b, 5, 0, 1), m.Text...), '\n')
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, in []byte) {
		var marks []Mark
		for _, line := range bytes.Split(in, []byte("\n")) {
			if len(line) < 3 {
				continue
			}
			m := NewMark(int64(line[0]), MarkAllocTrace)
			m.GPU, m.PID, m.Text = int(line[1]), int(line[2]), string(line[3:])
			marks = append(marks, m)
		}
		budget := NewDecodeBudget(1 << 20)
		trs, err := AllocTraces(marks, budget)
		if budget.Used() > budget.Limit() {
			t.Fatalf("budget overspent: %d of %d", budget.Used(), budget.Limit())
		}
		var ops int64
		for _, tr := range trs {
			ops += int64(len(tr.Ops))
		}
		if ops*allocOpCost > budget.Used() {
			t.Fatalf("%d ops returned, %d bytes counted", ops, budget.Used())
		}
		if err != nil && strings.Count(err.Error(), "\n") > 0 {
			t.Fatalf("error of several lines: %q", err)
		}
		for _, tr := range trs {
			again, err := AllocTraces(tr.Marks(9), NewDecodeBudget(DefaultDecodeBudget))
			if err != nil || len(again) != 1 || !reflect.DeepEqual(again[0], tr) {
				t.Fatalf("round trip of %+v: %v", tr, err)
			}
		}
	})
}
