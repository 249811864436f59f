package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/formats/tensorboard"
	"github.com/memrec/memrec/storage"
)

// exportTensorBoard writes the run's event file into the folder o.output.
// The file appears whole or not at all.
func exportTensorBoard(ctx context.Context, o *exportOptions, db *storage.DB, r storage.Run) error {
	rep, err := analysis.Analyze(db, r, analysis.Options{Width: tensorboard.Buckets(o.points)})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	name := filepath.Join(o.output, tensorboard.FileName(r.StartNS/1e9, r.Host, os.Getpid()))
	err = writeFile(ctx, name, func(w io.Writer) error {
		if err := tensorboard.Export(w, rep, o.points); err != nil {
			return fmt.Errorf("export %s: %w", r.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(o.io.Err, "wrote %s: at most %d points a series, each bucket's highest and lowest kept\n", name, o.points)
	if o.points > tensorboard.TensorBoardKeeps {
		fmt.Fprintf(o.io.Err, "TensorBoard keeps a random %d of each series unless started with --samples_per_plugin scalars=0\n",
			tensorboard.TensorBoardKeeps)
	}
	return nil
}
