package main

import "github.com/spf13/cobra"

// addCPUProfileFlag adds the hidden --cpuprofile of a command that reads
// long runs (report, compare, export), for tuning it; analyze and record
// declare theirs beside their other flags.
func addCPUProfileFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVar(path, "cpuprofile", "", "write a CPU profile of the command to this file")
	_ = cmd.Flags().MarkHidden("cpuprofile")
}

// profiled runs f under a CPU profile written to path ("" profiles
// nothing).
func profiled(path string, f func() error) error {
	stop, err := startCPUProfile(path)
	if err != nil {
		return err
	}
	defer stop()
	return f()
}
