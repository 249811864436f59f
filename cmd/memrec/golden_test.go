package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/testsupport/fixtures"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// TestAnalyzeGolden pins `analyze`'s summary, full text and JSON on the real H200 runs,
// with and without the probe's data, and on a synthetic device-only run
// whose epochs are inferred. After a deliberate change, run
// `go test ./cmd/memrec -run TestAnalyzeGolden -update` and read the diff.
func TestAnalyzeGolden(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	var files []string
	for _, name := range []string{fixtures.LeakRun, fixtures.CleanRun} {
		dev := filepath.Join(dir, name+"-device.jsonl")
		if err := os.WriteFile(dev, fixtures.DeviceOnly(t, name), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, fixtures.Path(name), dev)
	}
	// A run without marks whose epochs show on the device: the inferred
	// epochs' keys.
	eval := filepath.Join(dir, "eval-pauses.jsonl")
	data, _ := fixtures.EvalRun("eval-pauses").Write()
	if err := os.WriteFile(eval, data, 0o644); err != nil {
		t.Fatal(err)
	}
	files = append(files, eval)
	if _, errs, code := run(t, db, "", append([]string{"import"}, files...)...); code != 0 {
		t.Fatal(errs)
	}
	for _, name := range []string{fixtures.LeakRun, fixtures.CleanRun, fixtures.LeakRun + "-device", fixtures.CleanRun + "-device", "eval-pauses"} {
		for _, c := range []struct {
			file string
			args []string
		}{{".txt", nil}, {"-full.txt", []string{"--full"}}, {".json", []string{"--json"}}} {
			t.Run(name+c.file, func(t *testing.T) {
				out, errs, code := run(t, db, "", append([]string{"analyze", name}, c.args...)...)
				if code != 0 {
					t.Fatalf("exit %d: %s", code, errs)
				}
				checkGolden(t, filepath.Join("testdata", "golden", "analyze-"+name+c.file), out)
			})
		}
	}
}

// checkGolden compares got with the golden file, or rewrites it with -update.
func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the output (run with -update after checking the change):\n%s", path, lineDiff(string(want), got))
	}
}

// lineDiff lists the first lines that differ, enough to see what changed.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	out, shown := "", 0
	for i := 0; i < max(len(wl), len(gl)) && shown < 10; i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			out += fmt.Sprintf("line %d:\n  - %s\n  + %s\n", i+1, w, g)
			shown++
		}
	}
	return out
}
