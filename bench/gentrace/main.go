// Command gentrace writes a synthetic training run as JSON Lines (see
// internal/tracegen): by default 8 GPUs at 100 Hz for 10 minutes, about a
// million lines.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/memrec/memrec/internal/tracegen"
)

func main() {
	c := tracegen.Default()
	flag.StringVar(&c.Name, "name", c.Name, "run name")
	flag.IntVar(&c.GPUs, "gpus", c.GPUs, "GPUs")
	flag.DurationVar(&c.Duration, "duration", c.Duration, "length of the run")
	flag.DurationVar(&c.Interval, "interval", c.Interval, "NVML sampling interval")
	flag.Uint64Var(&c.Seed, "seed", c.Seed, "random seed")
	flag.Parse()
	truth, err := tracegen.Write(os.Stdout, c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "gentrace: %d lines, %d steps\n", truth.Lines, truth.Steps)
}
