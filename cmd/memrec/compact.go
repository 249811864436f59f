package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/storage"
)

type compactOptions struct {
	*globals
	wait time.Duration
}

func newCompactCmd(g *globals) *cobra.Command {
	o := &compactOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "compact",
		Short: "Rewrite the database file without its free pages, with every chunk's summary",
		Long: `Rewrite the database into a new file beside it without the pages that
recording and rm leave free, check it, and rename it over the old one. A
process killed meanwhile leaves the old file as it was. memrec record does
this itself at its end when free pages are a tenth of the file or more.

First it gives every chunk that has none its summary (files written by a
memrec before summaries, a recording killed before its end), so that the
viewer and the report draw a long run's overview from them instead of
from every sample.`,
		Example: `  memrec compact
  memrec --db runs.db compact --wait 30s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return stoppedSaying(ctx, o.io.Err, runCompact(ctx, o), "the database is as it was")
		},
	}
	cmd.Flags().DurationVar(&o.wait, "wait", time.Second, "how long to wait for other memrec processes to release the file")
	return cmd
}

func runCompact(ctx context.Context, o *compactOptions) error {
	res, err := storage.CompactContext(ctx, o.dbPath, storage.CompactOptions{LockTimeout: o.wait})
	if err != nil {
		return err
	}
	if res.Summarized > 0 {
		fmt.Fprintf(o.io.Out, "%s: summaries added to %d chunks written before them\n", o.dbPath, res.Summarized)
	}
	fmt.Fprintf(o.io.Out, "%s: %s -> %s (%s of free pages)\n", o.dbPath, mib(res.Before), mib(res.After), mib(res.Free))
	return nil
}

// mib formats a byte count for a person.
func mib(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
