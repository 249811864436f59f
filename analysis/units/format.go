package units

import (
	"fmt"
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

// FormatDuration writes a length of time for people: 20 ms, 45 s, 12 min,
// 3 h 10 min, 2 d 4 h. Offsets since a run's start are FormatSince's.
func FormatDuration(s float64) string {
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Second:
		return fmt.Sprintf("%.0f ms", float64(d)/1e6)
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
