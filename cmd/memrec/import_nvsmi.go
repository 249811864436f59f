package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/memrec/memrec/nvsmi"
	"github.com/memrec/memrec/storage"
)

// runImportNvidiaSMI imports nvidia-smi CSV logs as one run, all or nothing.
func runImportNvidiaSMI(o *importOptions, files []string) error {
	loc, err := time.LoadLocation(o.tz)
	if err != nil {
		return fmt.Errorf("--tz %q: %w", o.tz, err)
	}
	name := o.name
	if name == "" {
		if files[0] == "-" {
			return fmt.Errorf("import: name the run with --name when the log comes from stdin (nothing was imported)")
		}
		name = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(files[0]), ".gz"), filepath.Ext(strings.TrimSuffix(files[0], ".gz")))
	}
	opened, closeFiles, err := openImportFiles(o, files)
	defer closeFiles()
	if err != nil {
		return err
	}
	srcs := make([]nvsmi.Source, len(opened))
	for i, f := range opened {
		srcs[i] = nvsmi.Source{Name: f.Name, R: f.R}
	}
	log, err := nvsmi.Parse(srcs, loc)
	if err != nil {
		return fmt.Errorf("import: %w (nothing was imported)", err)
	}
	var buf bytes.Buffer
	if err := log.WriteJSONL(&buf, name); err != nil {
		return err
	}
	db, err := o.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()
	runs, err := db.Import([]storage.Source{{Name: "nvidia-smi logs", R: &buf}}, storage.ImportOptions{Replace: o.replace})
	if err != nil {
		return fmt.Errorf("import: %w (nothing was imported)", err)
	}
	r := runs[0]
	fmt.Fprintf(o.io.Out, "imported %s (id %d) from nvidia-smi logs: %d GPUs, %d samples, %d process samples; %d unavailable values ([N/A]) dropped; memory to 1 MiB\n",
		r.Name, r.ID, len(r.GPUs), r.Counts.Samples, r.Counts.ProcSamples, log.Unavailable)
	return nil
}
