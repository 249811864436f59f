package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/merge"
	"github.com/memrec/memrec/storage"
)

type mergeOptions struct {
	*globals
	name    string
	replace bool
}

func newMergeCmd(g *globals) *cobra.Command {
	o := &mergeOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "merge OUT.db IN.db[:RUN]...",
		Short: "Join the runs of a multi-node job, one per node, into one run",
		Long: `Join the runs of one multi-node job, each recorded on its own node into its own
database, into one run in OUT.db whose GPUs are numbered across the nodes (each
keeps its host and NVML index). The nodes' clocks are aligned on their common
step marks (data-parallel ranks finish each step together) and each node's offset
is printed. IN.db:RUN picks a run where a file holds several.

The runs must be of one job (record --job, or TORCHELASTIC_RUN_ID / SLURM_JOB_ID
at recording), from different hosts, with no GPU in two of them: otherwise
nothing is written. OUT.db may already exist; it must not be one of the inputs.`,
		Example: `  memrec merge job.db node0.db node1.db node2.db node3.db
  memrec merge --name resnet-4n job.db node*.db
  memrec merge job.db a.db:run-20250101-120000 b.db:run-20250101-120001`,
		Args: cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return stoppedSaying(ctx, o.io.Err, runMerge(ctx, o, args[0], args[1:]), "nothing was written")
		},
	}
	cmd.Flags().StringVar(&o.name, "name", "", "name of the merged run (default: the job id, or the first run's name)")
	cmd.Flags().BoolVar(&o.replace, "replace", false, "replace a stored run of the same name")
	return cmd
}

// splitRunRef splits FILE[:RUN]; a colon belongs to the file name when
// the whole argument names an existing file.
func splitRunRef(arg string) (file, run string) {
	if _, err := os.Stat(arg); err == nil {
		return arg, ""
	}
	if i := strings.LastIndexByte(arg, ':'); i > 0 {
		return arg[:i], arg[i+1:]
	}
	return arg, ""
}

func runMerge(ctx context.Context, o *mergeOptions, out string, args []string) error {
	outAbs, _ := filepath.Abs(out)
	outInfo, _ := os.Stat(out) // nil for a new file
	var inputs []merge.Input
	for _, a := range args {
		file, ref := splitRunRef(a)
		if abs, _ := filepath.Abs(file); abs == outAbs {
			return fmt.Errorf("%s is both the output and an input: merge into a new file", file)
		}
		// A link (or another path) to an input is that input: opening it
		// to write would wait on the input's own lock.
		if in, err := os.Stat(file); err == nil && outInfo != nil && os.SameFile(in, outInfo) {
			return fmt.Errorf("%s is the input %s (the same file): merge into a new file", out, file)
		}
		db, err := openInput(inputs, file)
		if err != nil {
			return err
		}
		r, err := pickRun(db, file, ref)
		if err != nil {
			return err
		}
		inputs = append(inputs, merge.Input{File: file, DB: db, Run: r})
	}
	defer closeInputs(inputs)
	dst, err := storage.Open(out, storage.Options{})
	if err != nil {
		return err
	}
	defer dst.Close()
	return doMerge(ctx, o, dst, out, inputs)
}

func doMerge(ctx context.Context, o *mergeOptions, dst *storage.DB, out string, inputs []merge.Input) error {
	t0 := time.Now()
	run, err := merge.Runs(ctx, dst, inputs, merge.Options{Name: o.name, Replace: o.replace})
	if errors.Is(err, storage.ErrExists) {
		return fmt.Errorf("merge: %w: give --name or --replace (nothing was written)", err)
	}
	if err != nil {
		return fmt.Errorf("merge: %w (nothing was written)", err)
	}
	printMerge(o.io.Out, run, out, time.Since(t0))
	return nil
}

// openInput opens file read-only, or returns the handle an earlier input
// already opened.
func openInput(prev []merge.Input, file string) (*storage.DB, error) {
	for _, p := range prev {
		if p.File == file {
			return p.DB, nil
		}
	}
	return storage.Open(file, storage.Options{ReadOnly: true})
}

func closeInputs(in []merge.Input) {
	seen := map[*storage.DB]bool{}
	for _, p := range in {
		if !seen[p.DB] {
			seen[p.DB] = true
			p.DB.Close()
		}
	}
}

// pickRun returns the run ref of db, or its only run.
func pickRun(db *storage.DB, file, ref string) (storage.Run, error) {
	if ref != "" {
		r, err := db.Run(ref)
		if err != nil {
			return r, fmt.Errorf("%s: %w", file, err)
		}
		return r, nil
	}
	runs, err := db.Runs()
	if err != nil {
		return storage.Run{}, fmt.Errorf("%s: %w", file, err)
	}
	switch len(runs) {
	case 1:
		return runs[0], nil
	case 0:
		return storage.Run{}, fmt.Errorf("%s: %w", file, storage.ErrNoRun)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Name)
	}
	return storage.Run{}, fmt.Errorf("%s holds %d runs (%s): name one as %s:RUN", file, len(runs), strings.Join(names, ", "), file)
}

func printMerge(w io.Writer, r storage.Run, out string, took time.Duration) {
	job := ""
	if r.Job != "" {
		job = fmt.Sprintf(" of job %q", r.Job)
	}
	fmt.Fprintf(w, "merged %d runs%s into %s, run %q (id %d): %d GPUs, %d samples, %d allocator samples, %d marks, in %s\n",
		len(r.Hosts), job, out, r.Name, r.ID, len(r.GPUs), r.Counts.Samples, r.Counts.TorchSamples, r.Counts.Marks, units.FormatDuration(took.Seconds()))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "host\trun\tGPUs\tclock offset\taligned on\tspread")
	for i, h := range r.Hosts {
		off, on, spread := "", "", ""
		switch {
		case i == 0:
			off, on = "0 (reference)", fmt.Sprintf("%d steps", h.CommonSteps)
		case h.CommonSteps == 0:
			off, on = "0 (NOT ALIGNED)", "no common step marks"
		default:
			off = fmt.Sprintf("%+.6f s", float64(h.OffsetNS)/1e9)
			on = fmt.Sprintf("%d steps", h.CommonSteps)
			spread = fmt.Sprintf("%.3f ms", float64(h.SpreadNS)/1e6)
		}
		state := ""
		if !h.Complete {
			state = " (incomplete)"
		}
		fmt.Fprintf(tw, "%s\t%s%s\t%d\t%s\t%s\t%s\n", h.Name, h.Run, state, h.GPUs, off, on, spread)
	}
	tw.Flush()
}
