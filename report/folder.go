package report

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MarkerFile is written into every folder memrec writes a report into. It
// lists the files memrec wrote there. A folder that already exists is
// replaced only if it holds this file and nothing that it does not list
// (or is empty): memrec never deletes what it did not write.
const MarkerFile = ".memrec-report"

// Errors a caller can test with errors.Is.
var (
	ErrNotReport = errors.New("exists, is not empty and is not a memrec report")
	ErrNotFolder = errors.New("exists and is not a folder")
	// ErrOtherFiles is a memrec report folder that holds files memrec did
	// not write there (notes added by hand, a folder): not replaced.
	ErrOtherFiles = errors.New("holds files memrec did not write")
)

// markerHead is the marker's first line; the names of the files memrec
// wrote follow it, one a line. Markers of earlier versions hold the first
// sentence alone and no list.
const (
	markerHead   = "This folder was written by memrec; memrec replaces it when asked to write a report here, only while it holds no files but these:"
	markerPrefix = "This folder was written by memrec;"
)

// markerText is the marker of a folder of files.
func markerText(files []string) []byte {
	var b strings.Builder
	b.WriteString(markerHead + "\n")
	for _, f := range files {
		b.WriteString(f + "\n")
	}
	return []byte(b.String())
}

// readMarker reads dir's marker: ok if it is memrec's, with the files it
// lists. A marker of an earlier version lists none (legacy): memrec's own
// names (index.html and .png files) stand for the list then.
func readMarker(dir string) (listed map[string]bool, legacy, ok bool) {
	path := filepath.Join(dir, MarkerFile)
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Size() > 1<<20 {
		return nil, false, false
	}
	b, err := os.ReadFile(path)
	if err != nil || !strings.HasPrefix(string(b), markerPrefix) {
		return nil, false, false
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if lines[0] != markerHead {
		return nil, true, true
	}
	listed = map[string]bool{}
	for _, l := range lines[1:] {
		listed[l] = true
	}
	return listed, false, true
}

// othersIn returns what dir holds that its marker does not list (folders,
// links and files memrec did not write), and whether dir has a marker of
// memrec's at all.
func othersIn(dir string) (others []string, marked bool, err error) {
	listed, legacy, ok := readMarker(dir)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, false, err
	}
	for _, e := range entries {
		name := e.Name()
		switch {
		case name == MarkerFile && ok:
		case !e.Type().IsRegular():
			others = append(others, name+string(filepath.Separator))
		case legacy && (name == "index.html" || filepath.Ext(name) == ".png"):
		case !listed[name]:
			others = append(others, name)
		}
	}
	return others, ok, nil
}

// folderKind is what stands at a report's path before it is written.
type folderKind int

const (
	folderMissing folderKind = iota
	folderEmpty
	folderReport
)

// CheckFolder returns the error Write would give for dir before it renders
// anything: a command that works long before it writes calls it first.
func CheckFolder(dir string) error {
	_, err := checkFolder(filepath.Clean(dir))
	return err
}

// checkFolder says what stands at dir and refuses anything memrec may not
// replace: a file, a link, or a folder with content it did not write.
func checkFolder(dir string) (folderKind, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return folderMissing, nil
	}
	if err != nil {
		return 0, err
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("%s %w", dir, ErrNotFolder)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	if len(entries) == 0 {
		return folderEmpty, nil
	}
	others, marked, err := othersIn(dir)
	switch {
	case err != nil:
		return 0, err
	case !marked:
		return 0, fmt.Errorf("%s %w (it has no %s file); choose a new or empty folder", dir, ErrNotReport, MarkerFile)
	case len(others) > 0:
		return 0, fmt.Errorf("%s is a memrec report but %w there (%s): move them out, or choose another folder", dir, ErrOtherFiles, listNames(others))
	}
	if same, _ := isWorkingDir(dir); same {
		return 0, fmt.Errorf("%s is the current folder: a report there cannot be replaced as a whole; write it elsewhere", dir)
	}
	return folderReport, nil
}

// listNames lists up to five names, and how many more.
func listNames(names []string) string {
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}

func isWorkingDir(dir string) (bool, error) {
	wd, err := os.Getwd()
	if err != nil {
		return false, err
	}
	a, err := os.Stat(wd)
	if err != nil {
		return false, err
	}
	b, err := os.Stat(dir)
	if err != nil {
		return false, err
	}
	return os.SameFile(a, b), nil
}

// writeFolder writes charts and page beside dir and swaps them in: a new
// folder is renamed into place, an empty one receives the files, an old
// report is renamed aside and removed. Anything else at dir is refused
// before a byte is written.
//
// Once ctx is done (the user's first Ctrl-C) it stops before its next
// file, and before the swap, removing what it wrote: dir stays as it was.
func writeFolder(ctx context.Context, dir string, charts []Chart, page []byte) (string, error) {
	dir = filepath.Clean(dir)
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	kind, err := checkFolder(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return "", err
	}
	removeLeftovers(parent, base)
	if err := stopped(ctx, dir); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(parent, "."+base+".new-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	// The marker goes first, listing every file to come: a half-written
	// folder left by a kill is recognisable as memrec's, and removed next
	// time, only while it holds nothing else.
	files := make([]string, 0, len(charts)+1)
	for _, c := range charts {
		files = append(files, c.File)
	}
	if page != nil {
		files = append(files, "index.html")
	}
	if err := os.WriteFile(filepath.Join(tmp, MarkerFile), markerText(files), 0o644); err != nil {
		return "", err
	}
	for _, c := range charts {
		if err := stopped(ctx, dir); err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(tmp, c.File), c.PNG, 0o644); err != nil {
			return "", err
		}
	}
	if page != nil {
		if err := os.WriteFile(filepath.Join(tmp, "index.html"), page, 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := stopped(ctx, dir); err != nil {
		return "", err
	}
	switch kind {
	case folderMissing:
		if err := os.Rename(tmp, dir); err != nil {
			return "", fmt.Errorf("write %s: %w", dir, err)
		}
	case folderEmpty:
		if err := moveFiles(tmp, dir); err != nil {
			return "", fmt.Errorf("write %s: %w", dir, err)
		}
	case folderReport:
		old := filepath.Join(parent, fmt.Sprintf(".%s.old-%d", base, time.Now().UnixNano()))
		if err := os.Rename(dir, old); err != nil {
			return "", fmt.Errorf("replace %s: %w", dir, err)
		}
		if err := os.Rename(tmp, dir); err != nil {
			os.Rename(old, dir)
			return "", fmt.Errorf("write %s: %w", dir, err)
		}
		os.RemoveAll(old)
	}
	if page == nil {
		return dir, nil
	}
	return filepath.Join(dir, "index.html"), nil
}

// stopped is ctx's error, said of the report at dir, once ctx is done.
func stopped(ctx context.Context, dir string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s not written: %w", dir, err)
	}
	return nil
}

// moveFiles moves the files of src into the empty folder dst.
func moveFiles(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// removeLeftovers removes the .BASE.new-* and .BASE.old-* folders that an
// interrupted write left in parent: only those memrec can tell it made,
// which hold its marker and nothing the marker does not list. Anything
// else named like them (a folder of the user's, one of an earlier version
// that renamed any folder aside) stays.
func removeLeftovers(parent, base string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "."+base+".new-") && !strings.HasPrefix(name, "."+base+".old-") {
			continue
		}
		path := filepath.Join(parent, name)
		if others, marked, err := othersIn(path); err == nil && marked && len(others) == 0 {
			os.RemoveAll(path)
		}
	}
}
