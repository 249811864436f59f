package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/storage"
)

type rmOptions struct {
	*globals
	force bool
}

func newRmCmd(g *globals) *cobra.Command {
	o := &rmOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "rm RUN...",
		Short: "Delete runs and all their data",
		Long: `Delete runs and all their data. A run that a recording is writing is refused
while its recorder runs (its next commit would write part of it back); a run whose
recorder stopped before its last commit is removed only with --force.`,
		Example: `  memrec rm bs64-old`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runRm(o, args)
		},
	}
	cmd.Flags().BoolVar(&o.force, "force", false, "remove a run whose recorder stopped before its last commit (never one still recording)")
	return cmd
}

func runRm(o *rmOptions, args []string) error {
	db, err := o.openExisting()
	if err != nil {
		return err
	}
	defer db.Close()
	for _, ref := range args {
		r, err := db.Delete(ref, storage.DeleteOptions{Force: o.force})
		if errors.Is(err, storage.ErrStaleWriter) {
			err = fmt.Errorf("%w; memrec rm --force removes it", err)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(o.io.Out, "removed %s (id %d)\n", r.Name, r.ID)
	}
	return nil
}
