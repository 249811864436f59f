package wire

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzParse feeds the parser arbitrary lines (the socket's input is
// untrusted): it must never panic, and a data line it accepts must come
// back unchanged after it is written out and parsed again.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"type":"sample","t_ns":1,"gpu":0,"used_bytes":5,"reserved_bytes":2}`,
		`{"type":"proc","t_ns":1,"gpu":1,"pid":7,"used_bytes":5}`,
		`{"type":"torch","t_ns":1,"gpu":0,"pid":7,"rank":0,"allocated_bytes":5,"reserved_bytes":9,"ooms":1}`,
		`{"type":"mark","t_ns":1,"kind":"step","step":3,"text":"a\"b\n"}`,
		`{"type":"mark","t_ns":-5,"kind":"","epoch":2147483648}`,
		`{"type":"run","name":"x"}`,
		`{"type":"sites","t_ns":5,"gpu":1,"pid":7,"rank":1,"reason":"epoch_end","epoch":3,"bad":2,"untracked":{"live_bytes":9,"live_blocks":1},"sites":[{"file":"/a/t.py","line":52,"func":"f","stack":["t.py:80 main"],"live_bytes":100,"live_blocks":2,"alloc_bytes":4,"allocs":1}],"other":{"sites":3,"live_bytes":6,"live_blocks":3}}`,
		`{"type":"sample","t_ns":1e3,"gpu":-1,"used_bytes":5}`,
		// Budget fields ride on torch lines (memrec.watch), hostile values too.
		`{"type":"torch","t_ns":1,"gpu":0,"pid":7,"allocated_bytes":5,"reserved_bytes":9,"params_bytes":4,"grads_bytes":4,"optimizer_bytes":8,"buffers_bytes":1,"params":2,"trainable":2,"autocast":true,"optimizer":"AdamW","optimizer_state":"exp_avg,exp_avg_sq","dtype":"float32"}`,
		`{"type":"torch","t_ns":1,"gpu":0,"pid":7,"allocated_bytes":5,"reserved_bytes":9,"params_bytes":-9223372036854775808,"grads_bytes":1e300,"optimizer":"\u0000\ud800"}`,
		// Site snapshots past their bounds: a huge line number, negative bytes, a deep stack.
		`{"type":"sites","t_ns":5,"gpu":0,"pid":7,"reason":"timer","sites":[{"file":"a","line":9223372036854775807,"live_bytes":-1,"live_blocks":-1,"stack":["x","y","z","w","v"]}]}`,
		// Hostile budgets and snapshots: NaN, absurd counts, long strings, unknown keys.
		`{"type":"torch","t_ns":1,"gpu":0,"pid":7,"allocated_bytes":5,"reserved_bytes":9,"params_bytes":NaN,"params":-1,"trainable":9223372036854775807}`,
		`{"type":"torch","t_ns":1,"gpu":0,"pid":7,"allocated_bytes":5,"reserved_bytes":9,"params_bytes":1,"dtype":"` + strings.Repeat("\u0000", 300) + `","zzz":[{}]}`,
		`{"type":"sites","t_ns":5,"gpu":0,"pid":7,"reason":"oom","sampled_every":NaN,"since_ns":9223372036854775807,"other":{"sites":1e19}}`,
		`{"type":"sites","t_ns":5,"gpu":0,"pid":7,"reason":"oom","epoch":2147483648,"sites":[{"file":"` + strings.Repeat("é", 500) + `","line":1,"yyy":{"a":1}},{"file":"b","line":1}]}`,
		`[1,2]`, `{`, `{"type":7}`, "",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		var p Parser
		r, err := p.Parse(line)
		if err != nil || !r.Type.IsData() {
			return
		}
		if !utf8.ValidString(string(r.Mark.Kind)) || !utf8.ValidString(r.Mark.Text) {
			return // written out as U+FFFD (encoding/json), so not the same string
		}
		var out []byte
		switch r.Type {
		case TypeSample:
			out = AppendDevice(nil, r.Device)
		case TypeProc:
			out = AppendProc(nil, r.Proc)
		case TypeTorch:
			out = AppendTorch(nil, r.Torch)
		case TypeMark:
			out = AppendMark(nil, r.Mark)
		case TypeSites:
			out = AppendSites(nil, r.Sites)
			for _, s := range r.Sites {
				if !utf8.ValidString(string(s.Reason) + s.Name + s.File + s.Func + s.Stack) {
					return
				}
			}
		}
		if !strings.HasSuffix(string(out), "\n") {
			t.Fatalf("written line %q has no newline", out)
		}
		if got := seriesLine(r); got != nil && string(got) != string(out) {
			t.Fatalf("SeriesFormat wrote\n%s\nAppend wrote\n%s", got, out)
		}
		r2, err := p.Parse(out[:len(out)-1])
		if err != nil {
			t.Fatalf("written line %q does not parse: %v", out, err)
		}
		if r.Type != r2.Type || r.Device != r2.Device || r.Proc != r2.Proc || r.Torch != r2.Torch || r.Mark != r2.Mark ||
			!slices.Equal(r.Sites, r2.Sites) {
			t.Fatalf("round trip of %q:\n got %+v\nwant %+v", line, r2, r)
		}
	})
}

