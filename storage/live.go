package storage

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// A run that an Appender writes carries a marker of its writer (Run.Writer)
// from its creation to its final commit, which clears it. Delete reads it:
// a recorder that is alive would write the run back at its next commit
// (a ShortLock writer lets other commands open the file between its
// transactions), so its run is refused; a marker whose process is gone is
// stale, and is removed only when asked (DeleteOptions.Force).

// Writer names the process writing a run: its id, PID namespace and boot,
// which tell whether it is alive, and a random token of the Appender.
type Writer struct {
	PID   int    `json:"pid"`
	PIDNS string `json:"pid_ns,omitempty"` // "dev:inode" of /proc/self/ns/pid; "" unknown
	Boot  string `json:"boot,omitempty"`   // the kernel's boot id; "" unknown
	Token string `json:"token"`
}

// WriterState is what can be told of a run's writer from here.
type WriterState int

const (
	WriterNone    WriterState = iota // no marker: no writer, or its last commit cleared it
	WriterAlive                      // its process runs, in this PID namespace and boot
	WriterGone                       // its process is gone (not alive here, or of another boot)
	WriterUnknown                    // in another PID namespace, or this system cannot tell
)

// ErrRecording is a delete refused because the run's recorder writes it.
var ErrRecording = errors.New("a recorder is writing the run")

// ErrStaleWriter is a delete refused because the run carries the marker of
// a recorder that is gone (or cannot be seen from here); DeleteOptions.Force
// removes it.
var ErrStaleWriter = errors.New("the run's recorder stopped before its last commit")

func thisWriter() *Writer {
	tok := make([]byte, 16)
	rand.Read(tok)
	return &Writer{PID: os.Getpid(), PIDNS: pidNamespace(), Boot: bootID(), Token: hex.EncodeToString(tok)}
}

// State tells whether the writer w is alive; a nil w is WriterNone.
func (w *Writer) State() WriterState {
	if w == nil {
		return WriterNone
	}
	boot, ns := bootID(), pidNamespace()
	switch {
	case w.Boot != "" && boot != "" && w.Boot != boot:
		return WriterGone // a process of an earlier boot
	case w.PIDNS == "" || ns == "" || w.PIDNS != ns || w.Boot == "" || boot == "":
		return WriterUnknown
	case w.PID == os.Getpid() || alive(w.PID):
		return WriterAlive
	}
	return WriterGone
}

// checkWriter refuses to delete a run that a recorder writes; one whose
// writer is gone or unknown only with force.
func checkWriter(r Run, force bool) error {
	switch r.Writer.State() {
	case WriterAlive:
		return fmt.Errorf("run %q: %w (pid %d); stop it first", r.Name, ErrRecording, r.Writer.PID)
	case WriterGone, WriterUnknown:
		if !force {
			how := "is gone"
			if r.Writer.State() == WriterUnknown {
				how = "cannot be seen from here (another PID namespace or boot)"
			}
			return fmt.Errorf("run %q: %w: its recorder (pid %d) %s", r.Name, ErrStaleWriter, r.Writer.PID, how)
		}
	}
	return nil
}

func pidNamespace() string {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/pid", &st); err != nil {
		return ""
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
