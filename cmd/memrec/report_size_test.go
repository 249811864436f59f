package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Chart sizes past a 4K screen are refused before any work (100000x100000
// ran out of memory with a Go stack), and nothing is written.
func TestReportChartSizeBounded(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	out := filepath.Join(dir, "r")
	for _, size := range [][2]string{{"100000", "100000"}, {"20000", "20000"}, {"3841", "500"}, {"1200", "2161"}, {"199", "500"}} {
		_, errs, code := run(t, db, "", "report", "real-resnet18-bs128", "-o", out, "--width", size[0], "--height", size[1])
		want := "--width/--height " + size[0] + "x" + size[1] + ": charts are 200x150 to 3840x2160 pixels"
		if code != 1 || !strings.Contains(errs, want) {
			t.Errorf("%sx%s: %d %q, want %q", size[0], size[1], code, errs, want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("%sx%s: the report folder was made", size[0], size[1])
		}
	}
	if _, errs, code := run(t, db, "", "report", "real-resnet18-bs128", "-o", out, "--png-only", "--width", "3840", "--height", "2160"); code != 0 {
		t.Errorf("the largest size: %d %q", code, errs)
	}
}
