package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/tensorboard"
)

type exportOptions struct {
	*globals
	window windowOptions
	output string
	format string // jsonl, csv or tensorboard
	points int    // tensorboard: points per series
}

func newExportCmd(g *globals) *cobra.Command {
	o := &exportOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "export RUN",
		Short: "Write a run as JSON Lines, CSV or a TensorBoard event file",
		Long: `Write a run as JSON Lines (the default; memrec import reads it back), as CSV
(one row per tick, a column per GPU and figure) or, with --format tensorboard,
as one TensorBoard event file in the folder -o DIR.`,
		Example: `  memrec export bs64-amp > bs64-amp.jsonl
  memrec export 3 -o run3.jsonl
  memrec export bs64-amp --format csv -o bs64-amp.csv
  memrec export bs64-amp --format tensorboard -o runs/bs64-amp
  memrec export bs64 --from epoch:2 > bs64-from-epoch2.jsonl`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runExport(o, args[0]) },
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write to this file instead of stdout (tensorboard: this folder)")
	cmd.Flags().StringVar(&o.format, "format", "jsonl", "jsonl, csv or tensorboard")
	cmd.Flags().IntVar(&o.points, "points", tensorboard.DefaultPoints, "tensorboard: at most this many points per series (M4 downsampling keeps the peaks)")
	addWindowFlags(cmd, &o.window)
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
	if r, err = o.window.apply(db, r); err != nil {
		return err
	}
	write := db.Export
	switch o.format {
	case "jsonl":
	case "csv":
		write = db.ExportCSV
	case "tensorboard":
		return exportTensorBoard(o, db, r)
	default:
		return fmt.Errorf("--format %q: want jsonl, csv or tensorboard", o.format)
	}
	if o.output == "" {
		return write(o.io.Out, r)
	}
	// Write beside the target and rename, so a failed export leaves no half file.
	tmp, err := os.CreateTemp(filepath.Dir(o.output), ".memrec-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp, r); err != nil {
		tmp.Close()
		return fmt.Errorf("export %s: %w", r.Name, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), o.output)
}
