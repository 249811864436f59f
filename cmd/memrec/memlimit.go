package main

import "runtime/debug"

// softMemoryLimit is the heap size the garbage collector keeps under unless
// GOMEMLIMIT says otherwise. By default Go lets the heap grow to twice what
// is live before it collects; under the limit it collects more often
// instead. The limit must stay above what a long run's analysis holds
// live, or the collector runs without pause, and low enough that a week's
// analysis of 8 GPUs stays within the long-run memory target with the
// file's pages (see bench/README.md, "Long runs: the week's analyze"). It
// is soft: a command that needs more still gets it.
const softMemoryLimit = 440 << 20

// limitMemory sets softMemoryLimit, unless the environment set a limit.
func limitMemory(getenv func(string) string) {
	if getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(softMemoryLimit)
	}
}