// seriesLine writes a sample, proc or torch record through a SeriesFormat
// made for its series; nil for other records.
func seriesLine(r Record) []byte {
	tNS := func(t int64) []byte { return strconv.AppendInt(nil, t, 10) }
	switch r.Type {
	case TypeSample:
		return NewSeriesFormat(TypeSample, r.Device.GPU, DeviceFields, DeviceSample{}).Append(nil, tNS(r.Device.T), &r.Device)
	case TypeProc:
		return NewSeriesFormat(TypeProc, r.Proc.GPU, ProcFields, ProcSample{PID: r.Proc.PID}).Append(nil, tNS(r.Proc.T), &r.Proc)
	case TypeTorch:
		return NewSeriesFormat(TypeTorch, r.Torch.GPU, TorchFields, TorchSample{PID: r.Torch.PID}).Append(nil, tNS(r.Torch.T), &r.Torch)
	}
	return nil
}

// A SeriesFormat writes the lines the Append functions write, line after
// line of one series: absent optional fields (a torch line without a
// rank), values that repeat, change, go absent and come back.
func TestSeriesFormatMatchesAppend(t *testing.T) {
	t.Parallel()
	torch := TorchSample{T: 1764430000010010000, GPU: 3, PID: 4103, Rank: None, Allocated: 5 << 30, Reserved: 6 << 30,
		Active: 5 << 30, InactiveSplit: 7, PeakAllocated: 1 << 33, Segments: 12, AllocRetries: 1, OOMs: 0}
	var torchs []TorchSample
	for _, change := range []func(*TorchSample){
		func(*TorchSample) {},
		func(s *TorchSample) { s.T += 10 },
		func(s *TorchSample) { s.Rank = 0 },
		func(s *TorchSample) { s.T += 10 },
		func(s *TorchSample) { s.Allocated, s.Active = 1, 2 },
		func(s *TorchSample) { s.Rank = None },
		func(s *TorchSample) { s.Rank, s.OOMs = 0, 1 },
	} {
		change(&torch)
		torchs = append(torchs, torch)
	}
	tNS := func(t int64) []byte { return strconv.AppendInt(nil, t, 10) }
	ft := NewSeriesFormat(TypeTorch, 3, TorchFields, TorchSample{PID: 4103})
	for _, s := range torchs {
		if got, want := ft.Append(nil, tNS(s.T), &s), AppendTorch(nil, s); string(got) != string(want) {
			t.Errorf("SeriesFormat wrote\n%s\nAppendTorch wrote\n%s", got, want)
		}
	}
	fd := NewSeriesFormat(TypeSample, 0, DeviceFields, DeviceSample{})
	for _, s := range []DeviceSample{{T: -5000, Used: 562036736, Reserved: 644939776}, {T: 0, Used: 562036736, Reserved: 644939776},
		{T: 10, Used: 1, Reserved: 644939776}, {T: 20, Used: 562036736, Reserved: 644939776}, {T: 30}} {
		if got, want := fd.Append(nil, tNS(s.T), &s), AppendDevice(nil, s); string(got) != string(want) {
			t.Errorf("SeriesFormat wrote\n%s\nAppendDevice wrote\n%s", got, want)
		}
	}
	again := DeviceSample{T: 40} // the values of the last line, {T: 30}
	if got, want := fd.AppendAgain(nil, tNS(again.T)), AppendDevice(nil, again); string(got) != string(want) {
		t.Errorf("AppendAgain wrote\n%s\nAppendDevice wrote\n%s", got, want)
	}
	fp := NewSeriesFormat(TypeProc, 1, ProcFields, ProcSample{PID: 4101})
	p := ProcSample{T: 1764429999999992000, GPU: 1, PID: 4101, Used: 557842432}
	if got, want := fp.Append(nil, tNS(p.T), &p), AppendProc(nil, p); string(got) != string(want) {
		t.Errorf("SeriesFormat wrote\n%s\nAppendProc wrote\n%s", got, want)
	}
}

