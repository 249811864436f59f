package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/formats/nvsmi"
	"github.com/memrec/memrec/merge"
	"github.com/memrec/memrec/storage"
)

type importOptions struct {
	*globals
	name    string
	replace bool
	// allowTruncated imports what a cut gzip file holds, marked incomplete.
	allowTruncated bool
	format         string // jsonl or nvidia-smi
	tz             string // nvidia-smi: the logs' time zone
	host           string // nvidia-smi: the machine that logged
	run            string // PyTorch snapshots: add their sites to this run
	gpu            int    // PyTorch snapshots: the GPU of CUDA device 0
	merge          bool   // the files are the nodes of one job: one merged run
	// ctx stops the import (the first SIGINT or SIGTERM); nil: never.
	ctx context.Context

	// stdin is standard input, gunzipped if it is gzip, once read from:
	// recognising what it holds peeks at its start, the import reads it.
	stdin    *bufio.Reader
	stdinErr error
}

// stdinName names standard input in messages.
const stdinName = "<stdin>"

// inputName is how messages name an input file: "-" is standard input.
func inputName(file string) string {
	if file == "-" {
		return stdinName
	}
	return file
}

// stdinReader returns standard input, gunzipped if it starts as gzip. It
// can be read once; Peek shows its start without taking it.
func (o *importOptions) stdinReader() (*bufio.Reader, error) {
	if o.stdin == nil && o.stdinErr == nil {
		r, err := maybeGunzip(o.io.In, stdinName)
		if err != nil {
			o.stdinErr = err
		} else {
			o.stdin = bufio.NewReader(r)
		}
	}
	return o.stdin, o.stdinErr
}

func newImportCmd(g *globals) *cobra.Command {
	o := &importOptions{globals: g}
	cmd := &cobra.Command{
		Use:   "import FILE...",
		Short: "Read runs from JSON Lines files or PyTorch snapshots (- for stdin; gzip is read as such)",
		Long: `Read runs from JSON Lines files. A file may hold several runs; all files are
imported in one transaction: on any error nothing is imported and the database
stays as it was. A run whose name is already taken is refused unless renamed
with --name or replaced with --replace.

A PyTorch memory snapshot (torch.cuda.memory._dump_snapshot, or a pickled
torch.cuda.memory._snapshot(); gzip or not; a file or standard input) is
recognised by its content: its live blocks by allocation site, and with a
trace the live bytes by site over time, become a run of their own (one run a
file), or are added to --run if taken within that run (5 minutes either side).
One read from standard input is named snapshot-DATE-TIME unless --name is
given. Snapshots past memrec's limits (docs/limits.md) are refused.`,
		Example: `  memrec import run.jsonl
  memrec import --name bs64-retry --replace run.jsonl.gz
  zcat runs.jsonl.gz | memrec import -
  memrec import --format nvidia-smi --name node3 --tz UTC gpu.csv apps.csv
  memrec import snapshot.pickle                 # a PyTorch memory snapshot: a run of its sites
  memrec import --run bs64 --gpu 0 snapshot.pickle
  memrec import --name bs64-snap - < snapshot.pickle.gz
  memrec import --merge node0.jsonl.gz node1.jsonl.gz  # one run of a 2-node job`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The first Ctrl-C stops the import at its next batch of lines:
			// nothing is committed, and memrec exits 130 (143 for SIGTERM).
			o.ctx = cmd.Context()
			return stoppedSaying(o.ctx, o.io.Err, runImport(o, args), "nothing was imported")
		},
	}
	cmd.Flags().StringVar(&o.name, "name", "", "name of the imported run (the input must hold exactly one)")
	cmd.Flags().BoolVar(&o.replace, "replace", false, "replace stored runs of the same name")
	cmd.Flags().BoolVar(&o.allowTruncated, "allow-truncated", false, "import a gzip file that ends early (its writer died) up to its last whole line; the run is marked incomplete")
	cmd.Flags().StringVar(&o.format, "format", "jsonl", "jsonl, or nvidia-smi for its CSV logs (all files make one run)")
	cmd.Flags().StringVar(&o.run, "run", "", "PyTorch snapshots: add their allocation sites to this run instead of making a new one")
	cmd.Flags().IntVar(&o.gpu, "gpu", 0, "PyTorch snapshots: the GPU index (NVML's) of the snapshot's CUDA device 0")
	cmd.Flags().BoolVar(&o.merge, "merge", false, "the files are the exports of one multi-node job's nodes (one run each): import them as one merged run, as memrec merge does")
	cmd.Flags().StringVar(&o.host, "host", "", "nvidia-smi: the machine that wrote the logs (default: the first log's file name)")
	cmd.Flags().StringVar(&o.tz, "tz", "Local", "nvidia-smi: time zone of the logs' timestamps (an IANA name such as UTC or Europe/Berlin)")
	return cmd
}

// openImportFiles opens the files to import ("-" is stdin), each
// gunzipped if it is gzip. closeFiles closes those opened, also when err is
// not nil.
func openImportFiles(o *importOptions, files []string) (srcs []storage.Source, closeFiles func(), err error) {
	var opened []*os.File
	closeFiles = func() {
		for _, fh := range opened {
			fh.Close()
		}
	}
	for _, f := range files {
		if f == "-" {
			r, err := o.stdinReader()
			if err != nil {
				return nil, closeFiles, err
			}
			srcs = append(srcs, storage.Source{Name: stdinName, R: r})
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			return nil, closeFiles, err
		}
		opened = append(opened, fh)
		r, err := maybeGunzip(fh, f)
		if err != nil {
			return nil, closeFiles, err
		}
		srcs = append(srcs, storage.Source{Name: f, R: r})
	}
	return srcs, closeFiles, nil
}

