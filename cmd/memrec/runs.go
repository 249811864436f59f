package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

type runsOptions struct {
	*globals
	json  bool
	check bool
}

func newRunsCmd(g *globals) *cobra.Command {
	o := &runsOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the runs in the database",
		Example: `  memrec runs
  memrec runs --json | jq '.[].name'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runRuns(o) },
	}
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	cmd.Flags().BoolVar(&o.check, "check", false, "also decode every chunk and report damage")
	return cmd
}

// runSummary is one run as `memrec runs --json` prints it.
type runSummary struct {
	storage.Run
	DurationS float64 `json:"duration_s"`
	Status    string  `json:"status"`
}

func runRuns(o *runsOptions) error {
	db, err := o.openRead()
	if err != nil {
		return err
	}
	defer db.Close()
	runs, err := db.Runs()
	if err != nil {
		return err
	}
	var damaged *storage.CheckError
	if o.check {
		if err := db.Check(); errors.As(err, &damaged) {
			// Every run was checked: the table still lists them all.
		} else if err != nil {
			return err
		}
		n, err := db.Unsummarized()
		if err != nil {
			return err
		}
		if n > 0 {
			fmt.Fprintf(o.io.Err, "%s: %d chunks have no summary (written before summaries, or by a recording that did not end); memrec compact adds them, and memrec view then opens long runs from them\n", db.Path(), n)
		}
	}
	if o.json {
		out := make([]runSummary, 0, len(runs))
		for _, r := range runs {
			out = append(out, runSummary{Run: r, DurationS: r.Duration().Seconds(), Status: status(r)})
		}
		enc := json.NewEncoder(o.io.Out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil || damaged == nil {
			return err
		}
		return damagedRuns(db.Path(), damaged)
	}
	if len(runs) == 0 {
		fmt.Fprintf(o.io.Out, "no runs in %s\n", db.Path())
		return nil
	}
	printRuns(o.io.Out, runs)
	if damaged != nil {
		names := map[uint64]string{}
		for _, r := range runs {
			names[r.ID] = r.Name
		}
		for _, p := range damaged.Problems {
			more := ""
			if p.BadChunks > 1 {
				more = fmt.Sprintf(" (%d damaged chunks)", p.BadChunks)
			}
			fmt.Fprintf(o.io.Out, "check: run %q: %v%s\n", names[p.ID], p.Err, more)
		}
		return damagedRuns(db.Path(), damaged)
	}
	if o.check {
		fmt.Fprintf(o.io.Out, "check: all %d runs OK (every chunk decoded, every summary matched)\n", len(runs))
	}
	return nil
}

// damagedRuns is runs --check's verdict on a file with damaged runs.
func damagedRuns(path string, e *storage.CheckError) error {
	return fmt.Errorf("%s: %d of %d runs have problems (the others are OK): %w", path, len(e.Problems), e.Runs, errors.Join(e.Unwrap()...))
}

func status(r storage.Run) string {
	if r.Recorder.NotStarted != "" {
		return "command not started"
	}
	if r.Complete {
		return "complete"
	}
	return "incomplete"
}

func printRuns(w io.Writer, runs []storage.Run) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tID\tHOST\tSTART\tDURATION\tGPUS\tSAMPLES\tMARKS\tSTATUS\tTAGS")
	for _, r := range runs {
		host := r.Host
		if len(r.Hosts) > 0 {
			host = fmt.Sprintf("%d hosts", len(r.Hosts))
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", r.Name, r.ID, host,
			time.Unix(0, r.StartNS).Local().Format("2006-01-02 15:04:05"), units.FormatDuration(r.Duration().Seconds()),
			len(r.GPUs), r.Counts.Samples+r.Counts.ProcSamples+r.Counts.TorchSamples, r.Counts.Marks, status(r), formatTags(r.Tags))
	}
	tw.Flush()
}

func formatTags(tags map[string]string) string {
	keys := make([]string, 0, len(tags))
	for k := range tags {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + tags[k]
	}
	return strings.Join(parts, ",")
}