// appendJSONString quotes as encoding/json does, DEL and the C1 controls
// escaped as well, every byte value alone and inside text, invalid UTF-8
// and HTML included.
// appendInt writes what strconv.AppendInt writes: every value next to a
// power of ten (where the digit count changes), the ends of int64, and a
// spread of values of every length, after text already in the slice and
// into a slice with no room left.
func TestAppendIntMatchesStrconv(t *testing.T) {
	vals := []int64{0, 1, 9, 1e18 - 1, 1e18, 1e18 + 1, math.MaxInt64, math.MinInt64, -1, -10}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, 10*p-1, -p)
	}
	for x := uint64(1); x < 1<<63; x = x*3 + 7 {
		vals = append(vals, int64(x), int64(x>>1), int64(x>>2))
	}
	for _, v := range vals {
		for _, b := range [][]byte{nil, []byte(`"x":`), []byte("123")} {
			want := strconv.AppendInt(slices.Clone(b), v, 10)
			if got := appendInt(slices.Clip(slices.Clone(b)), v); string(got) != string(want) {
				t.Fatalf("appendInt(%q, %d) = %q, want %q", b, v, got, want)
			}
		}
	}
}

func TestAppendJSONStringMatchesMarshal(t *testing.T) {
	t.Parallel()
	texts := []string{"", "step", "/a/train.py", "a\"b\\c", "<x>&", "é", "\u2028", "\xff\xfe", "tab\there"}
	for c := range 256 {
		texts = append(texts, string([]byte{byte(c)}), "ab"+string([]byte{byte(c)})+"cd")
	}
	for _, s := range texts {
		j, _ := json.Marshal(s)
		want := EscapeControls(nil, j)
		if got := appendJSONString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Errorf("%q: got %s, want x%s", s, got, want)
		}
	}
}

func TestParseErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ line, want string }{
		{`{"type":"sample","t_ns":1,"gpu":-2,"used_bytes":5}`, `sample: "gpu" is negative (-2)`},
		{`{"type":"proc","t_ns":1,"gpu":0,"used_bytes":5}`, `proc: missing "pid"`},
		{`{"type":"mark","t_ns":1,"kind":"x","step":-3}`, `mark: "step" is negative (-3)`},
		{`{"type":"torch","t_ns":"1"}`, `torch: "t_ns": want an integer, got string`},
		{`{"type":"nope"}`, `unknown type "nope"`},
		{`{"type":"sites","t_ns":1,"gpu":0,"pid":1}`, `sites: missing "reason"`},
		{`{"type":"sites","t_ns":1,"gpu":0,"pid":1,"reason":"x","sampled_every":0.5}`, `"sampled_every": want a number from 1 to 1e9, got 0.5`},
		{`{"type":"sites","t_ns":1,"gpu":0,"pid":1,"reason":"x","sites":[{"line":3}]}`, `sites: sites[0]: missing "file"`},
		{`{"type":"sites","t_ns":1,"gpu":0,"pid":1,"reason":"x","sites":[{"file":"a.py","line":3,"live_bytes":-1}]}`, `sites[0]: "live_bytes" is negative (-1)`},
		{`{"type":"sites","t_ns":1,"gpu":0,"pid":1,"reason":"x","untracked":{"live_blocks":"2"}}`, `untracked: "live_blocks": want an integer, got string`},
		{`{"type":"sites","t_ns":1,"gpu":0,"pid":1,"reason":"x","sites":{}}`, `"sites": want an array, got object`},
		{`{"type":"sites","t_ns":1,"gpu":0,"pid":1,"reason":"x","sites":[{"file":"<other>","line":1}]}`, `"<other>" is not a file`},
		{`[]`, `want a JSON object, got array`},
	} {
		var p Parser
		_, err := p.Parse([]byte(c.line))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.line, err, c.want)
		}
	}
}

func TestTypeString(t *testing.T) {
	t.Parallel()
	if TypeTorch.String() != "torch" || Type(99).String() != "type(99)" {
		t.Errorf("got %q and %q", TypeTorch, Type(99))
	}
}

