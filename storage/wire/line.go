package wire

import (
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"

	"github.com/valyala/fastjson"
)

// A line is one JSON object, "type" first:
//
//	{"type":"sample","t_ns":…,"gpu":…,"used_bytes":…,"driver_reserved_bytes":…}
//	{"type":"proc","t_ns":…,"gpu":…,"pid":…,"used_bytes":…}
//	{"type":"torch","t_ns":…,"gpu":…,"pid":…,"rank":…,"allocated_bytes":…,…}
//	{"type":"mark","t_ns":…,"kind":"step","step":…,…}
//	{"type":"sites","t_ns":…,"gpu":…,"pid":…,"reason":…,"untracked":{…},"sites":[{…},…],"other":{…}}
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
	TypeSites
)

var typeNames = [...]string{TypeRun: "run", TypeGPU: "gpu", TypeSample: "sample", TypeProc: "proc", TypeTorch: "torch", TypeMark: "mark", TypeSites: "sites"}

// String is the type's name as the "type" field spells it.
func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return "type(" + strconv.Itoa(int(t)) + ")"
}

// IsData reports whether lines of this type carry a sample or a mark.
func (t Type) IsData() bool { return t >= TypeSample && t <= TypeSites }

// Record is one parsed line: Type says which field is set. A run or gpu
// line is left for the caller to decode from Raw (its own copy).
type Record struct {
	Type   Type
	Device DeviceSample
	Proc   ProcSample
	Torch  TorchSample
	Mark   Mark
	Sites  []SiteSample // one snapshot: its SiteUntracked entry first
	// Budget is the watched model's budget a torch line carries; nil if none.
	Budget *BudgetSample
	Raw    []byte
}

// Parser parses single lines. The zero value is ready; it is not safe for
// concurrent use (it reuses its parse buffers).
type Parser struct {
	p   fastjson.Parser
	rec Record // the record being read: the tables set fields through pointers, which must not escape per line
}

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
	ps.rec = Record{}
	r := &ps.rec
	switch typ {
	case "run":
		r.Type, r.Raw = TypeRun, append([]byte(nil), l...)
	case "gpu":
		r.Type, r.Raw = TypeGPU, append([]byte(nil), l...)
	case "sample":
		r.Type = TypeSample
		r.Device = DeviceSample{T: f.int("t_ns", true, 0), GPU: f.gpu()}
		readFields(&f, &r.Device, DeviceFields)
	case "proc":
		r.Type = TypeProc
		r.Proc = ProcSample{T: f.int("t_ns", true, 0), GPU: f.gpu()}
		readFields(&f, &r.Proc, ProcFields)
	case "torch":
		r.Type = TypeTorch
		r.Torch = TorchSample{T: f.int("t_ns", true, 0), GPU: f.gpu()}
		readFields(&f, &r.Torch, TorchFields)
		if b, ok := f.budget(r.Torch); ok {
			r.Budget = &b
		}
	case "mark":
		r.Type = TypeMark
		r.Mark = Mark{T: f.int("t_ns", true, 0), Kind: MarkKind(f.str("kind", true))}
		readFields(&f, &r.Mark, MarkFields)
		r.Mark.Text = f.str("text", false)
	case "sites":
		r.Type = TypeSites
		r.Sites = f.sites()
	default:
		return Record{}, fmt.Errorf("unknown type %q (want run, gpu, sample, proc, torch, mark or sites)", typ)
	}
	if f.err != nil {
		return Record{}, fmt.Errorf("%s: %w", typ, f.err)
	}
	if g, ok := r.gpu(); ok && g < 0 {
		return Record{}, fmt.Errorf("%s: \"gpu\" is negative (%d)", typ, g)
	}
	return *r, nil
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
	case TypeSites:
		if len(r.Sites) > 0 {
			return r.Sites[0].GPU, true
		}
	}
	return 0, false
}

// MaxSites bounds the sites of one "sites" line, so that the rows of a
// snapshot add up inside an int64 (storage.MaxFigure each).
const MaxSites = 4096

