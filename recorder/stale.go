package recorder

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A recording's temporary folders (the socket's, the probe's for --torch)
// are named after the recorder's process, so that a later recorder can
// tell a killed one's leftovers from a live one's: memrec-PID-* and
// memrec-probe-PID-*.
const (
	socketDirPrefix = "memrec-"
	probeDirPrefix  = "memrec-probe-"
)

// TempDirPattern is the os.MkdirTemp pattern of a recording's temporary
// folder of the given kind ("" for the socket's, "probe" for the probe's).
func TempDirPattern(kind string) string {
	if kind == "" {
		return fmt.Sprintf("%s%d-", socketDirPrefix, os.Getpid())
	}
	return fmt.Sprintf("%s%s-%d-", socketDirPrefix, kind, os.Getpid())
}

// RemoveStale removes from dir ("" for the system's temporary folder) the
// temporary folders that killed recorders of this user left: those whose
// process is gone, and those of earlier versions (memrec-DIGITS) whose
// socket no longer takes connections. It returns how many it removed.
// Folders of live recorders, of other users and anything else are kept.
func RemoveStale(dir string) int {
	if dir == "" {
		dir = os.TempDir()
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0
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
		if stale(path, name) {
			if os.RemoveAll(path) == nil {
				n++
			}
		}
	}
	return n
}

func stale(path, name string) bool {
	rest := strings.TrimPrefix(name, socketDirPrefix)
	rest = strings.TrimPrefix(rest, "probe-")
	pidText, _, withPID := strings.Cut(rest, "-")
	if withPID {
		pid, err := strconv.Atoi(pidText)
		return err == nil && pid > 0 && pid != os.Getpid() && !alive(pid)
	}
	// An earlier version's socket folder: stale if its socket refuses.
	if strings.HasPrefix(name, probeDirPrefix) {
		return false // nothing tells whether it is in use
	}
	sock := filepath.Join(path, "marks.sock")
	if _, err := os.Lstat(sock); err != nil {
		return false
	}
	c, err := net.DialTimeout("unix", sock, time.Second)
	if err == nil {
		c.Close()
		return false
	}
	return errors.Is(err, syscall.ECONNREFUSED)
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
