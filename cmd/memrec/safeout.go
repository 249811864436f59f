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
// gigabytes of it), so it tests 8 bytes at a time: a word with no byte
// at or above 0x7f and none below 0x20 is plain; only a word with one
// (most often a line's newline) is looked at byte by byte. The tests are
// the classic bit tricks: x-0x20 in every byte borrows into a byte's high
// bit, where x's own high bit is clear, exactly when some byte is below
// 0x20; likewise x^0x7f for a byte equal to 0x7f.
func plain(p []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(p) >= 8 {
		x := binary.LittleEndian.Uint64(p)
		d := x ^ (0x7f * ones)
		if x&highs|(x-0x20*ones)&^x&highs|(d-ones)&^d&highs != 0 && !plainBytes(p[:8]) {
			return false
		}
		p = p[8:]
	}
	return plainBytes(p)
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
