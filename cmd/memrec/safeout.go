package main

import (
	"encoding/binary"
	"io"
	"unicode/utf8"
)

// safeWriter passes text to a terminal with its control characters shown
// escaped: a run name, host, tag, GPU name or mark text comes from whoever
// wrote the data, and an escape sequence in one must not clear the screen
// or retitle the terminal when memrec prints it. Every C0 control but
// newline and tab, DEL and every C1 control is written as \u00XX, which in
// a JSON string (export, --json) means the same character; a byte that is
// not UTF-8 is written as U+FFFD. Everything memrec prints goes through
// one (see execute); a command's own child writes to the terminal directly.
type safeWriter struct {
	w    io.Writer
	rest []byte // the start of a rune cut by the end of the last Write
	buf  []byte
}

func newSafeWriter(w io.Writer) *safeWriter { return &safeWriter{w: w} }

func needsEscape(r rune) bool {
	return r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r < 0xa0
}

const hexDigits = "0123456789abcdef"

func (s *safeWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(s.rest) > 0 {
		p = append(s.rest, p...)
		s.rest = nil
	}
	// Fast path: nothing to escape and no rune cut at the end.
	if plain(p) {
		_, err := s.w.Write(p)
		return n, err
	}
	out := s.buf[:0]
	for i := 0; i < len(p); {
		c := p[i]
		if c < utf8.RuneSelf {
			if needsEscape(rune(c)) {
				out = append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
			} else {
				out = append(out, c)
			}
			i++
			continue
		}
		if !utf8.FullRune(p[i:]) {
			s.rest = append(s.rest, p[i:]...) // finished by the next Write
			break
		}
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = utf8.AppendRune(out, utf8.RuneError)
		case needsEscape(r):
			out = append(out, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&15])
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	s.buf = out
	_, err := s.w.Write(out)
	return n, err
}

// plain says whether p is printable ASCII, newlines and tabs only: what
// passes unchanged. It is most of what memrec prints (an export is
// gigabytes of it), so it tests 32 bytes at a time without a branch a
// byte. In m = x|0x80 (every byte of the word x), m-c in a byte cannot
// borrow from the next one, and its high bit is set exactly when the
// byte's low 7 bits are at least c: ge(c) below. A byte is then to escape
// when its own high bit is set, or it is at least 0x7f (DEL), below 0x09,
// or from 0x0b (past tab and newline) to 0x1f.
func plain(p []byte) bool {
	const highs = 0x8080808080808080
	for len(p) >= 32 {
		le := binary.LittleEndian
		if (notPlain(le.Uint64(p))|notPlain(le.Uint64(p[8:]))|notPlain(le.Uint64(p[16:]))|notPlain(le.Uint64(p[24:])))&highs != 0 {
			return false
		}
		p = p[32:]
	}
	return plainBytes(p)
}

// notPlain has the high bit set in each byte of x that plain refuses; its
// other bits are noise.
func notPlain(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	m := x | highs
	ge := func(c uint64) uint64 { return m - c*ones }
	return x | ge(0x7f) | ^ge(0x09) | ge(0x0b)&^ge(0x20)
}

func plainBytes(p []byte) bool {
	for _, c := range p {
		if c < 0x20 && c != '\n' && c != '\t' || c >= 0x7f {
			return false
		}
	}
	return true
}

// Flush writes an incomplete rune left at the end as U+FFFD.
func (s *safeWriter) Flush() error {
	if len(s.rest) == 0 {
		return nil
	}
	s.rest = nil
	_, err := s.w.Write([]byte(string(utf8.RuneError)))
	return err
}

// unescaped returns the writer under a safeWriter, for memrec's own control
// sequences (record's status line); any other writer is returned as it is.
func unescaped(w io.Writer) io.Writer {
	if s, ok := w.(*safeWriter); ok {
		return s.w
	}
	return w
}