// checkInputs refuses, before anything is read, a file that does not
// exist or is a folder.
func checkInputs(files []string) error {
	for _, f := range files {
		if f == "-" {
			continue
		}
		fi, err := os.Stat(f)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return fmt.Errorf("import: %s: no such file (nothing was imported)", f)
		case err != nil:
			return fmt.Errorf("import: %w (nothing was imported)", err)
		case fi.IsDir():
			return fmt.Errorf("import: %s is a folder, not a file to import (nothing was imported)", f)
		}
	}
	return nil
}

// memrecCSV says whether a first line is the header of memrec's CSV
// export: its columns start with the tick's time (storage's CSV writer).
func memrecCSV(head string) bool {
	return strings.HasPrefix(head, "t_ns,time_s,")
}

// firstLine returns the first line of a file (or of standard input, which
// it leaves unread) that is not blank, up to 4 KiB of it.
func firstLine(o *importOptions, file string) string {
	var r *bufio.Reader
	if file == "-" {
		var err error
		if r, err = o.stdinReader(); err != nil {
			return ""
		}
	} else {
		fh, err := os.Open(file)
		if err != nil {
			return ""
		}
		defer fh.Close()
		zr, err := maybeGunzip(fh, file)
		if err != nil {
			return ""
		}
		r = bufio.NewReader(zr)
	}
	head, _ := r.Peek(4 << 10)
	for _, l := range bytes.Split(head, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			return string(l)
		}
	}
	return ""
}

func runImport(o *importOptions, files []string) error {
	if err := checkInputs(files); err != nil {
		return err
	}
	switch o.format {
	case "jsonl":
		n := 0
		for _, f := range files {
			if isTorchSnapshot(o, f) {
				n++
			}
		}
		switch {
		case n == len(files):
			return runImportTorchSnapshots(o, files)
		case n > 0:
			return fmt.Errorf("import: some files are PyTorch snapshots and some are not; import them apart (nothing was imported)")
		case o.run != "":
			return fmt.Errorf("import: --run adds PyTorch snapshots to a run, and %s is not one (nothing was imported)", files[0])
		}
		for _, f := range files {
			head := firstLine(o, f)
			if nvsmi.Looks(head) {
				return fmt.Errorf("import: %s is an nvidia-smi CSV log, not JSON Lines: import it with --format nvidia-smi (nothing was imported)", inputName(f))
			}
			if memrecCSV(head) {
				return fmt.Errorf("import: %s is memrec's CSV export; import reads JSON Lines: write the run with memrec export RUN --format jsonl and import that (nothing was imported)", inputName(f))
			}
		}
	case "nvidia-smi":
		return runImportNvidiaSMI(o, files)
	default:
		return fmt.Errorf("--format %q: want jsonl or nvidia-smi", o.format)
	}
	srcs, closeFiles, err := openImportFiles(o, files)
	defer closeFiles()
	if err != nil {
		return err
	}
	if o.merge {
		return runImportMerge(o, srcs)
	}
	db, err := o.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()
	runs, err := db.Import(srcs, storage.ImportOptions{Name: o.name, Replace: o.replace, AllowTruncated: o.allowTruncated, Context: o.ctx})
	if errors.Is(err, storage.ErrTruncated) {
		return fmt.Errorf("import: %w (nothing was imported; --allow-truncated imports its whole lines and marks the run incomplete)", err)
	}
	if errors.Is(err, storage.ErrExists) {
		return fmt.Errorf("import: %w (nothing was imported; --name NEW imports it under another name, --replace replaces the stored run)", err)
	}
	if err != nil {
		return fmt.Errorf("import: %w (nothing was imported)", err)
	}
	for _, r := range runs {
		fmt.Fprintf(o.io.Out, "imported %s (id %d): %d GPUs, %d samples, %d process samples, %d allocator samples, %d marks",
			r.Name, r.ID, len(r.GPUs), r.Counts.Samples, r.Counts.ProcSamples, r.Counts.TorchSamples, r.Counts.Marks)
		if !r.Complete {
			fmt.Fprint(o.io.Out, " (incomplete)")
		}
		fmt.Fprintln(o.io.Out)
	}
	return nil
}

// maybeGunzip reads gzip input transparently (it starts with 0x1f 0x8b).
func maybeGunzip(r io.Reader, name string) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, _ := br.Peek(2)
	if len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		return zr, nil
	}
	return br, nil
}

// runImportMerge imports each node's export into a scratch database, then
// merges them into the database as one run: nothing is written there
// unless every file imports and the runs merge.
func runImportMerge(o *importOptions, srcs []storage.Source) error {
	dir, err := os.MkdirTemp("", "memrec-import-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var inputs []merge.Input
	defer func() { closeInputs(inputs) }()
	for i, src := range srcs {
		// A scratch database per node: their runs may share a name.
		tmp, err := storage.Open(filepath.Join(dir, fmt.Sprintf("node%d.db", i)), storage.Options{})
		if err != nil {
			return err
		}
		runs, err := tmp.Import([]storage.Source{src}, storage.ImportOptions{AllowTruncated: o.allowTruncated, Context: o.ctx})
		if err == nil && len(runs) != 1 {
			err = fmt.Errorf("%s holds %d runs; give one file per node", src.Name, len(runs))
		}
		if err != nil {
			tmp.Close()
			return fmt.Errorf("import --merge: %w (nothing was imported)", err)
		}
		inputs = append(inputs, merge.Input{File: src.Name, DB: tmp, Run: runs[0]})
	}
	db, err := o.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()
	ctx := o.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	return doMerge(ctx, &mergeOptions{globals: o.globals, name: o.name, replace: o.replace}, db, db.Path(), inputs)
}
