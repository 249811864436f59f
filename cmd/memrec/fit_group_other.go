//go:build !linux

package main

import "syscall"

// groupAlive reports whether a process of group pgid is still there
// (zombies included, where /proc cannot tell them apart).
func groupAlive(pgid int) bool { return syscall.Kill(-pgid, 0) == nil }
