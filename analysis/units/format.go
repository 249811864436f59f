package units

import (
	"fmt"
	"math"
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
// 3 h 10 min, 2 d 4 h, rounded to its last unit. Offsets since a run's
// start are FormatSince's.
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
		d = d.Round(time.Minute)
		h := int(d.Hours())
		return fmt.Sprintf("%d h %d min", h, int(d.Minutes())-60*h)
	}
	d = d.Round(time.Hour)
	days := int(d.Hours() / 24)
	return fmt.Sprintf("%d d %d h", days, int(d.Hours())-24*days)
}

// FormatSince writes a moment as its offset in seconds from a start (the
// run's, a mark's), signed, in one form that reads at any length: +5.95s,
// +12m05.3s, +2h00m07s. Its precision falls as the offset grows, where a
// reader looks for the minute, not the millisecond; --json keeps the ns.
func FormatSince(s float64) string {
	sign := "+"
	if s < 0 {
		sign, s = "-", -s
	}
	switch {
	case s < 59.995:
		return fmt.Sprintf("%s%.2fs", sign, s)
	case s < 3599.95:
		s = math.Round(s*10) / 10
		m := math.Floor(s / 60)
		return fmt.Sprintf("%s%.0fm%04.1fs", sign, m, s-60*m)
	}
	t := int64(math.Round(s))
	return fmt.Sprintf("%s%dh%02dm%02ds", sign, t/3600, t/60%60, t%60)
}
