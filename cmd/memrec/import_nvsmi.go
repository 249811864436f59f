package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/formats/nvsmi"
)

// runImportNvidiaSMI imports nvidia-smi CSV logs as one run, all or nothing.
func runImportNvidiaSMI(o *importOptions, files []string) error {
	loc, err := time.LoadLocation(o.tz)
	if err != nil {
		return fmt.Errorf("--tz %q: not a time zone memrec knows (an IANA name such as UTC or Europe/Berlin)", o.tz)
	}
	stem := ""
	if files[0] != "-" {
		stem = strings.TrimSuffix(strings.TrimSuffix(filepath.Base(files[0]), ".gz"), filepath.Ext(strings.TrimSuffix(files[0], ".gz")))
	}
	name := o.name
	if name == "" {
		if stem == "" {
			return fmt.Errorf("import: name the run with --name when the log comes from stdin (nothing was imported)")
		}
		name = stem
	}
	// nvidia-smi does not log the machine's name: --host, else the log's
	// file name, which is how logs of several machines are told apart.
	host := o.host
	if host == "" {
		host = stem
	}
	opened, closeFiles, err := openImportFiles(o, files)
	defer closeFiles()
	if err != nil {
		return err
	}
	srcs := make([]nvsmi.Source, len(opened))
	names := make([]string, len(opened))
	for i, f := range opened {
		srcs[i] = nvsmi.Source{Name: f.Name, R: f.R}
		names[i] = f.Name
	}
	log, err := nvsmi.Parse(srcs, loc)
	if err != nil {
		return fmt.Errorf("import: %w (nothing was imported)", err)
	}
	db, err := o.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()
	// The log streams into the import: its JSON Lines (about 80 bytes a
	// sample) are never held whole.
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(log.WriteJSONL(pw, name, host)) }()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: strings.Join(names, ", "), R: pr, Converted: true}}, jsonl.ImportOptions{Replace: o.replace, Context: o.ctx})
	pr.CloseWithError(io.ErrClosedPipe) // the writer stops if the import did
	if err != nil {
		return fmt.Errorf("import: %w (nothing was imported)", err)
	}
	r := runs[0]
	fmt.Fprintf(o.io.Out, "imported %s (id %d, host %s) from nvidia-smi logs: %d GPUs, %d samples, %d process samples; %d unavailable values ([N/A]) dropped; memory to 1 MiB\n",
		r.Name, r.ID, r.Host, len(r.GPUs), r.Counts.Samples, r.Counts.ProcSamples, log.Unavailable)
	if log.Folded > 0 {
		fmt.Fprintf(o.io.Out, "%d timestamps fell in a repeated hour (the clock set back in %s) and were read as its second pass, since the log had passed the first\n", log.Folded, loc)
	}
	return nil
}
