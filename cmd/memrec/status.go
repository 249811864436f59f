package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/recorder"
)

// statusWriter draws record's status line on a terminal: each call
// returns to the line's start (\r), writes the line and erases what a
// longer previous one left (\x1b[K).
type statusWriter struct {
	w     io.Writer
	f     *os.File // the terminal, asked for its width at each line
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
	return &statusWriter{w: w, f: f}
}

// show draws the line fitted to the terminal's width less one column: a
// line that wrapped would leave its first rows behind at every redraw.
func (s *statusWriter) show(st recorder.Status) {
	fmt.Fprintf(s.w, "\r%s\x1b[K", fitStatus(st, terminalWidth(s.f)-1))
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
func statusLine(s recorder.Status) string { return fitStatus(s, 0) }

// fitStatus renders the status in at most width columns (0: any), giving
// up detail in turn: each GPU's total, then each GPU for the fullest
// one and a count, then the sample count, and last cutting the line with
// an ellipsis.
func fitStatus(s recorder.Status, width int) string {
	head := fmt.Sprintf("● %s", s.Elapsed.Truncate(time.Second))
	var marks string
	if s.Epoch >= 0 {
		marks += fmt.Sprintf("  epoch %d", s.Epoch)
	}
	if s.Step >= 0 {
		if marks == "" {
			marks = " "
		}
		marks += fmt.Sprintf(" step %d", s.Step)
	}
	counts := fmt.Sprintf("  %d samples  %d missed", s.Samples, s.Missed)
	forms := []string{
		head + gpuParts(s.GPUs, true) + marks + counts,
		head + gpuParts(s.GPUs, false) + marks + counts,
		head + fullestGPU(s.GPUs) + marks + counts,
		head + fullestGPU(s.GPUs) + marks + fmt.Sprintf("  %d missed", s.Missed),
	}
	for _, f := range forms {
		if width <= 0 || utf8.RuneCountInString(f) <= width {
			return f
		}
	}
	r := []rune(forms[len(forms)-1])
	if width < 2 {
		return string(r[:max(width, 0)])
	}
	return string(r[:width-1]) + "…"
}

// gpuParts is each GPU's used memory, with its total when withTotal.
func gpuParts(gpus []recorder.GPUStatus, withTotal bool) string {
	var b strings.Builder
	for _, g := range gpus {
		fmt.Fprintf(&b, "  gpu%d ", g.Index)
		switch {
		case !g.Seen:
			b.WriteString("–")
		case g.Total > 0 && withTotal:
			fmt.Fprintf(&b, "%s/%s", units.FormatBytes(g.Used), units.FormatBytes(g.Total))
		default:
			b.WriteString(units.FormatBytes(g.Used))
		}
	}
	return b.String()
}

// fullestGPU names the GPU with the most memory used, among how many.
func fullestGPU(gpus []recorder.GPUStatus) string {
	var top *recorder.GPUStatus
	for i := range gpus {
		if g := &gpus[i]; g.Seen && (top == nil || g.Used > top.Used) {
			top = g
		}
	}
	if top == nil {
		return fmt.Sprintf("  %d GPUs –", len(gpus))
	}
	s := fmt.Sprintf("  %d GPUs, fullest gpu%d %s", len(gpus), top.Index, units.FormatBytes(top.Used))
	if top.Total > 0 {
		s += "/" + units.FormatBytes(top.Total)
	}
	return s
}
