package main

import "runtime/debug"

// softMemoryLimit is the heap size the garbage collector keeps under unless
// GOMEMLIMIT says otherwise. A day-long run's analysis holds about 250
// MB live, and by default Go lets the heap grow to twice what is live before
// it collects; under the limit it collects more often instead. It is soft:
// a command that needs more still gets it.
const softMemoryLimit = 300 << 20

// limitMemory sets softMemoryLimit, unless the environment set a limit.
func limitMemory(getenv func(string) string) {
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(softMemoryLimit)
	}
}
