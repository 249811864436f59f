package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCLIDocsAreCurrent regenerates the command reference into a temporary
// folder and fails where docs/cli differs: a page changed, missing or left
// over from a command that is gone.
func TestCLIDocsAreCurrent(t *testing.T) {
	t.Parallel()
	const regen = "regenerate it: go generate ./cmd/memrec (or go run ./cmd/memrec gendocs docs/cli)"
	dir := t.TempDir()
	if err := genDocs(dir); err != nil {
		t.Fatal(err)
	}
	want := readPages(t, dir)
	have := readPages(t, filepath.Join("..", "..", "docs", "cli"))
	if len(want) < 10 {
		t.Fatalf("gendocs wrote %d pages, want one per command", len(want))
	}
	for name, text := range want {
		switch old, ok := have[name]; {
		case !ok:
			t.Errorf("docs/cli/%s is missing; %s", name, regen)
		case old != text:
			t.Errorf("docs/cli/%s differs from the commands' help; %s", name, regen)
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			t.Errorf("docs/cli/%s is of no command; delete it and %s", name, regen)
		}
	}
}

func readPages(t *testing.T, dir string) map[string]string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(dir, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages := map[string]string{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		pages[filepath.Base(p)] = string(b)
	}
	return pages
}
