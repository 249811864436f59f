// Package safefile writes a file so that it appears whole or not at all.
//
// A File is a temporary file beside its target; Commit renames it onto the
// target, Abort removes it. Until Commit the target is untouched, so an
// export stopped by an error or a signal leaves no half file and no
// temporary behind.
//
// The temporary is created with mode 0666 less the process umask, as
// os.Create would, and not os.CreateTemp's 0600: an exported CSV or event
// file must be readable by the notebook or TensorBoard server that the
// umask allows, like the database itself.
package safefile

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Prefix starts the name of every temporary this package makes, followed
// by the target's base name; a leftover one (after kill -9) is recognisable.
const Prefix = ".memrec-tmp-"

// File is a file being written; it becomes its target at Commit. Not safe
// for concurrent use. Abort after Commit does nothing, so
// `defer f.Abort()` is the usual way to clean up on every error path.
type File struct {
	*os.File
	target string
	done   bool
}

// Create starts writing target. Its folder must exist. Nothing is written
// to target itself until Commit.
func Create(target string) (*File, error) {
	dir, base := filepath.Split(target)
	if dir == "" {
		dir = "."
	}
	for range 100 {
		name := filepath.Join(dir, Prefix+base+"."+strconv.FormatUint(rand.Uint64()>>16, 36))
		// O_EXCL: never write into a file someone else made, or follow a
		// link planted under the name.
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return &File{File: f, target: target}, nil
	}
	return nil, fmt.Errorf("%s: no free temporary name in %s", target, dir)
}

// Commit closes the file and renames it onto the target, replacing a file
// there. On error the temporary is removed and the target is as before.
func (f *File) Commit() error {
	if f.done {
		return errors.New("safefile: Commit after Commit or Abort")
	}
	f.done = true
	err := f.File.Close()
	if err == nil {
		err = os.Rename(f.File.Name(), f.target)
	}
	if err != nil {
		os.Remove(f.File.Name())
	}
	return err
}

// Abort closes and removes the temporary; the target is untouched. It
// does nothing after Commit or a first Abort.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.File.Close()
	os.Remove(f.File.Name())
}

// Target is the path the file becomes at Commit.
func (f *File) Target() string { return f.target }

// maxName bounds a name made by Name, in bytes, well inside the 255 bytes
// a file name may have on Linux, leaving room for a prefix and suffix.
const maxName = 128

// Name turns a name from the data (a host, a run, a GPU) into one path
// component: letters, digits and . _ + - stay, every other character (a
// slash, a control character, a space, '=') becomes '_', a leading '.'
// becomes '_' (no "..", no hidden file), and the result is cut to 128
// bytes. "" becomes "_". Names that differ only in replaced characters
// map to the same component; callers that need them apart keep the
// original in the file's contents.
func Name(s string) string {
	b := make([]byte, 0, min(len(s), maxName))
	for _, r := range s {
		ok := r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._+-", r)) ||
			r >= utf8.RuneSelf && r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
		if !ok || len(b) == 0 && r == '.' {
			r = '_'
		}
		if len(b)+utf8.RuneLen(r) > maxName {
			break
		}
		b = utf8.AppendRune(b, r)
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
