package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/testsupport/fixtures"
)

func smiLog(t *testing.T, name string) string {
	t.Helper()
	return string(fixtures.Gunzip(t, filepath.Join("..", "..", "formats", "nvsmi", "testdata", name)))
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
	want := fmt.Sprintf("imported node3 (id 1, host node3) from nvidia-smi logs: 2 GPUs, %d samples, %d process samples; 0 unavailable",
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

// TestImportedNvidiaSMINoLeakSlope imports the real nvidia-smi logs in
// each of their shapes, with and without the process log, and checks that
// no GPU's no_leak verdict carries a slope told apart from 0: one that is
// not 0 stays only with its 95 % interval holding 0 and no Mann–Kendall
// trend (p ≥ 0.01). GPU 1's floor, known to 1 MiB, is full of ties: its
// Theil–Sen slope was 6.62 GiB per hour with the interval ending exactly
// at 0 and p = 1e-6, shown beside "no leak" (with the first fifth of the
// floors as warm-up; the growth rule's warm-up leaves a floor of slope 0
// there). GPU 0 ran a ResNet-18 whose
// allocated memory its own log shows constant from step 1 to 399: no leak.
func TestImportedNvidiaSMINoLeakSlope(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	for i, files := range [][]string{
		{"gpu-header-units.csv.gz"},
		{"gpu-noheader-nounits.csv.gz"},
		{"gpu-header-units.csv.gz", "apps-header-units.csv.gz"},
		{"gpu-noheader-nounits.csv.gz", "apps-noheader-nounits.csv.gz"},
	} {
		name := fmt.Sprint("smi", i)
		args := []string{"import", "--format", "nvidia-smi", "--tz", "UTC", "--name", name}
		for _, f := range files {
			p := filepath.Join(dir, strings.TrimSuffix(f, ".gz"))
			os.WriteFile(p, []byte(smiLog(t, f)), 0o644)
			args = append(args, p)
		}
		if _, errs, code := run(t, db, "", args...); code != 0 {
			t.Fatalf("%v: %s", files, errs)
		}
		out, errs, code := run(t, db, "", "analyze", "--json", name)
		var rep struct {
			GPUs []struct {
				GPU  int `json:"gpu"`
				Leak struct {
					Verdict string   `json:"verdict"`
					Slope   *float64 `json:"slope_bytes_per_hour"`
					Lo      *float64 `json:"ci95_low_bytes_per_hour"`
					Hi      *float64 `json:"ci95_high_bytes_per_hour"`
					P       *float64 `json:"p_value"`
					Reason  string   `json:"reason"`
				} `json:"leak"`
			} `json:"gpus"`
		}
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || len(rep.GPUs) != 2 {
			t.Fatalf("%v: %d %v %s", files, code, err, errs)
		}
		for _, g := range rep.GPUs {
			l := g.Leak
			if l.Verdict != "no_leak" {
				continue
			}
			if l.Slope != nil && *l.Slope != 0 && (l.Lo == nil || l.Hi == nil || *l.Lo > 0 || *l.Hi < 0 || l.P == nil || *l.P < 0.01) {
				t.Errorf("%v GPU %d: no leak (%s) beside a slope of %.3g B/h, interval [%v, %v], p %v", files, g.GPU, l.Reason, *l.Slope, l.Lo, l.Hi, l.P)
			}
			// GPU 1: a rise not told apart from 0 shows no slope; where
			// the warm-up the growth rule drops leaves a floor whose
			// Theil–Sen slope is 0, that 0 is shown.
			if g.GPU == 1 && (l.Slope != nil && *l.Slope != 0 || l.Slope == nil && !strings.Contains(l.Reason, "not told apart from 0")) {
				t.Errorf("%v GPU 1: slope %v, reason %q; want no slope and the reason, or a slope of 0", files, l.Slope, l.Reason)
			}
		}
		if rep.GPUs[0].Leak.Verdict != "no_leak" {
			t.Errorf("%v GPU 0: %s, want no_leak", files, rep.GPUs[0].Leak.Verdict)
		}
		text, _, _ := run(t, db, "", "analyze", name)
		if strings.Contains(text, "GiB/hour, 95% interval [0 B") {
			t.Errorf("%v: the text still shows the slope:\n%s", files, text)
		}
	}
}

// The run of an nvidia-smi log has its host (the file's name, or --host),
// its GPUs' names and the driver's reservation; a log past a run's limits
// is an error naming the files, not memrec's converted text.
func TestImportNvidiaSMIHostNameReserved(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	log := "uuid, memory.used [MiB], name, memory.reserved [MiB], index, timestamp, memory.total [MiB]\n" +
		"GPU-aaaa, 1000 MiB, NVIDIA H200, 616 MiB, 0, 2026/11/29 22:35:19.123, 143771 MiB\n" +
		"GPU-aaaa, 1001 MiB, NVIDIA H200, 616 MiB, 0, 2026/11/29 22:35:19.373, 143771 MiB\n"
	gpu := filepath.Join(dir, "node7.csv")
	os.WriteFile(gpu, []byte(log), 0o644)
	for _, tc := range []struct {
		args []string
		name string
		host string
	}{
		{[]string{gpu}, "node7", "node7"},
		{[]string{"--host", "gpu-box-2", "--name", "other", gpu}, "other", "gpu-box-2"},
	} {
		out, errs, code := run(t, db, "", append([]string{"import", "--format", "nvidia-smi", "--tz", "UTC"}, tc.args...)...)
		if code != 0 || !strings.Contains(out, "host "+tc.host+")") {
			t.Fatalf("import %v: %d %q %q", tc.args, code, out, errs)
		}
		out, _, _ = run(t, db, "", "runs", "--json")
		var runs []struct {
			Name string `json:"name"`
			Host string `json:"host"`
			GPUs []struct {
				Name string `json:"name"`
			} `json:"gpus"`
		}
		json.Unmarshal([]byte(out), &runs)
		found := false
		for _, r := range runs {
			if r.Name == tc.name {
				found = true
				if r.Host != tc.host || len(r.GPUs) != 1 || r.GPUs[0].Name != "NVIDIA H200" {
					t.Errorf("run %s: %+v", tc.name, r)
				}
			}
		}
		if !found {
			t.Errorf("no run %s in %s", tc.name, out)
		}
	}
	out, _, _ := run(t, db, "", "export", "node7")
	if !strings.Contains(out, `"driver_reserved_bytes":645922816`) { // 616 MiB
		t.Errorf("export: the reservation is missing:\n%s", out)
	}

	// 1 025 GPUs: refused at the line that declares the 1 025th.
	var many strings.Builder
	many.WriteString(hdr1)
	for i := range 1025 {
		fmt.Fprintf(&many, "2026/11/29 22:35:19.123, %d, GPU-%d, 1 MiB, 2 MiB\n", i, i)
	}
	big := filepath.Join(dir, "big.csv")
	os.WriteFile(big, []byte(many.String()), 0o644)
	_, errs, code := run(t, db, "", "import", "--format", "nvidia-smi", "--tz", "UTC", big)
	if code != 1 || !strings.Contains(errs, "big.csv:1026: more than 1024 GPUs") || strings.Contains(errs, "nvidia-smi logs") {
		t.Errorf("1025 GPUs: %d %q", code, errs)
	}
}

const hdr1 = "timestamp, index, uuid, memory.used [MiB], memory.total [MiB]\n"
