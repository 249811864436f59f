package fit

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// AdoptOrphans makes memrec the parent of every process its trials
// orphan, in place of init: a trial's child that left the process group
// (setsid, a daemon's double fork) is then found by its parent, memrec,
// and ended with the trial (endOrphans).
func AdoptOrphans() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }

// endOrphans kills every child of memrec that carries token in its
// environment (the trial's processes that outlived its group), and their
// children as they are orphaned in turn, and waits for each, for at most
// grace and a second. Only a process that carries the trial's token is
// touched: one memrec cannot prove is the trial's is left alone.
func endOrphans(token string, grace time.Duration) {
	want := []byte(trialEnv + "=" + token + "\x00")
	self := os.Getpid()
	deadline := time.Now().Add(grace + time.Second)
	for {
		pids := childrenWith(self, want)
		if len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		for _, pid := range pids {
			var ws unix.WaitStatus
			unix.Wait4(pid, &ws, 0, nil) // ours since it was orphaned: no one else waits for it
		}
	}
}

// childrenWith lists the live children of parent whose environment holds
// entry.
func childrenWith(parent int, entry []byte) []int {
	var pids []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 2 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if ppid, err := strconv.Atoi(string(f[1])); err != nil || ppid != parent {
			continue
		}
		env, err := os.ReadFile(filepath.Join(filepath.Dir(p), "environ"))
		if err != nil || !bytes.HasPrefix(env, entry) && !bytes.Contains(env, append([]byte{0}, entry...)) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// groupAlive reports whether a process of group pgid is still running:
// one whose /proc/PID/stat names the group and is not a zombie (a zombie
// has given its memory back; an orphan's is reaped by init in its time).
func groupAlive(pgid int) bool {
	dirs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range dirs {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...: comm may hold spaces and parens.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 3 || string(f[0]) == "Z" || string(f[0]) == "X" {
			continue
		}
		if g, err := strconv.Atoi(string(f[2])); err == nil && g == pgid {
			return true
		}
	}
	return false
}
