package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/internal/fixtures"
)

func smiLog(t *testing.T, name string) string {
	t.Helper()
	return string(fixtures.Gunzip(t, filepath.Join("..", "..", "nvsmi", "testdata", name)))
}

// TestImportNvidiaSMI: the real logs import as one run whose analysis says
// where the data came from; a bad line names file and line and leaves the
// database without the run.
func TestImportNvidiaSMI(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	gpu := filepath.Join(dir, "node3.csv")
	apps := filepath.Join(dir, "apps.csv")
	os.WriteFile(gpu, []byte(smiLog(t, "gpu-header-units.csv.gz")), 0o644)
	os.WriteFile(apps, []byte(smiLog(t, "apps-noheader-nounits.csv.gz")), 0o644)

	lines := func(s string) int { // data lines: not empty, not the header
		n := 0
		for _, l := range strings.Split(s, "\n") {
			if l != "" && !strings.HasPrefix(l, "timestamp") {
				n++
			}
		}
		return n
	}
	want := fmt.Sprintf("imported node3 (id 1) from nvidia-smi logs: 2 GPUs, %d samples, %d process samples; 0 unavailable",
		lines(smiLog(t, "gpu-header-units.csv.gz")), lines(smiLog(t, "apps-noheader-nounits.csv.gz")))
	out, errs, code := run(t, db, "", "import", "--format", "nvidia-smi", "--tz", "UTC", gpu, apps)
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("import: %d %q %q", code, out, errs)
	}
	out, _, _ = run(t, db, "", "analyze", "node3")
	if !strings.Contains(out, "memory is known to 1 MiB") {
		t.Errorf("analyze: %s", out)
	}

	bad := strings.Replace(smiLog(t, "gpu-header-units.csv.gz"), "2026/11/29 22:38:05", "2026/11/29 22:38:5x", 1)
	badPath := filepath.Join(dir, "bad.csv")
	os.WriteFile(badPath, []byte(bad), 0o644)
	_, errs, code = run(t, db, "", "import", "--format", "nvidia-smi", "--name", "b", badPath)
	if code != 1 || !strings.Contains(errs, "bad.csv:") || !strings.Contains(errs, `timestamp "2026/11/29 22:38:5x`) || !strings.Contains(errs, "nothing was imported") {
		t.Fatalf("bad line: %d %q", code, errs)
	}
	out, _, _ = run(t, db, "", "runs")
	if strings.Contains(out, "\nb ") {
		t.Errorf("the failed import left a run:\n%s", out)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--format", "nvidia-smi", "--tz", "Mars/Olympus", gpu}, `--tz "Mars/Olympus"`},
		{[]string{"--format", "nvidia-smi", "-"}, "--name"},
		{[]string{"--format", "xml", gpu}, `--format "xml": want jsonl or nvidia-smi`},
		{[]string{"--format", "nvidia-smi", "--tz", "UTC", gpu}, "already exists"},
	} {
		_, errs, code := run(t, db, "", append([]string{"import"}, tc.args...)...)
		if code != 1 || !strings.Contains(errs, tc.want) {
			t.Errorf("import %v: %d %q, want %q", tc.args, code, errs, tc.want)
		}
	}
}
