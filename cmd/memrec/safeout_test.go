package main

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSafeWriter(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text\twith tab\n", "plain text\twith tab\n"},
		{"run \x1b]0;pwned\x07 \x1b[2J", `run \u001b]0;pwned\u0007 \u001b[2J`},
		{"cr\rdel\x7f", `cr\u000ddel\u007f`},
		{"c1 \u009b31m ok é 日本", `c1 \u009b31m ok é 日本`},
		{"bad \xff byte", "bad \ufffd byte"},
	} {
		var b bytes.Buffer
		w := newSafeWriter(&b)
		// Byte by byte too: a rune cut between writes is put together.
		for _, split := range []bool{false, true} {
			b.Reset()
			if split {
				for i := range len(tc.in) {
					w.Write([]byte{tc.in[i]})
				}
			} else {
				w.Write([]byte(tc.in))
			}
			w.Flush()
			if b.String() != tc.want {
				t.Errorf("%q (split %v): got %q, want %q", tc.in, split, b.String(), tc.want)
			}
		}
	}
}

// TestPlainMatchesBytewise: the 32-bytes-at-a-time test agrees with the
// byte-by-byte rule on every byte value at every offset of a word, and on
// random text.
func TestPlainMatchesBytewise(t *testing.T) {
	base := []byte(`{"type":"sample","t_ns":1764430000000000000,"gpu":3}` + "\n\t")
	for c := range 256 {
		for at := range 40 { // the first 32 tested a word at a time, the rest bytewise
			p := append([]byte(nil), base[:40]...)
			p[at] = byte(c)
			if got, want := plain(p), plainBytes(p); got != want {
				t.Fatalf("byte %#x at %d: plain %v, bytewise %v", c, at, got, want)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		p := make([]byte, rng.IntN(80))
		for i := range p {
			p[i] = byte(0x1c + rng.IntN(0x66)) // around both edges: 0x1c..0x81
		}
		if got, want := plain(p), plainBytes(p); got != want {
			t.Fatalf("%q: plain %v, bytewise %v", p, got, want)
		}
	}
}

// BenchmarkPlain tests export lines for bytes to escape, 32 at a time
// (plain, what the writer uses) and one at a time (plainBytes, the rule
// it was before), in the same run.
func BenchmarkPlain(b *testing.B) {
	line := []byte(`{"type":"sample","t_ns":1764430000012345000,"gpu":3,"used_bytes":21474836480,"reserved_bytes":644939776}` + "\n")
	p := bytes.Repeat(line, 4096)
	for _, bc := range []struct {
		name string
		f    func([]byte) bool
	}{{"words", plain}, {"bytes", plainBytes}} {
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(p)))
			for b.Loop() {
				if !bc.f(p) {
					b.Fatal("export lines not plain")
				}
			}
		})
	}
}

// TestTerminalEscapesShownEscaped imports a run whose name, host, tags, GPU
// name and mark text carry terminal escape sequences: no command prints one
// raw, and export still gives back the same strings.
func TestTerminalEscapesShownEscaped(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	const evil = `\u001b]0;pwned\u0007\u001b[2J\u009b31m\u007f\u0085`
	name := "r" + evil
	lines := []string{
		`{"type":"run","name":"` + name + `","host":"h` + evil + `","start_ns":1000000000000000000,"interval_ns":10000000,"tags":{"k` + evil + `":"v` + evil + `"}}`,
		`{"type":"gpu","gpu":0,"uuid":"GPU-` + evil + `","name":"G` + evil + `","total_bytes":1000000000}`,
	}
	for i := range 200 {
		lines = append(lines, `{"type":"sample","t_ns":`+itoa(1000000000000000000+int64(i)*10000000)+`,"gpu":0,"used_bytes":`+itoa(int64(1000+i))+`}`)
	}
	lines = append(lines, `{"type":"mark","t_ns":1000000000050000000,"kind":"event","text":"m`+evil+`"}`)
	in := filepath.Join(dir, "evil.jsonl")
	if err := os.WriteFile(in, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var rawName string
	json.Unmarshal([]byte(`"`+name+`"`), &rawName)

	check := func(args []string, out, errs string) {
		t.Helper()
		for _, s := range []string{out, errs} {
			if strings.ContainsAny(s, "\x1b\x07\u009b\x7f\u0085") {
				t.Errorf("%v prints an escape raw: %q", args, s)
			}
		}
	}
	for _, args := range [][]string{
		{"import", in},
		{"runs"},
		{"runs", "--check"},
		{"analyze", rawName},
		{"compare", rawName, rawName},
		{"tag", rawName, "x" + "\x1b[2J=y\x1b[2J"},
		{"export", rawName},
		{"rm", "no\x1b[2J"},
	} {
		out, errs, _ := run(t, db, "", args...)
		check(args, out, errs)
		if args[0] == "runs" && len(args) == 1 && !strings.Contains(out, `r\u001b]0;pwned\u0007`) {
			t.Errorf("runs does not show the name escaped: %q", out)
		}
		if args[0] == "export" {
			first := strings.SplitN(out, "\n", 2)[0]
			var r struct{ Name string }
			if err := json.Unmarshal([]byte(first), &r); err != nil || r.Name != rawName {
				t.Errorf("export's run line %q gives name %q (%v), want %q", first, r.Name, err, rawName)
			}
		}
	}
}

func itoa(v int64) string { b, _ := json.Marshal(v); return string(b) }
