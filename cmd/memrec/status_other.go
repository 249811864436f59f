//go:build !linux

package main

import "os"

// isTerminal says whether f is a terminal; off Linux the status line is
// not drawn.
func isTerminal(f *os.File) bool { return false }
