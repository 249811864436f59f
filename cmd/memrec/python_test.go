package main

import (
	"os"
	"os/exec"
	"testing"
)

// TestPythonProbe runs the probe's Python tests (with a fake torch), the
// transport ones against this very binary acting as memrec.
func TestPythonProbe(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "../../python/tests", "-v")
	cmd.Env = append(os.Environ(), "MEMREC_BIN="+exe, "MEMREC_AS_MAIN=1", "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python tests failed: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
