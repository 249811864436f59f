package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
)

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
