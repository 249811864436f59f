package storage

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestAllocTraceRoundTrip(t *testing.T) {
	tr := AllocTrace{GPU: 3, PID: 4242, Steps: 3, Segments: 2, SegmentBytes: 22 << 20,
		Ops: []AllocOp{{Size: 8}, {Size: 3 << 20}, {Free: true, Of: 0}, {Size: 1 << 40}, {Free: true, Of: 3}, {Free: true, Of: 1}}}
	got, err := DecodeAllocTrace(tr.Encode())
	if err != nil || !reflect.DeepEqual(got, tr) {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, tr)
	}
	// Many ops span several marks, which reassemble in any order.
	big := AllocTrace{GPU: 1, PID: 7, Steps: 3}
	for i := 0; i < 40000; i++ {
		big.Ops = append(big.Ops, AllocOp{Size: int64(i*4096 + 1)}, AllocOp{Free: true, Of: int32(2 * i)})
	}
	marks := big.Marks(99)
	if len(marks) < 2 {
		t.Fatalf("%d marks", len(marks))
	}
	for _, m := range marks {
		if len(m.Text) > 4<<10 || m.Kind != MarkAllocTrace || m.GPU != 1 || m.PID != 7 {
			t.Fatalf("mark %v: %d bytes of text", m.Kind, len(m.Text))
		}
	}
	marks[0], marks[1] = marks[1], marks[0]
	other := tr.Marks(5)
	all := append(append([]Mark{NewMark(1, "step")}, marks...), other...)
	trs, err := AllocTraces(all, NewDecodeBudget(DefaultDecodeBudget))
	if err != nil || len(trs) != 2 || !reflect.DeepEqual(trs[0], big) || !reflect.DeepEqual(trs[1], tr) {
		t.Fatalf("reassembled %d traces, %v", len(trs), err)
	}
	// A piece lost leaves that trace out and says so.
	trs, err = AllocTraces(append(marks[1:], other...), NewDecodeBudget(DefaultDecodeBudget))
	if len(trs) != 1 || !errors.Is(err, ErrAllocTrace) {
		t.Fatalf("with a piece lost: %d traces, %v", len(trs), err)
	}
}

// TestAllocTraceFromTheProbe decodes the bytes python/tests/test_alloctrace.py
// has the probe encode.
func TestAllocTraceFromTheProbe(t *testing.T) {
	b := []byte{1, 0, 7, 3, 1, 0x80, 0x80, 0x80, 0x01, 3, 0x10, 0xD0, 0x0F, 0x05}
	want := AllocTrace{PID: 7, Steps: 3, Segments: 1, SegmentBytes: 2 << 20, Ops: []AllocOp{{Size: 8}, {Size: 1000}, {Free: true, Of: 0}}}
	if got, err := DecodeAllocTrace(b); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, %v", got, err)
	}
	// test_a_caught_oom_is_a_failed_request: version 2, a request of 1 GiB
	// that failed, then the free of op 1.
	b2 := append([]byte{2}, b[1:9]...)
	b2 = append(b2, 5, 0x10, 0xD0, 0x0F, 0x05, 0x01, 0x80, 0x80, 0x80, 0x80, 0x04, 0x07)
	want.Ops = append(want.Ops, AllocOp{Failed: true, Size: 1 << 30}, AllocOp{Free: true, Of: 1})
	if got, err := DecodeAllocTrace(b2); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("%+v, %v", got, err)
	}
	if !bytes.Equal(want.Encode(), b2) {
		t.Errorf("encoded %x, want %x", want.Encode(), b2)
	}
}

func TestAllocTraceMalformed(t *testing.T) {
	good := AllocTrace{Steps: 1, Ops: []AllocOp{{Size: 512}, {Free: true, Of: 0}}}.Encode()
	for name, b := range map[string][]byte{
		"empty":                         {},
		"version 3":                     append([]byte{3}, good[1:]...),
		"a failed request in version 1": {1, 0, 0, 0, 0, 0, 1, 1, 0x80, 0x04},
		"truncated":                     good[:len(good)-1],
		"trailing bytes":                append(append([]byte(nil), good...), 0),
		"free of nothing":               AllocTrace{Ops: []AllocOp{{Size: 512}, {Free: true, Of: 0}, {Free: true, Of: 0}}}.Encode(),
		"more ops than bytes":           {1, 0, 0, 0, 0, 0, 0xff, 0xff, 0x03},
	} {
		if _, err := DecodeAllocTrace(b); !errors.Is(err, ErrAllocTrace) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzAllocTrace(f *testing.F) {
	f.Add(AllocTrace{Steps: 1, Ops: []AllocOp{{Size: 512}, {Free: true, Of: 0}}}.Encode())
	f.Add(AllocTrace{Steps: 1, Ops: []AllocOp{{Size: 512}, {Failed: true, Size: 1 << 30}, {Free: true, Of: 0}}}.Encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := DecodeAllocTrace(b)
		if err != nil {
			return
		}
		again, err := DecodeAllocTrace(tr.Encode())
		if err != nil || !reflect.DeepEqual(again, tr) {
			t.Fatalf("round trip: %v", err)
		}
	})
}

// TestAllocTracePiecesRawOrCompressed: marks carry the trace's zlib
// stream (what Marks and the probe send) or, from probes before it, its
// bytes as they are; both read back. A stream cut short is an error that
// names the trace.
func TestAllocTracePiecesRawOrCompressed(t *testing.T) {
	tr := AllocTrace{GPU: 2, PID: 9, Steps: 3, Ops: []AllocOp{{Size: 512}, {Failed: true, Size: 1 << 30}, {Free: true, Of: 0}}}
	piece := func(b []byte) []Mark {
		m := NewMark(5, MarkAllocTrace)
		m.GPU, m.PID, m.Text = 2, 9, "0/1 "+base64.StdEncoding.EncodeToString(b)
		return []Mark{m}
	}
	var z bytes.Buffer
	w := zlib.NewWriter(&z)
	w.Write(tr.Encode())
	w.Close()
	for name, marks := range map[string][]Mark{"raw": piece(tr.Encode()), "zlib": piece(z.Bytes()), "Marks": tr.Marks(5)} {
		if got, err := AllocTraces(marks, NewDecodeBudget(DefaultDecodeBudget)); err != nil || len(got) != 1 || !reflect.DeepEqual(got[0], tr) {
			t.Errorf("%s: %+v, %v", name, got, err)
		}
	}
	if got, err := AllocTraces(piece(z.Bytes()[:z.Len()-3]), NewDecodeBudget(DefaultDecodeBudget)); len(got) != 0 || !errors.Is(err, ErrAllocTrace) || !strings.Contains(err.Error(), "gpu 2 pid 9") {
		t.Errorf("cut stream: %d traces, %v", len(got), err)
	}
}
