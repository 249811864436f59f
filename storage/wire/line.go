package wire

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/valyala/fastjson"
)

// A line is one JSON object, "type" first:
//
//	{"type":"sample","t_ns":…,"gpu":…,"used_bytes":…,"reserved_bytes":…}
//	{"type":"proc","t_ns":…,"gpu":…,"pid":…,"used_bytes":…}
//	{"type":"torch","t_ns":…,"gpu":…,"pid":…,"rank":…,"allocated_bytes":…,…}
//	{"type":"mark","t_ns":…,"kind":"step","step":…,…}
//	{"type":"run",…} and {"type":"gpu",…} (files only: a run's metadata)
//
// docs/format.md lists every field, which are required and their units.

// Type is the type of a line.
type Type uint8

// The line types. Run and GPU lines describe a run; the others are data.
const (
	TypeRun Type = iota + 1
	TypeGPU
	TypeSample
	TypeProc
	TypeTorch
	TypeMark
)

var typeNames = [...]string{TypeRun: "run", TypeGPU: "gpu", TypeSample: "sample", TypeProc: "proc", TypeTorch: "torch", TypeMark: "mark"}

// String is the type's name as the "type" field spells it.
func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// IsData reports whether lines of this type carry a sample or a mark.
func (t Type) IsData() bool { return t >= TypeSample && t <= TypeMark }

// Record is one parsed line: Type says which field is set. A run or gpu
// line is left for the caller to decode from Raw (its own copy).
type Record struct {
	Type   Type
	Device DeviceSample
	Proc   ProcSample
	Torch  TorchSample
	Mark   Mark
	Raw    []byte
}

// Parser parses single lines. The zero value is ready; it is not safe for
// concurrent use (it reuses its parse buffers).
type Parser struct{ p fastjson.Parser }

// Parse parses one line (without its newline). Errors say what is wrong
// with it; validity that depends on the run (declared GPUs, order) is
// checked when the record is stored. Unknown fields are ignored.
func (ps *Parser) Parse(l []byte) (Record, error) {
	v, err := ps.p.ParseBytes(l)
	if err != nil {
		return Record{}, fmt.Errorf("malformed JSON: %v", err)
	}
	o, err := v.Object()
	if err != nil {
		return Record{}, fmt.Errorf("want a JSON object, got %s", v.Type())
	}
	f := fields{o: o}
	typ := f.str("type", true)
	if f.err != nil {
		return Record{}, f.err
	}
	var r Record
	switch typ {
	case "run":
		r.Type, r.Raw = TypeRun, append([]byte(nil), l...)
	case "gpu":
		r.Type, r.Raw = TypeGPU, append([]byte(nil), l...)
	case "sample":
		r.Type = TypeSample
		r.Device = DeviceSample{T: f.int("t_ns", true, 0), GPU: f.gpu(),
			Used: f.int("used_bytes", true, 0), Reserved: f.int("reserved_bytes", false, 0)}
	case "proc":
		r.Type = TypeProc
		r.Proc = ProcSample{T: f.int("t_ns", true, 0), GPU: f.gpu(),
			PID: int(f.int("pid", true, 0)), Used: f.int("used_bytes", true, 0)}
	case "torch":
		r.Type = TypeTorch
		r.Torch = TorchSample{T: f.int("t_ns", true, 0), GPU: f.gpu(),
			PID: int(f.int("pid", true, 0)), Rank: f.opt("rank"),
			Allocated: f.int("allocated_bytes", true, 0), Reserved: f.int("reserved_bytes", true, 0),
			InactiveSplit: f.int("inactive_split_bytes", false, 0), PeakAllocated: f.int("peak_allocated_bytes", false, 0),
			Segments: f.int("segments", false, 0), AllocRetries: f.int("alloc_retries", false, 0), OOMs: f.int("ooms", false, 0)}
		r.Torch.Active = f.int("active_bytes", false, r.Torch.Allocated)
	case "mark":
		r.Type = TypeMark
		r.Mark = Mark{T: f.int("t_ns", true, 0), Kind: MarkKind(f.str("kind", true)), Epoch: f.opt("epoch"),
			Step: f.opt("step"), Rank: f.opt("rank"), GPU: f.opt("gpu"), PID: f.opt("pid"),
			Code: f.opt("code"), Text: f.str("text", false)}
	default:
		return Record{}, fmt.Errorf("unknown type %q (want run, gpu, sample, proc, torch or mark)", typ)
	}
	if f.err != nil {
		return Record{}, fmt.Errorf("%s: %w", typ, f.err)
	}
	if g, ok := r.gpu(); ok && g < 0 {
		return Record{}, fmt.Errorf("%s: \"gpu\" is negative (%d)", typ, g)
	}
	return r, nil
}

