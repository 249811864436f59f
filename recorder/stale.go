package recorder

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// A recording's temporary folders (the socket's, the probe's for --torch)
// are named memrec-PID-* and memrec-probe-PID-*, for the user to read. The
// name proves nothing: a folder is memrec's only if it holds a marker that
// memrec wrote when it made the folder (see OwnedDir), and only such a
// folder is ever removed, one known file at a time (docs/limits.md).
const (
	socketDirPrefix = "memrec-"
	// MarkerName is the marker's file name inside an owned folder.
	MarkerName = ".memrec-owner"
	// markerMagic is the marker's first line, with its format's version.
	markerMagic = "memrec-owner 1"
	// maxMarker bounds what is read of a marker: a larger file is not one.
	maxMarker = 64 << 10
)

// TempDirPattern is the os.MkdirTemp pattern of a recording's temporary
// folder of the given kind ("" for the socket's, "probe" for the probe's).
func TempDirPattern(kind string) string {
	if kind == "" {
		return fmt.Sprintf("%s%d-", socketDirPrefix, os.Getpid())
	}
	return fmt.Sprintf("%s%s-%d-", socketDirPrefix, kind, os.Getpid())
}

// OwnedDir is a private temporary folder that this process made, with a
// marker inside naming its maker (a random token, the process id, its PID
// namespace and the boot) and the files put in it. Remove, or a later
// recorder's RemoveStale once this process is gone, removes those files
// and nothing else. Its methods are not safe for concurrent use.
type OwnedDir struct {
	Path  string
	owner owner
}

// owner is what a marker says.
type owner struct {
	token string
	pid   int
	pidNS string // the PID namespace, as "dev:inode" of /proc/self/ns/pid
	boot  string
	files []string // relative paths, slash-separated, of the files put in
}

// MakeOwnedDir creates a private folder under dir ("" for the system's
// temporary folder) named after kind (see TempDirPattern) and writes its
// marker. A process whose PID namespace or boot cannot be read still gets
// its folder, but nobody else will ever remove it.
func MakeOwnedDir(dir, kind string) (*OwnedDir, error) {
	tok := make([]byte, 16)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	d, err := os.MkdirTemp(dir, TempDirPattern(kind))
	if err != nil {
		return nil, err
	}
	o := &OwnedDir{Path: d, owner: owner{token: hex.EncodeToString(tok), pid: os.Getpid(), pidNS: pidNamespace(), boot: bootID()}}
	if err := os.Chmod(d, 0o700); err != nil {
		os.Remove(d)
		return nil, err
	}
	if err := o.writeMarker(); err != nil {
		os.Remove(filepath.Join(d, MarkerName))
		os.Remove(d)
		return nil, err
	}
	return o, nil
}

// Own records files (paths relative to the folder) as put there by this
// process, so that removing the folder removes them.
func (o *OwnedDir) Own(files ...string) error {
	for _, f := range files {
		f = filepath.ToSlash(filepath.Clean(f))
		if !localName(f) {
			return fmt.Errorf("%s: %q is not a path inside the folder", o.Path, f)
		}
		o.owner.files = append(o.owner.files, f)
	}
	return o.writeMarker()
}

func (o *OwnedDir) writeMarker() error {
	tmp := filepath.Join(o.Path, MarkerName+".new")
	if err := os.WriteFile(tmp, o.owner.marshal(), 0o600); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, filepath.Join(o.Path, MarkerName))
}

// Remove removes the files this process put in the folder, its marker and
// the folder, if the marker is still the one this process wrote. A file
// someone else put there keeps the folder (and itself) in place.
func (o *OwnedDir) Remove() error {
	m, err := readMarker(o.Path)
	if err != nil {
		return err
	}
	if m.token != o.owner.token {
		return fmt.Errorf("%s: its marker is not this process's; left as it is", o.Path)
	}
	return removeOwned(o.Path, m)
}

// RemoveStale removes from dir ("" for the system's temporary folder) the
// folders that recorders of this user made and left when they were killed:
// a folder is removed only if its marker reads as memrec's, names a process
// of this PID namespace and this boot, and that process is gone. Only the
// files the marker names are removed, then the folder if it is empty then.
// It returns how many folders it removed. Anything else is kept: folders
// without a valid marker whatever their name, of live recorders, of
// recorders in another PID namespace (another container sharing the
// folder) or whose namespace cannot be read, of other users.
func RemoveStale(dir string) int {
	if dir == "" {
		dir = os.TempDir()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	myNS, myBoot := pidNamespace(), bootID()
	if myNS == "" || myBoot == "" {
		return 0 // whether a process is alive cannot be told here
	}
	n := 0
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, socketDirPrefix) {
			continue
		}
		path := filepath.Join(dir, name)
		if !ownedByMe(path) {
			continue
		}
		m, err := readMarker(path)
		if err != nil || m.pidNS != myNS || m.boot != myBoot || m.pid == os.Getpid() || alive(m.pid) {
			continue
		}
		if removeOwned(path, m) == nil {
			n++
		}
	}
	return n
}