// sites reads a "sites" line: its head, then one SiteSample for the
// untracked blocks, one per site and one for "other".
func (f *fields) sites() []SiteSample {
	head := SiteSample{T: f.int("t_ns", true, 0), GPU: f.gpu(), PID: int(f.int("pid", true, 0)),
		Rank: f.opt("rank"), Reason: SitesReason(f.str("reason", true)), Epoch: f.opt("epoch"), Name: f.str("name", false),
		SinceNS: f.int("since_ns", false, 0), SampledEvery: f.sampling("sampled_every")}
	if head.SinceNS < 0 {
		f.fail("%q is negative (%d)", "since_ns", head.SinceNS)
	}
	untracked := head
	untracked.File, untracked.Bad = SiteUntracked, f.count("bad")
	if u := f.object("untracked"); u != nil {
		untracked.LiveBytes, untracked.LiveBlocks = u.count("live_bytes"), u.count("live_blocks")
		untracked.AllocBytes, untracked.FreedBytes = u.count("alloc_bytes"), u.count("freed_bytes")
		f.keep(u)
	}
	out := []SiteSample{untracked}
	v := f.o.Get("sites")
	if v != nil && v.Type() != fastjson.TypeNull {
		arr, err := v.Array()
		if err != nil {
			f.fail("%q: want an array, got %s", "sites", v.Type())
		}
		if len(arr) > MaxSites {
			f.fail("%q: %d sites (at most %d; a probe adds the rest up as \"other\")", "sites", len(arr), MaxSites)
			arr = nil
		}
		for i, e := range arr {
			o, err := e.Object()
			if err != nil {
				f.fail("sites[%d]: want an object, got %s", i, e.Type())
				break
			}
			g := fields{o: o}
			s := head
			s.File, s.Line, s.Func = g.str("file", true), int(g.count("line")), g.str("func", false)
			s.Stack = g.stack("stack")
			s.LiveBytes, s.LiveBlocks = g.count("live_bytes"), g.count("live_blocks")
			s.AllocBytes, s.Allocs = g.count("alloc_bytes"), g.count("allocs")
			s.FreedBytes, s.Frees = g.count("freed_bytes"), g.count("frees")
			if s.File == SiteUntracked || s.File == SiteOther {
				g.fail("%q is not a file", s.File)
			}
			if g.err != nil {
				f.fail("sites[%d]: %w", i, g.err)
				break
			}
			out = append(out, s)
		}
	}
	if o := f.object("other"); o != nil {
		s := head
		s.File, s.Sites = SiteOther, o.count("sites")
		s.LiveBytes, s.LiveBlocks = o.count("live_bytes"), o.count("live_blocks")
		f.keep(o)
		out = append(out, s)
	}
	return out
}

// object returns the fields of the object under key, nil if absent.
func (f *fields) object(key string) *fields {
	v := f.o.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		return nil
	}
	o, err := v.Object()
	if err != nil {
		f.fail("%q: want an object, got %s", key, v.Type())
		return nil
	}
	return &fields{o: o, name: key}
}

// keep passes a sub-object's first error on, named.
func (f *fields) keep(g *fields) {
	if g.err != nil {
		f.fail("%s: %w", g.name, g.err)
	}
}

// count reads an optional integer that may not be negative (zero if absent).
func (f *fields) count(key string) int64 {
	n := f.int(key, false, 0)
	if n < 0 {
		f.fail("%q is negative (%d)", key, n)
	}
	return n
}

// stack reads an optional array of strings as lines.
func (f *fields) stack(key string) string {
	v := f.o.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		return ""
	}
	arr, err := v.Array()
	if err != nil {
		f.fail("%q: want an array of strings, got %s", key, v.Type())
		return ""
	}
	lines := make([]string, 0, len(arr))
	for _, e := range arr {
		b, err := e.StringBytes()
		if err != nil {
			f.fail("%q: want an array of strings", key)
			return ""
		}
		lines = append(lines, strings.ReplaceAll(string(b), "\n", " "))
	}
	return strings.Join(lines, "\n")
}

// fields reads typed fields of one object, remembering the first error.
type fields struct {
	o    *fastjson.Object
	err  error
	name string // of a sub-object, for messages
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

// sampling reads an optional share of steps as "one in N": 0 when absent,
// else a finite number of at least 1, kept to three decimals.
func (f *fields) sampling(key string) float64 {
	v := f.o.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		return 0
	}
	x, err := v.Float64()
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) || x < 1 || x > 1e9 {
		f.fail("%q: want a number from 1 to 1e9, got %s", key, v)
		return 0
	}
	return math.Round(x*1000) / 1000
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
	return appendInt(b, v)
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
	b = appendFields(appendHead(b, TypeSample, s.T, s.GPU), &s, DeviceFields)
	return append(b, '}', '\n')
}

// AppendProc appends s as one line, newline included.
func AppendProc(b []byte, s ProcSample) []byte {
	b = appendFields(appendHead(b, TypeProc, s.T, s.GPU), &s, ProcFields)
	return append(b, '}', '\n')
}

