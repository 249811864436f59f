//go:build !linux

package fit

import (
	"syscall"
	"time"
)

// AdoptOrphans does nothing where the system has no child subreapers:
// a trial's descendants that leave its process group are not found.
func AdoptOrphans() error { return nil }

// endOrphans does nothing where memrec cannot adopt orphans.
func endOrphans(token string, grace time.Duration) {}

// groupAlive reports whether a process of group pgid is still there
// (zombies included, where /proc cannot tell them apart).
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
