package recorder

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// deadPID returns the id of a process that has exited.
func deadPID(t *testing.T) int {
	t.Helper()
	c := exec.Command("true")
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
	return c.Process.Pid
}

func TestRemoveStale(t *testing.T) {
	dir := t.TempDir()
	mk := func(name string, files ...string) {
		os.Mkdir(filepath.Join(dir, name), 0o700)
		for _, f := range files {
			os.WriteFile(filepath.Join(dir, name, f), nil, 0o600)
		}
	}
	dead := deadPID(t)
	mk(fmt.Sprintf("memrec-%d-111", dead), "marks.sock")              // killed recorder: removed
	mk(fmt.Sprintf("memrec-probe-%d-222", dead), "sitecustomize.py")  // its probe folder: removed
	mk(fmt.Sprintf("memrec-%d-333", os.Getpid()), "marks.sock")       // this process: kept
	mk(fmt.Sprintf("memrec-probe-%d-444", os.Getppid()), "memrec.py") // a live process: kept
	mk("memrec-probe-555", "memrec.py")                               // an earlier version's probe folder: kept
	mk("memrec-notes")                                                // not a recorder's: kept
	os.WriteFile(filepath.Join(dir, "memrec-file"), nil, 0o600)       // a file: kept

	// An earlier version's socket folders: one whose recorder was killed
	// (the socket file stays, nobody listens), one live.
	for _, tc := range []struct {
		name string
		live bool
	}{{"memrec-666", false}, {"memrec-777", true}} {
		mk(tc.name)
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(dir, tc.name, "marks.sock"), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		ln.SetUnlinkOnClose(false)
		if tc.live {
			defer ln.Close()
		} else {
			ln.Close()
		}
	}

	if n := RemoveStale(dir); n != 3 {
		t.Errorf("removed %d folders, want 3", n)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	want := []string{fmt.Sprintf("memrec-%d-333", os.Getpid()), "memrec-777", "memrec-file", "memrec-notes",
		"memrec-probe-555", fmt.Sprintf("memrec-probe-%d-444", os.Getppid())}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("left %v\nwant %v", names, want)
	}
}

// TestListenRemovesStale: a recorder's socket folder is named after its
// process, and starting one clears what a killed one left.
func TestListenRemovesStale(t *testing.T) {
	dir := t.TempDir()
	leftover := filepath.Join(dir, fmt.Sprintf("memrec-%d-1", deadPID(t)))
	os.Mkdir(leftover, 0o700)
	l, err := Listen(dir, &memSink{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close(0)
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Error("the killed recorder's folder is still there")
	}
	if want := fmt.Sprintf("memrec-%d-", os.Getpid()); !strings.HasPrefix(filepath.Base(filepath.Dir(l.Path)), want) {
		t.Errorf("socket folder %s is not named %s*", filepath.Dir(l.Path), want)
	}
}
