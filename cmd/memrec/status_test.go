package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
)

func TestStatusLine(t *testing.T) {
	for _, tc := range []struct {
		s    recorder.Status
		want string
	}{
		{recorder.Status{Elapsed: 65*time.Second + 300*time.Millisecond, Epoch: 2, Step: 340, Samples: 6500, Missed: 0,
			GPUs: []recorder.GPUStatus{{Index: 0, Used: 12*(1<<30) + 3*(1<<30)/10, Total: 140*(1<<30) + 4*(1<<30)/10, Seen: true}, {Index: 1}}},
			"● 1m5s  gpu0 12.30 GiB/140.40 GiB  gpu1 –  epoch 2 step 340  6500 samples  0 missed"},
		{recorder.Status{Elapsed: 900 * time.Millisecond, Epoch: storage.None, Step: storage.None, Samples: 3, Missed: 7,
			GPUs: []recorder.GPUStatus{{Index: 3, Used: 5 << 20, Seen: true}}},
			"● 0s  gpu3 5.0 MiB  3 samples  7 missed"},
	} {
		if got := statusLine(tc.s); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

// openPTY opens a pseudo-terminal: the program's end (a terminal) and the
// reader's end.
func openPTY(t *testing.T) (term, reader *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Skipf("unlockpt: %v", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Skipf("ptsname: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("open pts: %v", err)
	}
	t.Cleanup(func() { s.Close(); m.Close() })
	return s, m
}

// TestRecordStatusOnTerminal: on a terminal, record redraws one status
// line about every second and erases it before the summary; into a file
// it writes no status at all.
func TestRecordStatusOnTerminal(t *testing.T) {
	t.Parallel()
	term, reader := openPTY(t)
	if !isTerminal(term) {
		t.Fatal("a pseudo-terminal is not taken for a terminal")
	}
	var mu sync.Mutex
	var seen bytes.Buffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := reader.Read(buf)
			mu.Lock()
			seen.Write(buf[:n])
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	db := filepath.Join(t.TempDir(), "m.db")
	args := []string{"--db", db, "record", "--source", "sim", "--sim-gpus", "2", "--duration", "2500ms", "--name", "tty"}
	if code := execute(context.Background(), args, streams{In: strings.NewReader(""), Out: io.Discard, Err: term}); code != 0 {
		t.Fatalf("record exited %d", code)
	}
	// The reader gets what was written once the terminal has passed it on:
	// wait for the summary's last line.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		out := seen.String()
		mu.Unlock()
		if strings.Contains(out, `run "tty"`) || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	out := seen.String()
	mu.Unlock()
	if n := strings.Count(out, "\r● "); n < 2 || n > 3 {
		t.Errorf("%d status lines in 2.5 s, want 2 (one a second):\n%q", n, out)
	}
	if !strings.Contains(out, "gpu0 ") || !strings.Contains(out, "gpu1 ") || !strings.Contains(out, " samples ") {
		t.Errorf("status line without the GPUs or samples:\n%q", out)
	}
	last := strings.LastIndex(out, "\r● ")
	if erase := strings.Index(out[last:], "\r\x1b[K"); erase < 0 || !strings.Contains(out[last+erase:], "recorded") {
		t.Errorf("the status line is not erased before the summary:\n%q", out)
	}

	// Not a terminal: a file gets the summary only.
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	args[len(args)-1] = "file"
	if code := execute(context.Background(), args, streams{In: strings.NewReader(""), Out: io.Discard, Err: f}); code != 0 {
		t.Fatalf("record exited %d", code)
	}
	b, _ := os.ReadFile(f.Name())
	if bytes.Contains(b, []byte("\r")) || bytes.Contains(b, []byte("●")) || !bytes.Contains(b, []byte("recorded")) {
		t.Errorf("stderr into a file:\n%q", b)
	}
}

// TestStatusLineFitsAnEightyColumnTerminal draws record's status for 8
// GPUs in a real terminal of 80 columns (tmux): the line never wraps, so
// each redraw replaces it and no stale copy is left above; once the run
// ends the summary replaces it.
func TestStatusLineFitsAnEightyColumnTerminal(t *testing.T) {
	t.Parallel()
	tmux, err := exec.LookPath("tmux")
	if err != nil {
		t.Skip("no tmux (Debian: apt-get install tmux)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "tmux.sock")
	tm := func(args ...string) string {
		out, err := exec.Command(tmux, append([]string{"-S", sock}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("tmux %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	cmd := fmt.Sprintf("MEMREC_AS_MAIN=1 %s --db %s record --source sim --sim-gpus 8 --duration 4s --name wide; sleep 30",
		exe, filepath.Join(dir, "m.db"))
	tm("-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "30", "sh", "-c", cmd)
	t.Cleanup(func() { exec.Command(tmux, "-S", sock, "kill-server").Run() })
	if w := strings.TrimSpace(tm("display-message", "-p", "#{pane_width}")); w != "80" {
		t.Fatalf("pane width %s, want 80", w)
	}
	check := func(when string, wantStatus int) string {
		screen := tm("capture-pane", "-p", "-J")
		status := 0
		for _, l := range strings.Split(screen, "\n") {
			if !strings.HasPrefix(l, "●") {
				continue // the summary's lines may wrap: they are written once
			}
			status++
			if utf8.RuneCountInString(l) > 80 {
				t.Errorf("%s: a status line of %d columns (joined from wrapped rows): %q", when, utf8.RuneCountInString(l), l)
			}
		}
		if status != wantStatus {
			t.Errorf("%s: %d status lines on the screen, want %d:\n%s", when, status, wantStatus, screen)
		}
		return screen
	}
	time.Sleep(2500 * time.Millisecond) // a few redraws
	if s := check("while recording", 1); !strings.Contains(s, "8 GPUs, fullest gpu") && !strings.Contains(s, "gpu7") {
		t.Errorf("the status names no GPU:\n%s", s)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(tm("capture-pane", "-p"), "database") {
		if time.Now().After(deadline) {
			t.Fatalf("no summary:\n%s", tm("capture-pane", "-p"))
		}
		time.Sleep(200 * time.Millisecond)
	}
	check("after the summary", 0)
}

func TestFitStatus(t *testing.T) {
	gpus := make([]recorder.GPUStatus, 8)
	for i := range gpus {
		gpus[i] = recorder.GPUStatus{Index: i, Used: int64(i+1) << 30, Total: 140 << 30, Seen: true}
	}
	s := recorder.Status{Elapsed: 3 * time.Hour, Epoch: 12, Step: 123456, Samples: 123456789, Missed: 3, GPUs: gpus}
	for _, w := range []int{0, 200, 120, 79, 60, 40, 10, 1} {
		got := fitStatus(s, w)
		if n := utf8.RuneCountInString(got); w > 0 && n > w {
			t.Errorf("width %d: %d columns: %q", w, n, got)
		}
		if w >= 60 && !strings.Contains(got, "gpu7") {
			t.Errorf("width %d: the fullest GPU is not named: %q", w, got)
		}
	}
	if got := fitStatus(s, 79); !strings.Contains(got, "8 GPUs, fullest gpu7 8.00 GiB/140.00 GiB") || !strings.Contains(got, "epoch 12 step 123456") {
		t.Errorf("80 columns: %q", got)
	}
}
