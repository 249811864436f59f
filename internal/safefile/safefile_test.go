package safefile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestCommitAndAbort: the target appears only at Commit, replacing what
// was there; Abort leaves the folder as it was.
func TestCommitAndAbort(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "out.csv")
	if err := os.WriteFile(target, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := Create(target)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("new")
	if b, _ := os.ReadFile(target); string(b) != "old" {
		t.Fatalf("target changed before Commit: %q", b)
	}
	if err := f.Commit(); err != nil {
		t.Fatal(err)
	}
	f.Abort() // after Commit: nothing
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Fatalf("after Commit: %q", b)
	}

	g, err := Create(target)
	if err != nil {
		t.Fatal(err)
	}
	g.WriteString("half")
	g.Abort()
	if b, _ := os.ReadFile(target); string(b) != "new" {
		t.Fatalf("after Abort: %q", b)
	}
	if e, _ := os.ReadDir(dir); len(e) != 1 {
		t.Fatalf("folder holds %d entries after Abort, want the target only", len(e))
	}
}

// TestUmaskHonoured: the file gets 0666 less the umask, like os.Create,
// not CreateTemp's 0600.
func TestUmaskHonoured(t *testing.T) {
	for _, tc := range []struct{ umask, want os.FileMode }{{0o022, 0o644}, {0o027, 0o640}, {0o077, 0o600}, {0o002, 0o664}} {
		old := syscall.Umask(int(tc.umask))
		target := filepath.Join(t.TempDir(), "x")
		f, err := Create(target)
		if err == nil {
			err = f.Commit()
		}
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(target)
		if fi.Mode().Perm() != tc.want {
			t.Errorf("umask %03o: mode %03o, want %03o", tc.umask, fi.Mode().Perm(), tc.want)
		}
	}
}

// TestCreateNeverFollowsALink: a link planted under a temporary's name is
// not written through (O_EXCL picks another name).
func TestCreateNeverFollowsALink(t *testing.T) {
	dir := t.TempDir()
	f, err := Create(filepath.Join(dir, "t"))
	if err != nil {
		t.Fatal(err)
	}
	name := f.Name()
	f.Abort()
	victim := filepath.Join(dir, "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	os.Symlink(victim, name)
	g, err := Create(filepath.Join(dir, "t"))
	if err != nil {
		t.Fatal(err)
	}
	g.WriteString("x")
	if err := g.Commit(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("victim written: %q", b)
	}
}

func TestName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"node-1.cluster", "node-1.cluster"},
		{"/../../x/pwn", "_.._.._x_pwn"},
		{"..", "_."},
		{".hidden", "_hidden"},
		{"", "_"},
		{"a\x1b[2Jb\nc\x7f", "a__2Jb_c_"},
		{"bs=64 amp", "bs_64_amp"},
		{"gpu\u00e9", "gpu\u00e9"},
		{"bad\xffutf8", "bad_utf8"},
		{strings.Repeat("a", 300), strings.Repeat("a", 128)},
	} {
		if got := Name(tc.in); got != tc.want {
			t.Errorf("Name(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
