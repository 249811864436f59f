package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

func newRmCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "rm RUN...",
		Short:   "Delete runs and all their data",
		Example: `  memrec rm bs64-old`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			db, err := g.openExisting()
			if err != nil {
				return err
			}
			defer db.Close()
			for _, ref := range args {
				r, err := db.Delete(ref)
				if err != nil {
					return err
				}
				fmt.Fprintf(g.io.Out, "removed %s (id %d)\n", r.Name, r.ID)
			}
			return nil
		},
	}
}
