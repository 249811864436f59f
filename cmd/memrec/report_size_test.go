package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/report"
)

// Chart sizes past a 4K screen are refused before any work (100000x100000
// ran out of memory with a Go stack), and nothing is written.
func TestReportChartSizeBounded(t *testing.T) {
	t.Parallel()
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

// A day of eight GPUs that leak makes a page within the default bound
// (report.DefaultPageBytes), charts and tables included: many lines and
// tens of thousands of epochs (two-second epochs, as the simulator's) share
// the timeline's budget. The day is generated and imported (faster than
// the simulator), one device sample a GPU a second: more samples than the
// page holds, so the page's size is set by its lines, its epochs and its
// bound.
func TestReportPageOfADayOfEightGPUs(t *testing.T) {
	if testing.Short() {
		t.Skip("imports and reports 24 h of 8 GPUs")
	}
	t.Parallel()
	dir := t.TempDir()
	c, err := tracegen.Mix("leak")
	if err != nil {
		t.Fatal(err)
	}
	c.Name, c.Duration, c.Interval, c.TorchInterval, c.StepTime, c.EpochSteps = "day", 24*time.Hour, time.Second, 10*time.Second, time.Second, 2
	c.Procs = false
	for i := range c.LeakPerStep {
		c.LeakPerStep[i] = 64 << 10 // 5.3 GiB in the day
	}
	jsonl := filepath.Join(dir, "day.jsonl")
	f, err := os.Create(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	w := bufio.NewWriter(f)
	if _, err := tracegen.Write(w, c); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", jsonl); code != 0 {
		t.Fatal(errs)
	}
	out := filepath.Join(dir, "r")
	if _, errs, code := run(t, db, "", "report", "day", "-o", out); code != 0 {
		t.Fatal(errs)
	}
	fi, err := os.Stat(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() > report.DefaultPageBytes {
		t.Errorf("the page is %d B, over the bound of %d B", fi.Size(), report.DefaultPageBytes)
	}
	t.Logf("page %d B", fi.Size())
}
