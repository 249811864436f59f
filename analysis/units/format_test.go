package units

import "testing"

// TestFormatSince: one form at every length, its fields carried over at
// each unit's edge (59.999 s is a minute, not "60.00s").
func TestFormatSince(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want string
	}{
		{0, "+0.00s"}, {5.954, "+5.95s"}, {-1, "-1.00s"}, {59.999, "+1m00.0s"},
		{725.34, "+12m05.3s"}, {3599.96, "+1h00m00s"}, {7207.43, "+2h00m07s"}, {93784, "+26h03m04s"},
	} {
		if got := FormatSince(tc.s); got != tc.want {
			t.Errorf("FormatSince(%g) = %q, want %q", tc.s, got, tc.want)
		}
	}
}

// TestFormatDuration: a length rounds to its last unit (23 h 59 min 59.99 s
// is a day's run, written 24 h 0 min).
func TestFormatDuration(t *testing.T) {
	for _, tc := range []struct {
		s    float64
		want string
	}{
		{0.02, "20 ms"}, {45, "45 s"}, {720, "12 min"}, {7207.636, "2 h 0 min"},
		{86399.99, "24 h 0 min"}, {3*86400 + 4*3600 + 1800, "3 d 5 h"},
	} {
		if got := FormatDuration(tc.s); got != tc.want {
			t.Errorf("FormatDuration(%g) = %q, want %q", tc.s, got, tc.want)
		}
	}
}
