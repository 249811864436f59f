package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestEveryFuzzTargetInCI: each fuzz target of the module is run by
// .ci/run, by name and package, with a budget of inputs (Nx): a target
// left out is never fuzzed, and a budget of time can fail under load.
func TestEveryFuzzTargetInCI(t *testing.T) {
	root := filepath.Join("..", "..")
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	fuzzFunc := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(`)
	var n int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, m := range fuzzFunc.FindAllSubmatch(b, -1) {
			n++
			want := regexp.MustCompile(`(?m)^go test -run '\^\$' -fuzz '\^` + string(m[1]) + `\$' -fuzztime [0-9]+x \./` + regexp.QuoteMeta(filepath.ToSlash(rel)) + `$`)
			if !want.Match(ci) {
				t.Errorf("%s (%s) is not run by .ci/run with a count of inputs: want a line %q", m[1], path, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("found no fuzz target")
	}
}