// AppendTorch appends s as one line, newline included.
func AppendTorch(b []byte, s TorchSample) []byte {
	b = appendFields(appendHead(b, TypeTorch, s.T, s.GPU), &s, TorchFields)
	return append(b, '}', '\n')
}

// SeriesFormat writes the lines of one series as AppendDevice, AppendProc
// and AppendTorch do, with less work a line: the text that every line of
// the series repeats (its type, GPU, key fields such as the pid, and the
// field names) is made once; the time comes already formatted, since a
// run's series share their ticks and an export writes each time once for
// all of them; and values equal to those of the line before are copied
// from it, the whole rest of the line when they all are, since a series'
// figures mostly repeat from one sample to the next (NVML's used memory
// moves only when an allocator takes or gives back a segment). It is not
// safe for concurrent use.
type SeriesFormat[T any] struct {
	head  []byte // up to the time's digits
	steps []formatStep[T]
	tail  []byte
	last  []byte // the last line written; nil before the first
	lastT int    // the length of its time
	// lastVals: the values of the last line's fields (those of steps
	// with a get, in order); vals: Append's values of the line it writes.
	lastVals, vals []int64
}

// formatStep writes text, then the value get returns unless get is nil; a
// value that may be left out (an optional one that is None, a later one
// that is 0) is left out with its text (its name).
type formatStep[T any] struct {
	text    []byte
	get     func(T) int64
	omits   bool  // a value equal to omitted is left out
	omitted int64 // None for an optional field, 0 for a later one
	// from, to: where its text and digits lie in the last line; equal
	// before the first line, or when the value was absent.
	from, to int
}

// NewSeriesFormat prepares the lines of type typ of one series on gpu (none
// if negative) with fields fs; key holds the values of the key fields,
// which are the same on every line of a series.
func NewSeriesFormat[T any](typ Type, gpu int, fs []Field[T], key T) *SeriesFormat[T] {
	f := &SeriesFormat[T]{head: appendHead(nil, typ, 0, -1)}
	f.head = f.head[:len(f.head)-1] // the 0 given for the time
	var fixed []byte                // constant text waiting for the next step
	if gpu >= 0 {
		fixed = appendKV(fixed, "gpu", int64(gpu))
	}
	for i := range fs {
		d := &fs[i]
		if d.Key {
			fixed = appendKV(fixed, d.Name, d.Get(key))
			continue
		}
		omitted, omits := d.omitted()
		if omits && len(fixed) > 0 { // written even when the value is not
			f.steps = append(f.steps, formatStep[T]{text: fixed})
			fixed = nil
		}
		name := appendKV(fixed, d.Name, 0)
		f.steps = append(f.steps, formatStep[T]{text: name[:len(name)-1], get: d.Get, omits: omits, omitted: omitted})
		fixed = nil
	}
	f.tail = append(fixed, '}', '\n')
	return f
}

// Append appends v as one line, newline included; tNS is v's time as
// strconv.AppendInt writes it.
func (f *SeriesFormat[T]) Append(b, tNS []byte, v *T) []byte {
	f.vals = f.vals[:0]
	for i := range f.steps {
		if s := &f.steps[i]; s.get != nil {
			f.vals = append(f.vals, s.get(*v))
		}
	}
	return f.AppendFields(b, tNS, f.vals)
}

// AppendFields appends the line of a sample at time tNS (as
// strconv.AppendInt writes it) whose fields that are not keys have the
// values vals, in the order of the table NewSeriesFormat was given (what
// storage's Iter.BlockFields reads): Append without a T.
func (f *SeriesFormat[T]) AppendFields(b, tNS []byte, vals []int64) []byte {
	if f.last != nil && slices.Equal(vals, f.lastVals) {
		return f.again(b, tNS)
	}
	start := len(b)
	b = append(b, f.head...)
	b = append(b, tNS...)
	k := 0
	for i := range f.steps {
		s := &f.steps[i]
		if s.get == nil {
			b = append(b, s.text...)
			continue
		}
		v := vals[k]
		k++
		at := len(b) - start
		switch {
		case s.omits && v == s.omitted:
		case s.to > s.from && v == f.lastVals[k-1]: // copied from the last line
			b = append(b, f.last[s.from:s.to]...)
		default:
			b = append(b, s.text...)
			b = appendInt(b, v)
		}
		s.from, s.to = at, len(b)-start
	}
	b = append(b, f.tail...)
	f.last, f.lastT = append(f.last[:0], b[start:]...), len(tNS)
	f.lastVals = append(f.lastVals[:0], vals...)
	return b
}

