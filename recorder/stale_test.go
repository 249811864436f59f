package recorder

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// leftFolder makes dir/name with files in it and, unless m is nil, a
// marker saying m.
func leftFolder(t *testing.T, dir, name string, m *owner, files ...string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	for _, f := range files {
		p := filepath.Join(path, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(path, 0o700)
	if m != nil {
		if err := os.WriteFile(filepath.Join(path, MarkerName), m.marshal(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

func TestRemoveStale(t *testing.T) {
	ns, boot := pidNamespace(), bootID()
	if ns == "" || boot == "" {
		t.Skip("no /proc: nothing is ever removed here")
	}
	dead := deadPID(t)
	ours := func(pid int, files ...string) *owner {
		return &owner{token: strings.Repeat("ab", 16), pid: pid, pidNS: ns, boot: boot, files: files}
	}
	otherNS := ours(dead, "marks.sock")
	otherNS.pidNS = "1:4026532000" // a live recorder of another container, whose pid means nothing here
	otherBoot := ours(dead, "marks.sock")
	otherBoot.boot = "00000000-0000-0000-0000-000000000000"

	for _, tc := range []struct {
		name    string
		marker  *owner
		raw     string // a marker's bytes, instead of marker
		files   []string
		removed bool
		left    []string // files that must still be there
	}{
		{name: "memrec-2024-results", files: []string{"sub/r.csv"}, left: []string{"sub/r.csv"}},
		{name: fmt.Sprintf("memrec-%d-111", dead), files: []string{"marks.sock"}, left: []string{"marks.sock"}},
		{name: fmt.Sprintf("memrec-%d-222", dead), marker: ours(dead, "marks.sock"), files: []string{"marks.sock"}, removed: true},
		{name: fmt.Sprintf("memrec-probe-%d-333", dead), marker: ours(dead, "memrec_autoload/sitecustomize.py", "memrec.py"),
			files: []string{"memrec_autoload/sitecustomize.py", "memrec_autoload/__pycache__/sitecustomize.cpython-311.pyc", "memrec.py"}, removed: true},
		{name: fmt.Sprintf("memrec-%d-444", dead), marker: ours(dead, "marks.sock"), files: []string{"marks.sock", "notes.txt"}, left: []string{"notes.txt"}},
		{name: fmt.Sprintf("memrec-%d-555", dead), marker: otherNS, files: []string{"marks.sock"}, left: []string{"marks.sock"}},
		{name: fmt.Sprintf("memrec-%d-666", dead), marker: otherBoot, files: []string{"marks.sock"}, left: []string{"marks.sock"}},
		{name: fmt.Sprintf("memrec-%d-777", os.Getppid()), marker: ours(os.Getppid(), "marks.sock"), files: []string{"marks.sock"}, left: []string{"marks.sock"}},
		{name: fmt.Sprintf("memrec-%d-888", dead), raw: "memrec-owner 1\ntoken zz\npid 1\n", files: []string{"marks.sock"}, left: []string{"marks.sock"}},
		{name: fmt.Sprintf("memrec-%d-999", dead), marker: ours(dead, "../outside"), files: []string{"marks.sock"}, left: []string{"marks.sock"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			outside := filepath.Join(dir, "outside")
			os.WriteFile(outside, nil, 0o600)
			path := leftFolder(t, dir, tc.name, tc.marker, tc.files...)
			if tc.raw != "" {
				os.WriteFile(filepath.Join(path, MarkerName), []byte(tc.raw), 0o600)
			}
			want := 0
			if tc.removed {
				want = 1
			}
			if n := RemoveStale(dir); n != want {
				t.Errorf("removed %d folders, want %d", n, want)
			}
			if _, err := os.Stat(path); tc.removed != os.IsNotExist(err) {
				t.Errorf("folder removed: %v, want %v", os.IsNotExist(err), tc.removed)
			}
			for _, f := range tc.left {
				if _, err := os.Stat(filepath.Join(path, f)); err != nil {
					t.Errorf("%s: %v", f, err)
				}
			}
			if _, err := os.Stat(outside); err != nil {
				t.Errorf("a file outside the folder: %v", err)
			}
		})
	}
}

// TestListenRemovesStale: starting a recorder clears what a killed one of
// this namespace provably left, and a folder named like a recorder's that
// is not one survives (a user's results folder with files in it).
func TestListenRemovesStale(t *testing.T) {
	if pidNamespace() == "" || bootID() == "" {
		t.Skip("no /proc: nothing is ever removed here")
	}
	dir := t.TempDir()
	users := filepath.Join(dir, "memrec-2024-results", "sub", "r.csv")
	os.MkdirAll(filepath.Dir(users), 0o700)
	os.WriteFile(users, []byte("x\n"), 0o600)

	// A recorder that was killed: its folder, made as Listen makes it.
	killed := exec.Command(os.Args[0], "-test.run=TestHelperMakeOwnedDir", "--", dir)
	killed.Env = append(os.Environ(), "MEMREC_HELPER_OWNED=1")
	out, err := killed.Output()
	if err != nil {
		t.Fatal(err)
	}
	leftover := strings.TrimSpace(string(out))
	if _, err := os.Stat(filepath.Join(leftover, "marks.sock")); err != nil {
		t.Fatal(err)
	}

	l, err := Listen(dir, &memSink{}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Error("the killed recorder's folder is still there")
	}
	if _, err := os.Stat(users); err != nil {
		t.Errorf("the user's file: %v", err)
	}
	if want := fmt.Sprintf("memrec-%d-", os.Getpid()); !strings.HasPrefix(filepath.Base(filepath.Dir(l.Path)), want) {
		t.Errorf("socket folder %s is not named %s*", filepath.Dir(l.Path), want)
	}
	sockDir := filepath.Dir(l.Path)
	l.Close(0)
	if _, err := os.Stat(sockDir); !os.IsNotExist(err) {
		t.Errorf("Close left its own folder: %v", err)
	}
}

// TestHelperMakeOwnedDir is the killed recorder of TestListenRemovesStale:
// it makes a socket folder and exits without removing it.
func TestHelperMakeOwnedDir(t *testing.T) {
	if os.Getenv("MEMREC_HELPER_OWNED") != "1" {
		t.Skip("helper process")
	}
	d, err := MakeOwnedDir(os.Args[len(os.Args)-1], "")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Own("marks.sock"); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.Path, "marks.sock"), nil, 0o600)
	fmt.Println(d.Path)
	os.Exit(0)
}

// TestOwnedDirRemove: a folder's own process removes the files it put
// there (and Python's compiled copies of its modules), never another's.
func TestOwnedDirRemove(t *testing.T) {
	d, err := MakeOwnedDir(t.TempDir(), "probe")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"a/m.py", "a/__pycache__/m.cpython-312.pyc", "b.py"} {
		os.MkdirAll(filepath.Dir(filepath.Join(d.Path, f)), 0o700)
		os.WriteFile(filepath.Join(d.Path, f), nil, 0o600)
	}
	if err := d.Own("a/m.py", "b.py"); err != nil {
		t.Fatal(err)
	}
	if err := d.Own("../x"); err == nil {
		t.Error("Own took a path outside the folder")
	}
	if err := d.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(d.Path); !os.IsNotExist(err) {
		t.Errorf("folder left: %v", err)
	}

	// A file of someone else's keeps it, and itself.
	d, err = MakeOwnedDir(t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	d.Own("marks.sock")
	other := filepath.Join(d.Path, "theirs")
	os.WriteFile(other, nil, 0o600)
	d.Remove()
	if _, err := os.Stat(other); err != nil {
		t.Errorf("another's file: %v", err)
	}
}
