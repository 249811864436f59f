package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
)

type exportOptions struct {
	*globals
	output string
}

func newExportCmd(g *globals) *cobra.Command {
	o := &exportOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "export RUN",
		Short: "Write a run as JSON Lines (stdout by default)",
		Example: `  memrec export bs64-amp > bs64-amp.jsonl
  memrec export 3 -o run3.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runExport(o, args[0]) },
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write to this file instead of stdout")
	return cmd
}

func runExport(o *exportOptions, ref string) error {
	db, err := o.openRead()
	if err != nil {
		return err
	}
	defer db.Close()
	r, err := db.Run(ref)
	if err != nil {
		return err
	}
	if o.output == "" {
		return db.Export(o.io.Out, r)
	}
	// Write beside the target and rename, so a failed export leaves no half file.
	tmp, err := os.CreateTemp(filepath.Dir(o.output), ".memrec-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := db.Export(tmp, r); err != nil {
		tmp.Close()
		return fmt.Errorf("export %s: %w", r.Name, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), o.output)
}
