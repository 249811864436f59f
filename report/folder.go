package report

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// MarkerFile is written into every folder memrec writes a report into. A
// folder that already exists is replaced only if it holds this file (or is
// empty): memrec never deletes a folder it did not write.
const MarkerFile = ".memrec-report"

// Errors a caller can test with errors.Is.
var (
	ErrNotReport = errors.New("exists, is not empty and is not a memrec report")
	ErrNotFolder = errors.New("exists and is not a folder")
)

const markerText = "This folder was written by memrec; memrec replaces it as a whole when asked to write a report here.\n"

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
	if m, err := os.Lstat(filepath.Join(dir, MarkerFile)); err == nil && m.Mode().IsRegular() {
		if same, _ := isWorkingDir(dir); same {
			return 0, fmt.Errorf("%s is the current folder: a report there cannot be replaced as a whole; write it elsewhere", dir)
		}
		return folderReport, nil
	}
	return 0, fmt.Errorf("%s %w (it has no %s file); choose a new or empty folder", dir, ErrNotReport, MarkerFile)
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
func writeFolder(dir string, charts []Chart, page []byte) (string, error) {
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
	tmp, err := os.MkdirTemp(parent, "."+base+".new-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	// The marker goes first: a half-written folder left by a kill is
	// recognisable as memrec's and removed next time.
	if err := os.WriteFile(filepath.Join(tmp, MarkerFile), []byte(markerText), 0o644); err != nil {
		return "", err
	}
	for _, c := range charts {
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
// interrupted write left in parent. Only folders that hold nothing but
// what memrec writes are removed, and an old one only with its marker:
// earlier versions renamed any folder aside.
func removeLeftovers(parent, base string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		isNew := strings.HasPrefix(name, "."+base+".new-")
		isOld := strings.HasPrefix(name, "."+base+".old-")
		if !e.IsDir() || !isNew && !isOld {
			continue
		}
		path := filepath.Join(parent, name)
		marked, ok := onlyReportFiles(path)
		if ok && (marked || isNew) {
			os.RemoveAll(path)
		}
	}
}

// onlyReportFiles reports whether dir holds only regular files of the
// names memrec writes, and whether the marker is among them.
func onlyReportFiles(dir string) (marked, ok bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, false
	}
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || name != MarkerFile && name != "index.html" && filepath.Ext(name) != ".png" {
			return false, false
		}
		marked = marked || name == MarkerFile
	}
	return marked, true
}