// A probe's "sites" line becomes one SiteSample per entry, each carrying
// the line's head; the untracked entry comes first, other last.
func TestParseSites(t *testing.T) {
	t.Parallel()
	line := `{"type":"sites","t_ns":5000,"gpu":1,"pid":7,"reason":"oom","name":"n","since_ns":4000,"traced":true,"bad":2,` +
		`"untracked":{"live_bytes":9,"live_blocks":1,"alloc_bytes":3},` +
		`"sites":[{"site":"t.py:52","file":"/a/t.py","line":52,"func":"keep","stack":["t.py:80 step","t.py:99 main"],"live_bytes":100,"live_blocks":2,"alloc_bytes":4,"allocs":1,"freed_bytes":0,"frees":0},` +
		`{"file":"/a/m.py","line":7,"live_bytes":50,"live_blocks":1}],"other":{"sites":3,"live_bytes":6,"live_blocks":3}}`
	var p Parser
	r, err := p.Parse([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	head := SiteSample{T: 5000, GPU: 1, PID: 7, Rank: None, Reason: SitesOOM, Epoch: None, Name: "n", SinceNS: 4000}
	want := []SiteSample{head, head, head, head}
	want[0].File, want[0].Bad, want[0].LiveBytes, want[0].LiveBlocks, want[0].AllocBytes = SiteUntracked, 2, 9, 1, 3
	want[1].File, want[1].Line, want[1].Func, want[1].Stack = "/a/t.py", 52, "keep", "t.py:80 step\nt.py:99 main"
	want[1].LiveBytes, want[1].LiveBlocks, want[1].AllocBytes, want[1].Allocs = 100, 2, 4, 1
	want[2].File, want[2].Line, want[2].LiveBytes, want[2].LiveBlocks = "/a/m.py", 7, 50, 1
	want[3].File, want[3].Sites, want[3].LiveBytes, want[3].LiveBlocks = SiteOther, 3, 6, 3
	if r.Type != TypeSites || !slices.Equal(r.Sites, want) {
		t.Fatalf("got %+v\nwant %+v", r.Sites, want)
	}
	if got := r.Sites[1].Label(); got != "t.py:52" {
		t.Errorf("label %q", got)
	}
	if got := r.Sites[0].Label(); got != SiteUntracked {
		t.Errorf("label %q", got)
	}
	again, err := p.Parse(AppendSites(nil, r.Sites))
	if err != nil || !slices.Equal(again.Sites, want) {
		t.Fatalf("round trip: %v\n%+v", err, again.Sites)
	}
}

// TestEscapeControls: JSON text with DEL and the C1 controls escaped means
// the same strings and holds no control byte but what encoding/json
// escapes anyway; other text, multi-byte runes included, is left as it is.
func TestEscapeControls(t *testing.T) {
	for _, s := range []string{"", "plain", "\x7f", "a\u0080b\u009fc\u00a0d", "\u009b31m\x1b[2J", "é€😀", "\xff\xc2", "\xc2"} {
		j, _ := json.Marshal(s)
		got := EscapeControls([]byte("x"), j)[1:]
		for _, r := range string(got) {
			if r == 0x7f || r >= 0x80 && r <= 0x9f || r < 0x20 {
				t.Errorf("%q: %q holds control %U", s, got, r)
			}
		}
		var back, want string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %q is not JSON: %v", s, got, err)
		}
		json.Unmarshal(j, &want)
		if back != want {
			t.Errorf("%q: %q reads back as %q, want %q", s, got, back, want)
		}
	}
	if got := string(EscapeControls(nil, []byte(`"a\u00e9"`))); got != `"a\u00e9"` {
		t.Errorf("text without controls changed: %s", got)
	}
}

// TestAppendMarkIntsMatchesTable: the mark's integer fields are written
// as the table (MarkFields) would write them, every field present or
// absent in turn.
func TestAppendMarkIntsMatchesTable(t *testing.T) {
	if len(MarkFields) != 6 {
		t.Fatalf("MarkFields has %d fields; appendMarkInts writes 6", len(MarkFields))
	}
	vals := []int{None, 0, 7, 1234567890123}
	for mask := range 1 << 12 {
		m := NewMark(1, MarkStep)
		for i := range MarkFields {
			MarkFields[i].Set(&m, int64(vals[mask>>(2*i)&3]))
		}
		got, want := appendMarkInts(nil, &m), appendFields(nil, &m, MarkFields)
		if string(got) != string(want) {
			t.Fatalf("%+v: got %s, want %s", m, got, want)
		}
	}
}
