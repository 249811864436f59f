package wire

import (
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
		`{"type":"sample","t_ns":1e3,"gpu":-1,"used_bytes":5}`,
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
		}
		if !strings.HasSuffix(string(out), "\n") {
			t.Fatalf("written line %q has no newline", out)
		}
		r2, err := p.Parse(out[:len(out)-1])
		if err != nil {
			t.Fatalf("written line %q does not parse: %v", out, err)
		}
		if r.Type != r2.Type || r.Device != r2.Device || r.Proc != r2.Proc || r.Torch != r2.Torch || r.Mark != r2.Mark {
			t.Fatalf("round trip of %q:\n got %+v\nwant %+v", line, r2, r)
		}
	})
}

func TestParseErrorsNameTheField(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ line, want string }{
		{`{"type":"sample","t_ns":1,"gpu":-2,"used_bytes":5}`, `sample: "gpu" is negative (-2)`},
		{`{"type":"proc","t_ns":1,"gpu":0,"used_bytes":5}`, `proc: missing "pid"`},
		{`{"type":"mark","t_ns":1,"kind":"x","step":-3}`, `mark: "step" is negative (-3)`},
		{`{"type":"torch","t_ns":"1"}`, `torch: "t_ns": want an integer, got string`},
		{`{"type":"nope"}`, `unknown type "nope"`},
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
