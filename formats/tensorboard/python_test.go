package tensorboard

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// protobufPython finds protoc and a Python that has the protobuf runtime
// (Debian: protobuf-compiler and python3-protobuf; .ci/run installs them).
func protobufPython(t *testing.T) (protoc, python string) {
	t.Helper()
	protoc, err := exec.LookPath("protoc")
	if err == nil {
		for _, p := range []string{"python3", "/usr/bin/python3"} {
			if exec.Command(p, "-c", "import google.protobuf").Run() == nil {
				return protoc, p
			}
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no protoc or no Python protobuf runtime on the CI machine: .ci/run installs them")
	}
	t.Skip("needs protoc and python3-protobuf (apt-get install protobuf-compiler python3-protobuf)")
	return "", ""
}

// TestPythonReadsEventFile compiles testdata's event.proto and summary.proto
// (TensorFlow's field numbers) with protoc and reads an exported real run
// back in Python: every scalar must match what the Go reader sees, and at
// the default points every series fits what TensorBoard keeps, the run's
// peak and trough among them.
func TestPythonReadsEventFile(t *testing.T) {
	protoc, python := protobufPython(t)
	dir := t.TempDir()
	gen := exec.Command(protoc, "--proto_path=testdata", "--python_out="+dir, "event.proto", "summary.proto")
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("protoc: %v\n%s", err, out)
	}
	file, _, used := realExport(t, "real-resnet18-bs64-leak", 0)
	path := filepath.Join(dir, FileName(1700000000, "h", 1))
	if err := os.WriteFile(path, file, 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(python, filepath.Join("testdata", "read_events.py"), dir, path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("read_events.py: %v\n%s", err, stderr.String())
	}
	var py struct {
		FileVersion string `json:"file_version"`
		Scalars     []struct {
			Tag   string  `json:"tag"`
			Step  int64   `json:"step"`
			Wall  float64 `json:"wall_time"`
			Value float64 `json:"value"`
		} `json:"scalars"`
	}
	if err := json.Unmarshal(out, &py); err != nil {
		t.Fatal(err)
	}
	ef, err := readEventFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if py.FileVersion != FileVersion {
		t.Errorf("Python reads file_version %q", py.FileVersion)
	}
	if len(py.Scalars) != len(ef.Scalars) || len(py.Scalars) < 1000 {
		t.Fatalf("Python reads %d scalars, Go %d", len(py.Scalars), len(ef.Scalars))
	}
	byTag := map[string][]scalar{}
	for i, p := range py.Scalars {
		g := ef.Scalars[i]
		if p.Tag != g.Tag || p.Step != g.Step || p.Wall != g.Wall || float32(p.Value) != g.V || math.IsNaN(p.Value) {
			t.Fatalf("scalar %d: Python reads %+v, Go %+v", i, p, g)
		}
		byTag[p.Tag] = append(byTag[p.Tag], scalar{Tag: p.Tag, Step: p.Step, Wall: p.Wall, V: float32(p.Value)})
	}
	checkKeepsExtremes(t, byTag, used)
}
