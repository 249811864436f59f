//go:build !linux

package main

import "os"

// isTerminal says whether f is a terminal; off Linux the status line is
// not drawn.
func isTerminal(f *os.File) bool { return false }

// terminalWidth is 80 off Linux, where no line is drawn.
func terminalWidth(f *os.File) int { return 80 }
