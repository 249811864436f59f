package main

import "runtime/debug"

// softMemoryLimit is the heap size the garbage collector keeps under unless
// GOMEMLIMIT says otherwise. By default Go lets the heap grow to twice what
// is live before it collects; under the limit it collects more often
// instead. A day-long run of 8 GPUs holds about 250 MB live while it is
// analysed, a week about 470 MB: the limit must stay well above that, or
// the collector runs without pause (a week took twice the CPU under 300
// MiB), and low enough that a week's analysis stays under 1 GiB resident
// with the file's pages. It is soft: a command that needs more still gets
// it.
const softMemoryLimit = 600 << 20

// limitMemory sets softMemoryLimit, unless the environment set a limit.
func limitMemory(getenv func(string) string) {
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(softMemoryLimit)
	}
}