// removeOwned removes the marker's files (plain files and sockets only,
// never a folder's contents wholesale), the folders they were in if empty,
// the marker and path.
func removeOwned(path string, m owner) error {
	dirs := map[string]bool{}
	for _, f := range m.files {
		p := filepath.Join(path, filepath.FromSlash(f))
		if fi, err := os.Lstat(p); err == nil && (fi.Mode().IsRegular() || fi.Mode()&os.ModeSocket != 0) {
			os.Remove(p)
		}
		for d := filepath.Dir(f); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
		if stem, ok := strings.CutSuffix(f, ".py"); ok {
			// Python's compiled copy of a module memrec put there.
			cache := filepath.ToSlash(filepath.Join(filepath.Dir(stem), "__pycache__"))
			pyc, _ := filepath.Glob(filepath.Join(path, filepath.FromSlash(cache), globEscape(filepath.Base(stem))+".*.pyc"))
			for _, p := range pyc {
				if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
					os.Remove(p)
				}
			}
			dirs[cache] = true
		}
	}
	// Deepest first; a folder that is not empty (a file of the job's) stays.
	var sub []string
	for d := range dirs {
		sub = append(sub, d)
	}
	for changed := true; changed; {
		changed = false
		for _, d := range sub {
			if os.Remove(filepath.Join(path, filepath.FromSlash(d))) == nil {
				changed = true
			}
		}
	}
	if err := os.Remove(filepath.Join(path, MarkerName)); err != nil {
		return err
	}
	return os.Remove(path)
}

// globEscape quotes the characters filepath.Match gives a meaning.
func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, "*", `\*`, "?", `\?`, "[", `\[`)
	return r.Replace(s)
}

// readMarker reads and checks path's marker: a regular file of this user,
// small, every field present and well formed.
func readMarker(path string) (owner, error) {
	var m owner
	p := filepath.Join(path, MarkerName)
	fi, err := os.Lstat(p)
	if err != nil {
		return m, err
	}
	if !fi.Mode().IsRegular() || fi.Size() > maxMarker || !ownedByMe(p) {
		return m, fmt.Errorf("%s: not a memrec marker", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return m, err
	}
	if m, err = parseMarker(b); err != nil {
		return m, fmt.Errorf("%s: %w", p, err)
	}
	return m, nil
}

var errMarker = errors.New("not a memrec marker")

func (m owner) marshal() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\ntoken %s\npid %d\npidns %s\nboot %s\n", markerMagic, m.token, m.pid, m.pidNS, m.boot)
	for _, f := range m.files {
		fmt.Fprintf(&b, "file %s\n", f)
	}
	return b.Bytes()
}

func parseMarker(b []byte) (owner, error) {
	var m owner
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() || sc.Text() != markerMagic {
		return m, errMarker
	}
	seen := map[string]bool{}
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || val == "" {
			return m, fmt.Errorf("%w: line %q", errMarker, sc.Text())
		}
		if key != "file" && seen[key] {
			return m, fmt.Errorf("%w: %s given twice", errMarker, key)
		}
		seen[key] = true
		switch key {
		case "token":
			if _, err := hex.DecodeString(val); err != nil || len(val) != 32 {
				return m, fmt.Errorf("%w: token %q", errMarker, val)
			}
			m.token = val
		case "pid":
			pid, err := strconv.Atoi(val)
			if err != nil || pid <= 0 {
				return m, fmt.Errorf("%w: pid %q", errMarker, val)
			}
			m.pid = pid
		case "pidns":
			m.pidNS = val
		case "boot":
			m.boot = val
		case "file":
			if !localName(val) {
				return m, fmt.Errorf("%w: file %q is not inside its folder", errMarker, val)
			}
			m.files = append(m.files, val)
		default:
			return m, fmt.Errorf("%w: unknown field %q", errMarker, key)
		}
	}
	if m.token == "" || m.pid == 0 || m.pidNS == "" || m.boot == "" {
		return m, fmt.Errorf("%w: a field is missing", errMarker)
	}
	return m, nil
}

// localName says whether a slash-separated path stays inside its folder and
// is not the marker.
func localName(f string) bool {
	return filepath.IsLocal(filepath.FromSlash(f)) && f == filepath.ToSlash(filepath.Clean(f)) && f != MarkerName
}

// pidNamespace is this process's PID namespace ("" if it cannot be read):
// a process id means something only inside its namespace.
func pidNamespace() string {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/pid", &st); err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// bootID is the kernel's boot id ("" if it cannot be read): a process id
// of an earlier boot names no process of this one.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// alive reports whether a process with that id exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func ownedByMe(path string) bool {
	fi, err := os.Lstat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == os.Getuid()
}
