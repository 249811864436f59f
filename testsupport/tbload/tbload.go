// Package tbload loads TensorBoard log directories in tests with
// TensorBoard's own loader: the Python modules of TensorBoard that read
// event files for its server (upstream/, copied unchanged, see NOTICE),
// their protos compiled by protoc, run by tbload.py in Debian's python3.
//
// What a test sees is what `tensorboard --logdir DIR` keeps of each scalar
// series: with default flags a reservoir sample of at most
// Result.ScalarsKeep points, the last one always among them.
package tbload

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
)

// Loader runs tbload.py. The zero value is not usable; New makes one.
// Safe for concurrent use: every Load is a process of its own.
type Loader struct {
	python string
	root   string // a copy of upstream/ with the *_pb2.py beside the protos
	script string
}

// New copies upstream/ into a temporary folder of t and compiles its protos
// there. It skips t when protoc, python3-protobuf or python3-numpy is
// missing, and fails it instead where CI is set (.ci/run installs them).
func New(t testing.TB) *Loader {
	t.Helper()
	python := findPython(t)
	_, here, _, _ := runtime.Caller(0)
	dir := filepath.Dir(here)
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(filepath.Join(dir, "upstream"))); err != nil {
		t.Fatal(err)
	}
	var protos []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err == nil && filepath.Ext(p) == ".proto" {
			rel, _ := filepath.Rel(root, p)
			protos = append(protos, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	gen := exec.Command("protoc", append([]string{"--proto_path=.", "--python_out=."}, protos...)...)
	gen.Dir = root
	if out, err := gen.CombinedOutput(); err != nil {
		t.Fatalf("protoc on TensorBoard's protos: %v\n%s", err, out)
	}
	return &Loader{python: python, root: root, script: filepath.Join(dir, "tbload.py")}
}

func findPython(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("protoc"); err == nil {
		for _, p := range []string{"python3", "/usr/bin/python3"} {
			if exec.Command(p, "-c", "import google.protobuf, numpy").Run() == nil {
				return p
			}
		}
	}
	if os.Getenv("CI") != "" {
		t.Fatal("no protoc, or no Python with protobuf and numpy, on the CI machine: .ci/run installs them")
	}
	t.Skip("TensorBoard's loader needs protoc, python3-protobuf and python3-numpy (apt-get install protobuf-compiler python3-protobuf python3-numpy)")
	return ""
}

// Options change a load from what `tensorboard --logdir DIR` does.
type Options struct {
	// Samples, if not nil, is --samples_per_plugin scalars=*Samples
	// (0: keep every point).
	Samples *int
	// Seed, if not nil, seeds every reservoir with *Seed instead of
	// TensorBoard's fixed 0.
	Seed *int
}

// Result is what TensorBoard keeps of a log directory's scalars.
type Result struct {
	Version     string                        `json:"version"`      // TensorBoard's, of upstream/
	ScalarsKeep int                           `json:"scalars_keep"` // points a reservoir keeps of a series (0: all)
	Runs        map[string]map[string][]Point `json:"runs"`         // run ("." for the folder itself) -> tag -> points
}

// Point is one scalar as TensorBoard decodes it (a float32 widened).
type Point struct {
	Step  int64   `json:"step"`
	Wall  float64 `json:"wall_time"`
	Value float64 `json:"value"`
}

// Load loads logdir as TensorBoard would, failing t on any error.
func (l *Loader) Load(t testing.TB, logdir string, o Options) *Result {
	t.Helper()
	args := []string{l.script, l.root, logdir}
	if o.Samples != nil {
		args = append(args, "--samples", strconv.Itoa(*o.Samples))
	}
	if o.Seed != nil {
		args = append(args, "--seed", strconv.Itoa(*o.Seed))
	}
	var stderr bytes.Buffer
	cmd := exec.Command(l.python, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tbload.py %s: %v\n%s", logdir, err, stderr.String())
	}
	var r Result
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("tbload.py %s: %v", logdir, err)
	}
	if r.ScalarsKeep < 0 || r.ScalarsKeep == 0 && o.Samples == nil {
		t.Fatalf("tbload.py %s: keeps %d scalars a series", logdir, r.ScalarsKeep)
	}
	return &r
}

// Series returns the points of tag in run, failing t if there is none.
func (r *Result) Series(t testing.TB, run, tag string) []Point {
	t.Helper()
	ps, ok := r.Runs[run][tag]
	if !ok {
		tags := []string{}
		for tg := range r.Runs[run] {
			tags = append(tags, tg)
		}
		t.Fatalf("TensorBoard shows no %q in run %q (%d runs; its tags %q)", tag, run, len(r.Runs), tags)
	}
	return ps
}
