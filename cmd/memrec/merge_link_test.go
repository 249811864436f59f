package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestMergeOutputThatIsAnInputByAnotherPath: an output that is an input
// under another name (a symbolic link, a hard link) is refused as such,
// naming both, and the input is left as it was. Before, the merge waited
// on the input's own lock and said the file was "locked by another
// memrec process".
func TestMergeOutputThatIsAnInputByAnotherPath(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.db")
	b := filepath.Join(dir, "b.db")
	recordSimNode(t, a, simNode{host: "a", job: "j1", rankBase: 0, scenario: "none"}, time.Second)
	recordSimNode(t, b, simNode{host: "b", job: "j1", rankBase: 8, scenario: "none"}, time.Second)
	sym := filepath.Join(dir, "link.db")
	if err := os.Symlink(a, sym); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard.db")
	if err := os.Link(b, hard); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ out, input string }{{sym, a}, {hard, b}} {
		before, _ := os.ReadFile(c.input)
		_, errs, code := run(t, c.out, "", "merge", c.out, a, b)
		if code != 1 || !strings.Contains(errs, "is the input "+c.input) || strings.Contains(errs, "locked") {
			t.Errorf("merge into %s: exit %d, %q; want it named as the input %s", c.out, code, errs, c.input)
		}
		if after, _ := os.ReadFile(c.input); string(before) != string(after) {
			t.Errorf("%s changed", c.input)
		}
	}
}
