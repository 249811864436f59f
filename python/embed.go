// Package python carries memrec's PyTorch probe (the Python package in
// this folder) inside the memrec binary, so `memrec record --torch` can load
// it into a training script that was not changed and not pip-installed.
package python

import (
	"embed"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

//go:embed memrec/*.py memrec_autoload/sitecustomize.py
var files embed.FS

// Install writes the probe into dir and returns the PYTHONPATH entries
// that load it at Python start-up: the sitecustomize folder first, then the
// package's.
func Install(dir string) ([]string, error) {
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := files.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(dir, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return err
		}
		return os.WriteFile(dst, b, 0o600)
	})
	if err != nil {
		return nil, err
	}
	return []string{filepath.Join(dir, "memrec_autoload"), dir}, nil
}

// PythonPath joins entries before an existing PYTHONPATH value.
func PythonPath(entries []string, existing string) string {
	if existing != "" {
		entries = append(entries, existing)
	}
	return strings.Join(entries, string(os.PathListSeparator))
}
