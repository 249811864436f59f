package report

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// legacyMarker is the marker of memrec versions that listed no files.
const legacyMarker = "This folder was written by memrec; memrec replaces it as a whole when asked to write a report here.\n"

var testCharts = []Chart{{File: "a.png", PNG: []byte("png a")}, {File: "b.png", PNG: []byte("png b")}}

// snapshot reads every file under dir (path -> content), to show that a
// refused write changed nothing.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	m := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&os.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			m[p+"@"] = target
			return err
		}
		if !d.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			m[p] = string(b)
		} else {
			m[p+"/"] = ""
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestWriteFolderRefusesWhatMemrecDidNotWrite(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, root string) string // returns the -o path
		want  error
	}{
		{"folder with a thesis and .git", func(t *testing.T, root string) string {
			d := filepath.Join(root, "thesis")
			mustWrite(t, filepath.Join(d, "thesis.tex"), "chapter 1")
			mustWrite(t, filepath.Join(d, ".git", "HEAD"), "ref: refs/heads/main")
			return d
		}, ErrNotReport},
		{"folder with only PNGs and an index.html of someone else", func(t *testing.T, root string) string {
			d := filepath.Join(root, "photos")
			mustWrite(t, filepath.Join(d, "index.html"), "<html>mine</html>")
			mustWrite(t, filepath.Join(d, "cat.png"), "cat")
			return d
		}, ErrNotReport},
		{"regular file", func(t *testing.T, root string) string {
			f := filepath.Join(root, "notes.txt")
			mustWrite(t, f, "notes")
			return f
		}, ErrNotFolder},
		{"link to a report folder", func(t *testing.T, root string) string {
			d := filepath.Join(root, "real")
			mustWrite(t, filepath.Join(d, MarkerFile), legacyMarker)
			l := filepath.Join(root, "link")
			if err := os.Symlink(d, l); err != nil {
				t.Fatal(err)
			}
			return l
		}, ErrNotFolder},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			out := tc.setup(t, root)
			before := snapshot(t, root)
			_, err := writeFolder(context.Background(), out, testCharts, []byte("<html>report</html>"))
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			if after := snapshot(t, root); !mapsEqual(before, after) {
				t.Errorf("refused write changed the tree:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func TestWriteFolderRefusesCurrentFolder(t *testing.T) {
	root := t.TempDir()
	mustWrite(t, filepath.Join(root, "work.txt"), "work")
	t.Chdir(root)
	before := snapshot(t, root)
	if _, err := writeFolder(context.Background(), ".", testCharts, nil); !errors.Is(err, ErrNotReport) {
		t.Fatalf("err = %v, want ErrNotReport", err)
	}
	if after := snapshot(t, root); !mapsEqual(before, after) {
		t.Errorf("current folder changed: %v", after)
	}
	// Even a report in the current folder is not swapped away under the shell.
	mustWrite(t, filepath.Join(root, MarkerFile), legacyMarker)
	if _, err := writeFolder(context.Background(), ".", testCharts, nil); err == nil {
		t.Fatal("replaced the current folder")
	}
}

func TestWriteFolderIntoEmptyAndNew(t *testing.T) {
	root := t.TempDir()
	empty := filepath.Join(root, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{empty, filepath.Join(root, "new", "deep")} {
		path, err := writeFolder(context.Background(), dir, testCharts, []byte("<html/>"))
		if err != nil {
			t.Fatal(err)
		}
		if path != filepath.Join(dir, "index.html") {
			t.Errorf("path %q", path)
		}
		names := dirNames(t, dir)
		want := []string{MarkerFile, "a.png", "b.png", "index.html"}
		if !slices.Equal(names, want) {
			t.Errorf("%s holds %v, want %v", dir, names, want)
		}
	}
	// The empty folder was filled in place, so the current folder works too.
	cwd := filepath.Join(root, "cwd")
	if err := os.Mkdir(cwd, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(cwd)
	if _, err := writeFolder(context.Background(), ".", testCharts, nil); err != nil {
		t.Fatalf("empty current folder: %v", err)
	}
	if names := dirNames(t, cwd); !slices.Equal(names, []string{MarkerFile, "a.png", "b.png"}) {
		t.Errorf("current folder holds %v", names)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func TestWriteFolderRemovesLeftovers(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "rep")
	// What an interrupted write leaves: a half-written new folder, an old
	// report renamed aside; and what must stay: an old folder of an earlier
	// version that renamed anything aside, and another report's leftovers.
	mustWrite(t, filepath.Join(root, ".rep.new-123", MarkerFile), string(markerText([]string{"a.png", "b.png"})))
	mustWrite(t, filepath.Join(root, ".rep.new-123", "a.png"), "half")
	mustWrite(t, filepath.Join(root, ".rep.old-456", MarkerFile), legacyMarker)
	mustWrite(t, filepath.Join(root, ".rep.old-456", "index.html"), "old")
	mustWrite(t, filepath.Join(root, ".rep.old-789", "thesis.tex"), "chapter 1")
	mustWrite(t, filepath.Join(root, ".rep.old-790", "index.html"), "old report without marker")
	mustWrite(t, filepath.Join(root, ".other.new-1", "a.png"), "other")
	if _, err := writeFolder(context.Background(), out, testCharts, nil); err != nil {
		t.Fatal(err)
	}
	got := dirNames(t, root)
	want := []string{".other.new-1", ".rep.old-789", ".rep.old-790", "rep"}
	if !slices.Equal(got, want) {
		t.Errorf("after the write the parent holds %v, want %v", got, want)
	}
	// Replacing the report leaves nothing beside it either, and a chart
	// the earlier report had and this one has not goes with it.
	if _, err := writeFolder(context.Background(), out, append(testCharts, Chart{File: "c.png", PNG: []byte("png c")}), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := writeFolder(context.Background(), out, testCharts, nil); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, root); !slices.Equal(got, want) {
		t.Errorf("after the replacement the parent holds %v, want %v", got, want)
	}
	if names := dirNames(t, out); slices.Contains(names, "c.png") {
		t.Errorf("old report's files survive: %v", names)
	}
}

// TestWriteFolderKeepsWhatTheUserAdded: a file or folder the user put into
// memrec's report (NOTES.md, a picture named like a chart) makes memrec
// refuse to replace it, and the tree stays as it was; the old code deleted
// them with the old report.
func TestWriteFolderKeepsWhatTheUserAdded(t *testing.T) {
	for _, added := range []string{"NOTES.md", "extra.png", "drafts/x.txt"} {
		t.Run(added, func(t *testing.T) {
			root := t.TempDir()
			out := filepath.Join(root, "rep")
			if _, err := writeFolder(context.Background(), out, testCharts, []byte("<html/>")); err != nil {
				t.Fatal(err)
			}
			mustWrite(t, filepath.Join(out, added), "mine")
			before := snapshot(t, root)
			_, err := writeFolder(context.Background(), out, testCharts, []byte("<html/>"))
			if !errors.Is(err, ErrOtherFiles) || !strings.Contains(err.Error(), strings.Split(added, "/")[0]) {
				t.Fatalf("err = %v, want ErrOtherFiles naming %s", err, added)
			}
			if after := snapshot(t, root); !mapsEqual(before, after) {
				t.Errorf("refused write changed the tree:\nbefore %v\nafter  %v", before, after)
			}
		})
	}
}

// TestWriteFolderLeavesTemporariesItDidNotMake: folders named like
// memrec's temporaries are removed only when memrec's marker is in them and
// they hold nothing it does not list; the old code removed a .new- folder
// of PNGs without a marker, and a marked .old- one with a file of the
// user's added.
func TestWriteFolderLeavesTemporariesItDidNotMake(t *testing.T) {
	root := t.TempDir()
	out := filepath.Join(root, "rep")
	mine := string(markerText([]string{"a.png", "index.html"}))
	mustWrite(t, filepath.Join(root, ".rep.new-1", "a.png"), "the user's, no marker")
	mustWrite(t, filepath.Join(root, ".rep.old-2", MarkerFile), mine)
	mustWrite(t, filepath.Join(root, ".rep.old-2", "NOTES.md"), "the user's")
	mustWrite(t, filepath.Join(root, ".rep.new-3", MarkerFile), "a marker of someone else\n")
	mustWrite(t, filepath.Join(root, ".rep.new-3", "a.png"), "png")
	mustWrite(t, filepath.Join(root, ".rep.new-4", MarkerFile), mine) // memrec's, half written
	mustWrite(t, filepath.Join(root, ".rep.old-5", MarkerFile), mine) // memrec's old report
	mustWrite(t, filepath.Join(root, ".rep.old-5", "a.png"), "png")
	mustWrite(t, filepath.Join(root, ".rep.old-5", "index.html"), "html")
	if _, err := writeFolder(context.Background(), out, testCharts, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{".rep.new-1", ".rep.new-3", ".rep.old-2", "rep"}
	if got := dirNames(t, root); !slices.Equal(got, want) {
		t.Errorf("the parent holds %v, want %v", got, want)
	}
}
