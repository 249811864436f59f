package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Dates far outside the run: past 2262 a date does not fit int64
// nanoseconds, so it is refused by the 1970..2200 bound before it can wrap
// (9999-12-31 read as 1816, and the window became the whole run); a date
// inside the bound but outside the run is an empty window, refused.
func TestWindowFarOutsideTheRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "9999-12-31T23:59:59Z"}, `--from "9999-12-31T23:59:59Z": outside 1970..2200, the times a run may hold`},
		{[]string{"--to", "9999-12-31T23:59:59Z"}, `--to "9999-12-31T23:59:59Z": outside 1970..2200`},
		{[]string{"--from", "2611-01-01 00:00:00"}, `--from "2611-01-01 00:00:00": outside 1970..2200`},
		{[]string{"--to", "1969-12-31T23:00:00Z"}, `--to "1969-12-31T23:00:00Z": outside 1970..2200`},
		{[]string{"--from", "2150-01-01T00:00:00Z"}, "the window is empty: from +1078974h19m05s to the end of a run of 21 s; the run spans 2026-11-29T17:40:55Z to 2026-11-29T17:41:15Z"},
		{[]string{"--to", "1990-01-01T00:00:00Z"}, "the window is empty: from the start to -323561h40m55s of a run of 21 s; the run spans 2026-11-29T17:40:55Z"},
	} {
		_, errs, code := run(t, db, "", append([]string{"analyze", "real-resnet18-bs128"}, tc.args...)...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("analyze %v: %d %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}
