package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestSlowTailInCI: .ci/run runs the -short suite under the race
// detector and then, without it, only the tests .ci/slow-tests names. The
// script must name every Test function of the module that asks
// testing.Short() (found here from the syntax tree, not by the script's
// text match), and refuse testing.Short() outside a Test function, or a
// test -short skips would never run in CI.
func TestSlowTailInCI(t *testing.T) {
	root := filepath.Join("..", "..")
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`(?m)^slow="\$\(bash \.ci/slow-tests\)"$`).Match(ci) || !regexp.MustCompile(`(?m)^go test -race -short \./\.\.\.$`).Match(ci) {
		t.Fatal(".ci/run does not run the -short suite with -race and then the tests .ci/slow-tests names")
	}
	want, outside := askShort(t, root)
	if len(outside) > 0 {
		t.Errorf("testing.Short() outside a Test function, which .ci/run cannot name: %v", outside)
	}
	if len(want) == 0 {
		t.Fatal("found no test that asks testing.Short()")
	}
	got := slowTests(t, root)
	if !slices.Equal(got, want) {
		t.Errorf(".ci/slow-tests names\n%s\nthe tests that ask testing.Short() are\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// A helper that asks testing.Short() makes the script fail, naming it.
	tmp := t.TempDir()
	os.MkdirAll(filepath.Join(tmp, ".ci"), 0o755)
	script, _ := os.ReadFile(filepath.Join(root, ".ci", "slow-tests"))
	os.WriteFile(filepath.Join(tmp, ".ci", "slow-tests"), script, 0o755)
	os.WriteFile(filepath.Join(tmp, "go.mod"), []byte("module example.com/m\n\ngo 1.22\n"), 0o644)
	os.WriteFile(filepath.Join(tmp, "a_test.go"), []byte("package m\n\nimport \"testing\"\n\n// testing.Short() in a comment is not a call\nfunc TestA(t *testing.T) { slow(t) }\n\nfunc slow(t *testing.T) {\n\tif testing.Short() {\n\t\tt.Skip()\n\t}\n}\n"), 0o644)
	cmd := exec.Command("bash", filepath.Join(tmp, ".ci", "slow-tests"))
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "a_test.go:9: testing.Short() outside a Test function") {
		t.Errorf("a helper asking testing.Short(): %v, %q", err, out)
	}
}

// askShort walks the module's test files (not testdata, not modules of
// their own) and returns "import/path TestName" for each Test function
// that calls testing.Short(), sorted, and "file:line" of each call
// elsewhere.
func askShort(t *testing.T, root string) (tests, outside []string) {
	t.Helper()
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	module := regexp.MustCompile(`(?m)^module (\S+)$`).FindSubmatch(mod)[1]
	fset := token.NewFileSet()
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := string(module)
		if rel != "." {
			pkg += "/" + filepath.ToSlash(rel)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Short" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); !ok || x.Name != "testing" {
					return true
				}
				if fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") {
					tests = append(tests, pkg+" "+fn.Name.Name)
				} else {
					outside = append(outside, fset.Position(call.Pos()).String())
				}
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(tests)
	return slices.Compact(tests), outside
}

// slowTests is what .ci/slow-tests prints, a line each.
func slowTests(t *testing.T, root string) []string {
	t.Helper()
	out, err := exec.Command("bash", filepath.Join(root, ".ci", "slow-tests")).Output()
	if err != nil {
		t.Fatalf(".ci/slow-tests: %v", err)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}