// AppendAgain appends a line with the values of the last line Append
// wrote, at time tNS; it must follow an Append.
func (f *SeriesFormat[T]) AppendAgain(b, tNS []byte) []byte { return f.again(b, tNS) }

// again copies the last line and writes tNS over its time: one copy, where
// head, time and rest would be three.
func (f *SeriesFormat[T]) again(b, tNS []byte) []byte {
	if len(tNS) != f.lastT {
		b = append(b, f.head...)
		b = append(b, tNS...)
		return append(b, f.last[len(f.head)+f.lastT:]...)
	}
	start := len(b)
	b = append(b, f.last...)
	copy(b[start+len(f.head):], tNS)
	return b
}

// AppendMark appends m as one line, newline included; absent fields are
// left out.
func AppendMark(b []byte, m Mark) []byte {
	var t [20]byte
	return AppendMarkAt(b, strconv.AppendInt(t[:0], m.T, 10), &m)
}

// AppendMarkAt appends m as AppendMark does, its time given as
// strconv.AppendInt writes it: an export formats each time once for all
// the lines that share it.
func AppendMarkAt(b, tNS []byte, m *Mark) []byte {
	b = append(b, markHead...)
	b = append(b, tNS...)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, string(m.Kind))
	b = appendMarkInts(b, m)
	if m.Text != "" {
		b = append(b, `,"text":`...)
		b = appendJSONString(b, m.Text)
	}
	return append(b, '}', '\n')
}

// appendMarkInts appends m's integer fields as appendFields(b, m,
// MarkFields) does, reading them directly: the table's Get copies the
// whole mark for each field, and an export writes a step mark a GPU a
// step (TestAppendMarkIntsMatchesTable keeps the two alike).
func appendMarkInts(b []byte, m *Mark) []byte {
	b = appendSet(b, `,"epoch":`, m.Epoch)
	b = appendSet(b, `,"step":`, m.Step)
	b = appendSet(b, `,"rank":`, m.Rank)
	b = appendSet(b, `,"gpu":`, m.GPU)
	b = appendSet(b, `,"pid":`, m.PID)
	return appendSet(b, `,"code":`, m.Code)
}

// appendSet appends key and v where v is set (not None).
func appendSet(b []byte, key string, v int) []byte {
	if v == None {
		return b
	}
	return appendInt(append(b, key...), int64(v))
}

// markHead is a mark line up to its time's digits (the 0 given for the
// time dropped).
var markHead = func() []byte { h := appendHead(nil, TypeMark, 0, -1); return h[:len(h)-1] }()

// appendJSONString appends s quoted as encoding/json writes it, with DEL
// and the C1 controls escaped as well (EscapeControls). Most strings (a
// mark's kind, a file name) are printable ASCII that json leaves as it
// is: those are copied, without Marshal's allocation and reflection (a
// step mark a GPU, millions in an export).
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return EscapeControls(b, q)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// EscapeControls appends JSON text j (as encoding/json writes it: valid
// UTF-8, every C0 control escaped) to b with DEL and the C1 controls
// (U+0080 to U+009F) written as \u00XX too, which in a JSON string means
// the same character. A terminal then shows the text as it is: nothing in
// it is a control sequence, so an export can go to one without memrec's
// filter of control characters (the JSON Lines are gigabytes).
func EscapeControls(b, j []byte) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(j); i++ {
		var c byte
		switch {
		case j[i] == 0x7f:
			c = 0x7f
		case j[i] == 0xc2 && i+1 < len(j) && j[i+1] >= 0x80 && j[i+1] <= 0x9f:
			c = j[i+1] // U+0080..U+009F is C2 80..C2 9F
			i++
		default:
			b = append(b, j[i])
			continue
		}
		b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
	}
	return b
}

