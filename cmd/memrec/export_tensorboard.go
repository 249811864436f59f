package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/tensorboard"
)

// exportTensorBoard writes the run's event file into the folder o.output,
// made if missing. The file appears whole or not at all.
func exportTensorBoard(o *exportOptions, db *storage.DB, r storage.Run) error {
	if o.output == "" {
		return errors.New("--format tensorboard writes a folder: give it with -o DIR")
	}
	if o.points < 4 {
		return fmt.Errorf("--points %d: want at least 4", o.points)
	}
	if fi, err := os.Stat(o.output); err == nil && !fi.IsDir() {
		return fmt.Errorf("-o %s: not a folder (--format tensorboard writes one event file into a folder)", o.output)
	}
	if err := os.MkdirAll(o.output, 0o755); err != nil {
		return err
	}
	rep, err := analysis.Analyze(db, r, analysis.Options{Width: tensorboard.Buckets(o.points)})
	if err != nil {
		return err
	}
	name := filepath.Join(o.output, tensorboard.FileName(r.StartNS/1e9, r.Host, os.Getpid()))
	tmp, err := os.CreateTemp(o.output, ".memrec-export-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tensorboard.Export(tmp, rep, o.points); err != nil {
		tmp.Close()
		return fmt.Errorf("export %s: %w", r.Name, err)
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return err
	}
	fmt.Fprintf(o.io.Err, "wrote %s\n", name)
	return nil
}
