package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/recorder"
)

// statusWriter draws record's status line on a terminal: each call
// returns to the line's start (\r), writes the line and erases what a
// longer previous one left (\x1b[K).
type statusWriter struct {
	w     io.Writer
	drawn bool
}

// newStatusWriter returns a status writer for w, or nil when w is not a
// terminal (a file or a pipe gets nothing extra).
func newStatusWriter(w io.Writer) *statusWriter {
	w = unescaped(w) // the line's own control sequences must reach the terminal
	f, ok := w.(*os.File)
	if !ok || !isTerminal(f) {
		return nil
	}
	return &statusWriter{w: w}
}

func (s *statusWriter) show(st recorder.Status) {
	fmt.Fprintf(s.w, "\r%s\x1b[K", statusLine(st))
	s.drawn = true
}

// clear erases the line, so that the summary starts on a clean one.
func (s *statusWriter) clear() {
	if s.drawn {
		fmt.Fprint(s.w, "\r\x1b[K")
	}
}

// statusLine renders the status as one line without a newline, e.g.
//
//	● 1m5s  gpu0 12.30 GiB/140.40 GiB  gpu1 –  epoch 2 step 340  6500 samples  0 missed
func statusLine(s recorder.Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "● %s", s.Elapsed.Truncate(time.Second))
	for _, g := range s.GPUs {
		fmt.Fprintf(&b, "  gpu%d ", g.Index)
		switch {
		case !g.Seen:
			b.WriteString("–")
		case g.Total > 0:
			fmt.Fprintf(&b, "%s/%s", analysis.FormatBytes(g.Used), analysis.FormatBytes(g.Total))
		default:
			b.WriteString(analysis.FormatBytes(g.Used))
		}
	}
	if s.Epoch >= 0 {
		fmt.Fprintf(&b, "  epoch %d", s.Epoch)
	}
	if s.Step >= 0 {
		fmt.Fprintf(&b, " step %d", s.Step)
	}
	fmt.Fprintf(&b, "  %d samples  %d missed", s.Samples, s.Missed)
	return b.String()
}