// gpu is the GPU of a sample line; ok is false for other lines.
func (r *Record) gpu() (gpu int, ok bool) {
	switch r.Type {
	case TypeSample:
		return r.Device.GPU, true
	case TypeProc:
		return r.Proc.GPU, true
	case TypeTorch:
		return r.Torch.GPU, true
	}
	return 0, false
}

// fields reads typed fields of one object, remembering the first error.
type fields struct {
	o   *fastjson.Object
	err error
}

func (f *fields) fail(format string, args ...any) {
	if f.err == nil {
		f.err = fmt.Errorf(format, args...)
	}
}

func (f *fields) int(key string, required bool, def int64) int64 {
	v := f.o.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		if required {
			f.fail("missing %q", key)
		}
		return def
	}
	if v.Type() != fastjson.TypeNumber {
		f.fail("%q: want an integer, got %s", key, v.Type())
		return def
	}
	n, err := v.Int64()
	if err != nil {
		f.fail("%q: not an integer: %s", key, v)
	}
	return n
}

// gpu reads the required "gpu" of a sample; Parse refuses a negative one
// after the other fields.
func (f *fields) gpu() int { return int(f.int("gpu", true, 0)) }

func (f *fields) opt(key string) int {
	n := f.int(key, false, None)
	if n < 0 && n != None {
		f.fail("%q is negative (%d)", key, n)
	}
	if n > 1<<31 {
		f.fail("%q is too large (%d)", key, n)
	}
	return int(n)
}

func (f *fields) str(key string, required bool) string {
	v := f.o.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		if required {
			f.fail("missing %q", key)
		}
		return ""
	}
	b, err := v.StringBytes()
	if err != nil {
		f.fail("%q: want a string, got %s", key, v.Type())
	}
	return string(b)
}

func appendKV(b []byte, key string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func appendHead(b []byte, typ Type, t int64, gpu int) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, typ.String()...)
	b = append(b, '"')
	b = appendKV(b, "t_ns", t)
	if gpu >= 0 {
		b = appendKV(b, "gpu", int64(gpu))
	}
	return b
}

// AppendDevice appends s as one line, newline included.
func AppendDevice(b []byte, s DeviceSample) []byte {
	b = appendHead(b, TypeSample, s.T, s.GPU)
	b = appendKV(b, "used_bytes", s.Used)
	b = appendKV(b, "reserved_bytes", s.Reserved)
	return append(b, '}', '\n')
}

// AppendProc appends s as one line, newline included.
func AppendProc(b []byte, s ProcSample) []byte {
	b = appendHead(b, TypeProc, s.T, s.GPU)
	b = appendKV(b, "pid", int64(s.PID))
	b = appendKV(b, "used_bytes", s.Used)
	return append(b, '}', '\n')
}

// AppendTorch appends s as one line, newline included.
func AppendTorch(b []byte, s TorchSample) []byte {
	b = appendHead(b, TypeTorch, s.T, s.GPU)
	b = appendKV(b, "pid", int64(s.PID))
	if s.Rank != None {
		b = appendKV(b, "rank", int64(s.Rank))
	}
	b = appendKV(b, "allocated_bytes", s.Allocated)
	b = appendKV(b, "reserved_bytes", s.Reserved)
	b = appendKV(b, "active_bytes", s.Active)
	b = appendKV(b, "inactive_split_bytes", s.InactiveSplit)
	b = appendKV(b, "peak_allocated_bytes", s.PeakAllocated)
	b = appendKV(b, "segments", s.Segments)
	b = appendKV(b, "alloc_retries", s.AllocRetries)
	b = appendKV(b, "ooms", s.OOMs)
	return append(b, '}', '\n')
}

// AppendMark appends m as one line, newline included; absent fields are
// left out.
func AppendMark(b []byte, m Mark) []byte {
	b = appendHead(b, TypeMark, m.T, -1)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(m.Kind))
	for _, f := range []struct {
		k string
		v int
	}{{"epoch", m.Epoch}, {"step", m.Step}, {"rank", m.Rank}, {"gpu", m.GPU}, {"pid", m.PID}, {"code", m.Code}} {
		if f.v != None {
			b = appendKV(b, f.k, int64(f.v))
		}
	}
	if m.Text != "" {
		b = append(b, `,"text":`...)
		b = appendJSONString(b, m.Text)
	}
	return append(b, '}', '\n')
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}