// AppendSites appends one snapshot as one "sites" line, newline included.
// rows share their head (time, GPU, process, reason, epoch, name, window);
// it is taken from the first. The SiteUntracked and SiteOther entries
// become the line's "untracked" and "other" objects.
func AppendSites(b []byte, rows []SiteSample) []byte {
	if len(rows) == 0 {
		return b
	}
	h := rows[0]
	b = appendHead(b, TypeSites, h.T, h.GPU)
	b = appendKV(b, "pid", int64(h.PID))
	if h.Rank != None {
		b = appendKV(b, "rank", int64(h.Rank))
	}
	b = append(b, `,"reason":`...)
	b = appendJSONString(b, string(h.Reason))
	if h.Epoch != None {
		b = appendKV(b, "epoch", int64(h.Epoch))
	}
	if h.Name != "" {
		b = append(b, `,"name":`...)
		b = appendJSONString(b, h.Name)
	}
	if h.SinceNS != 0 {
		b = appendKV(b, "since_ns", h.SinceNS)
	}
	if h.SampledEvery > 1 {
		b = append(b, `,"sampled_every":`...)
		b = strconv.AppendFloat(b, h.SampledEvery, 'f', -1, 64)
	}
	var other *SiteSample
	for i := range rows {
		s := &rows[i]
		switch s.File {
		case SiteUntracked:
			if s.Bad != 0 {
				b = appendKV(b, "bad", s.Bad)
			}
			b = append(b, `,"untracked":{"live_bytes":`...)
			b = strconv.AppendInt(b, s.LiveBytes, 10)
			b = appendKV(b, "live_blocks", s.LiveBlocks)
			b = appendKV(b, "alloc_bytes", s.AllocBytes)
			b = appendKV(b, "freed_bytes", s.FreedBytes)
			b = append(b, '}')
		case SiteOther:
			other = s
		}
	}
	b = append(b, `,"sites":[`...)
	first := true
	for i := range rows {
		s := &rows[i]
		if s.File == SiteUntracked || s.File == SiteOther {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendSite(b, s)
	}
	b = append(b, ']')
	if other != nil {
		b = append(b, `,"other":{"sites":`...)
		b = strconv.AppendInt(b, other.Sites, 10)
		b = appendKV(b, "live_bytes", other.LiveBytes)
		b = appendKV(b, "live_blocks", other.LiveBlocks)
		b = append(b, '}')
	}
	return append(b, '}', '\n')
}

// appendSite appends one entry of a sites line's "sites" array.
func appendSite(b []byte, s *SiteSample) []byte {
	b = append(b, `{"site":`...)
	b = appendJSONString(b, s.Label())
	b = append(b, `,"file":`...)
	b = appendJSONString(b, s.File)
	b = appendKV(b, "line", int64(s.Line))
	b = append(b, `,"func":`...)
	b = appendJSONString(b, s.Func)
	if s.Stack != "" {
		b = append(b, `,"stack":[`...)
		for j, l := range strings.Split(s.Stack, "\n") {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, l)
		}
		b = append(b, ']')
	}
	b = appendKV(b, "live_bytes", s.LiveBytes)
	b = appendKV(b, "live_blocks", s.LiveBlocks)
	if s.Allocs != 0 || s.Frees != 0 || s.AllocBytes != 0 || s.FreedBytes != 0 {
		b = appendKV(b, "alloc_bytes", s.AllocBytes)
		b = appendKV(b, "allocs", s.Allocs)
		b = appendKV(b, "freed_bytes", s.FreedBytes)
		b = appendKV(b, "frees", s.Frees)
	}
	return append(b, '}')
}

// appendInt appends v in decimal as strconv.AppendInt does, the digits
// written in place two at a time, where strconv writes them into a
// buffer of its own and copies them from it.
func appendInt(b []byte, v int64) []byte {
	if v < 0 {
		return strconv.AppendInt(b, v, 10)
	}
	u := uint64(v)
	// Its digits: t, the whole part of log10(2^bits.Len64(u)) (log10(2)
	// is about 1233/4096), is their number or one less.
	t := bits.Len64(u) * 1233 >> 12
	n := t
	if u >= pow10[t] {
		n++
	}
	n = max(n, 1)
	if cap(b)-len(b) < n {
		b = slices.Grow(b, n)
	}
	b = b[:len(b)+n]
	PutDigits(b[len(b)-n:], u)
	return b
}

// PutDigits writes the last len(d) decimal digits of u into d, padded with
// zeros on the left, two digits a division.
func PutDigits(d []byte, u uint64) {
	i := len(d)
	for ; i >= 2; i -= 2 {
		q := u / 100
		r := (u - q*100) * 2
		d[i-2], d[i-1] = digitPairs[r], digitPairs[r+1]
		u = q
	}
	if i == 1 {
		d[0] = byte('0' + u%10)
	}
}

// pow10 is 10^i.
var pow10 = [20]uint64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19}

// digitPairs is 00 to 99.
const digitPairs = "00010203040506070809" +
	"10111213141516171819" +
	"20212223242526272829" +
	"30313233343536373839" +
	"40414243444546474849" +
	"50515253545556575859" +
	"60616263646566676869" +
	"70717273747576777879" +
	"80818283848586878889" +
	"90919293949596979899"
