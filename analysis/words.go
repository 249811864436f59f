package analysis

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// FormatBytes writes a byte count for people: 512 B, 3.4 MiB, 1.20 GiB.
func FormatBytes(b int64) string {
	v := float64(b)
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	switch {
	case v >= 1<<30:
		return fmt.Sprintf("%s%.2f GiB", sign, v/(1<<30))
	case v >= 1<<20:
		return fmt.Sprintf("%s%.1f MiB", sign, v/(1<<20))
	case v >= 1<<10:
		return fmt.Sprintf("%s%.1f KiB", sign, v/(1<<10))
	}
	return fmt.Sprintf("%s%d B", sign, int64(v))
}

// FormatBytesPtr is FormatBytes, or "n/a" for an unknown value.
func FormatBytesPtr(b *int64) string {
	if b == nil {
		return "n/a"
	}
	return FormatBytes(*b)
}

// FormatDuration writes a duration for people: 45 s, 12 min, 3 h 10 min, 2 d 4 h.
func FormatDuration(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%.0f s", d.Seconds())
	case d < time.Hour:
		return fmt.Sprintf("%.0f min", d.Minutes())
	case d < 48*time.Hour:
		h := int(d.Hours())
		return fmt.Sprintf("%d h %d min", h, int(d.Minutes())-60*h)
	}
	days := int(d.Hours() / 24)
	return fmt.Sprintf("%d d %d h", days, int(d.Hours())-24*days)
}

// Sentence says the leak verdict of GPU gpu in plain words.
func (l Leak) Sentence(gpu int) string { return l.SentenceFor(fmt.Sprintf("GPU %d", gpu)) }

// SentenceFor says the leak verdict in plain words, naming the GPU as gpu
// (GPUReport.Label).
func (l Leak) SentenceFor(gpu string) string {
	switch l.Verdict {
	case VerdictLeak:
		var parts []string
		if l.SlopeBytesPerStep != nil {
			parts = append(parts, fmt.Sprintf("%s grows %s per step", gpu, FormatBytes(int64(math.Round(*l.SlopeBytesPerStep)))))
			if l.SlopeBytesPerHour != nil {
				parts[0] += fmt.Sprintf(" (%s per hour)", FormatBytes(int64(*l.SlopeBytesPerHour)))
			}
		} else if l.SlopeBytesPerHour != nil {
			parts = append(parts, fmt.Sprintf("%s grows %s per hour", gpu, FormatBytes(int64(*l.SlopeBytesPerHour))))
		}
		if l.HeldBy != nil {
			parts = append(parts, l.HeldBy.words())
		}
		if l.TimeToFullS != nil {
			parts = append(parts, "full in about "+FormatDuration(*l.TimeToFullS))
		}
		return strings.Join(parts, "; ") + " (" + basisWords(l.Basis) + ")"
	case VerdictNoLeak:
		return fmt.Sprintf("%s: no leak: %s", gpu, l.Reason)
	}
	return fmt.Sprintf("%s: not enough data to judge a leak: %s", gpu, l.Reason)
}

func basisWords(b string) string {
	if b == "allocated" {
		return "PyTorch allocated memory at step ends"
	}
	return "device memory floors"
}
