package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/formats/csv"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/formats/parquet"
	"github.com/memrec/memrec/formats/tensorboard"
	"github.com/memrec/memrec/internal/safefile"
	"github.com/memrec/memrec/storage"
)

// An exportFormat is one value of export's --format: its name, what it
// writes, and one of two ways to write it. A stream format writes one
// file (or stdout); a folder format writes files into the folder -o DIR
// through a safefile each. Adding a format is one entry here, its writer,
// and a line in docs/interop.md.
type exportFormat struct {
	name  string
	about string
	// stream writes the run to w.
	stream func(o *exportOptions, db *storage.DB, w io.Writer, r storage.Run) error
	// folder writes the run's files into o.output, which exists.
	folder func(ctx context.Context, o *exportOptions, db *storage.DB, r storage.Run) error
	// check, if set, refuses bad flags before anything is opened or made.
	check func(o *exportOptions) error
	// all: the format takes --all, every run into one folder.
	all bool
	// shown: stream writes nothing a terminal takes as a control (its JSON
	// escapes every control character), so its output to stdout skips the
	// filter that escapes them (safeWriter), which would read every byte.
	shown bool
}

var exportFormats = []exportFormat{
	{name: "jsonl", about: "JSON Lines, every record (memrec import reads it back)",
		stream: func(_ *exportOptions, db *storage.DB, w io.Writer, r storage.Run) error {
			return jsonl.Export(w, db, r)
		}, shown: true},
	{name: "csv", about: "one row per tick, a column per GPU and figure",
		stream: func(o *exportOptions, db *storage.DB, w io.Writer, r storage.Run) error {
			return csv.Export(w, db, r, csv.Options{Procs: o.procs})
		}},
	{name: "tensorboard", about: "one TensorBoard event file in the folder -o DIR",
		folder: exportTensorBoard, check: func(o *exportOptions) error {
			if o.points < 4 {
				return fmt.Errorf("--points %d: want at least 4", o.points)
			}
			return nil
		}},
	{name: "parquet", about: "Parquet tables (device, process, allocator, marks, sites, budget, runs, gpus) in -o DIR, partitioned host=/run=",
		folder: exportParquet, all: true},
}

func exportFormatNames() []string {
	names := make([]string, len(exportFormats))
	for i, f := range exportFormats {
		names[i] = f.name
	}
	return names
}

func findExportFormat(name string) (exportFormat, error) {
	for _, f := range exportFormats {
		if f.name == name {
			return f, nil
		}
	}
	names := exportFormatNames()
	return exportFormat{}, fmt.Errorf("--format %q: want %s or %s", name, strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
}

type exportOptions struct {
	*globals
	window windowOptions
	output string
	format string
	points int  // tensorboard: points per series
	all    bool // every run (parquet)
	procs  bool // csv: a column per process
	// cpuProfile: --cpuprofile's file.
	cpuProfile string

	parquet *parquet.Dataset // the runs written so far (parquet)
}

func newExportCmd(g *globals) *cobra.Command {
	o := &exportOptions{globals: g}
	var formats strings.Builder
	for _, f := range exportFormats {
		fmt.Fprintf(&formats, "\n  %-12s %s", f.name, f.about)
	}
	cmd := &cobra.Command{
		Use:   "export RUN",
		Short: "Write a run as JSON Lines, CSV, a TensorBoard event file or Parquet tables",
		Long: `Write a run in one of these formats (--format):
` + formats.String() + `

A file given with -o appears whole or not at all: an error or the first
SIGINT or SIGTERM leaves nothing behind (exit 130 or 143). -o never
replaces a memrec database.`,
		Example: `  memrec export bs64-amp > bs64-amp.jsonl
  memrec export 3 -o run3.jsonl
  memrec export bs64-amp --format csv -o bs64-amp.csv
  memrec export bs64-amp --format tensorboard -o runs/bs64-amp
  memrec export bs64-amp --format parquet -o fleet/
  memrec export --all --format parquet -o fleet/
  memrec export bs64 --from epoch:2 > bs64-from-epoch2.jsonl`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.all {
				if len(args) > 0 {
					return fmt.Errorf("--all exports every run: give no RUN (got %q)", args[0])
				}
				return nil
			}
			if len(args) != 1 {
				return fmt.Errorf("export takes one RUN (or --all with --format parquet), got %d", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ref := ""
			if len(args) == 1 {
				ref = args[0]
			}
			return profiled(o.cpuProfile, func() error { return runExport(cmd.Context(), o, ref) })
		},
	}
	cmd.Flags().StringVarP(&o.output, "output", "o", "", "write to this file instead of stdout (folder formats: this folder)")
	cmd.Flags().StringVar(&o.format, "format", "jsonl", strings.Join(exportFormatNames(), ", "))
	cmd.Flags().IntVar(&o.points, "points", tensorboard.DefaultPoints, "tensorboard: at most this many points per series (M4 downsampling keeps the peaks); TensorBoard shows more only with --samples_per_plugin scalars=0")
	cmd.Flags().BoolVar(&o.all, "all", false, "parquet: export every run of the database into -o DIR")
	cmd.Flags().BoolVar(&o.procs, "procs", false, "csv: add a column per process and GPU (gpuN_pidP_used_bytes)")
	addWindowFlags(cmd, &o.window)
	addCPUProfileFlag(cmd, &o.cpuProfile)
	return cmd
}

func runExport(ctx context.Context, o *exportOptions, ref string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	f, err := findExportFormat(o.format)
	if err != nil {
		return err
	}
	if f.folder != nil && o.output == "" {
		return fmt.Errorf("--format %s writes a folder: give it with -o DIR", f.name)
	}
	if f.check != nil {
		if err := f.check(o); err != nil {
			return err
		}
	}
	if o.procs && f.name != "csv" {
		return fmt.Errorf("--procs: --format %s has every process already; --procs adds process columns to --format csv", f.name)
	}
	if o.all && !f.all {
		return fmt.Errorf("--all: --format %s writes one run; --all takes --format parquet", f.name)
	}
	if err := refuseDatabase(o.output, o.dbPath); err != nil {
		return err
	}
	db, err := o.openRead()
	if err != nil {
		return err
	}
	defer db.Close()
	var runs []storage.Run
	if o.all {
		if runs, err = db.Runs(); err != nil {
			return err
		}
	} else {
		r, err := db.Run(ref)
		if err != nil {
			return err
		}
		runs = []storage.Run{r}
	}
	for i, r := range runs {
		if runs[i], err = o.window.apply(db, r); err != nil {
			return err
		}
	}
	if f.folder != nil {
		if fi, err := os.Stat(o.output); err == nil && !fi.IsDir() {
			return fmt.Errorf("-o %s: not a folder (--format %s writes files into a folder)", o.output, f.name)
		}
		if err := os.MkdirAll(o.output, 0o777); err != nil {
			return err
		}
		for _, r := range runs {
			if err := f.folder(ctx, o, db, r); err != nil {
				return interrupted(ctx, err)
			}
		}
		return nil
	}
	r := runs[0]
	if o.output == "" {
		out := o.io.Out
		if f.shown {
			out = unescaped(out)
		}
		return interrupted(ctx, f.stream(o, db, ctxWriter{ctx, out}, r))
	}
	return interrupted(ctx, writeFile(ctx, o.output, func(w io.Writer) error {
		if err := f.stream(o, db, w, r); err != nil {
			return fmt.Errorf("export %s: %w", r.Name, err)
		}
		return nil
	}))
}

// writeFile writes path through write, whole or not at all; the first
// signal (ctx's end) makes every further write fail, and the temporary
// goes.
func writeFile(ctx context.Context, path string, write func(io.Writer) error) error {
	f, err := safefile.Create(path)
	if err != nil {
		return err
	}
	defer f.Abort()
	if err := write(ctxWriter{ctx, f}); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return f.Commit()
}

// ctxWriter fails every write once ctx is done, so a long export stops at
// its next buffer flush (about every MiB) after a signal.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// refuseDatabase refuses an -o that would replace the database in use,
// the same file by another name or link, or any other memrec (bbolt)
// database: an export is never worth a database.
func refuseDatabase(output, dbPath string) error {
	if output == "" {
		return nil
	}
	out, err := os.Stat(output)
	if err != nil {
		return nil // nothing there to lose
	}
	if db, err := os.Stat(dbPath); err == nil && os.SameFile(out, db) {
		return fmt.Errorf("-o %s is the database in use (--db %s): export writes beside it, never onto it", output, dbPath)
	}
	if out.Mode().IsRegular() && storage.IsDatabaseFile(output) {
		return fmt.Errorf("-o %s is a memrec database: export never replaces one (choose another name)", output)
	}
	return nil
}

// interrupted turns an error caused by the first SIGINT or SIGTERM into
// the shell's exit status for it (130, 143), after what was written has
// been removed; other errors pass as they are.
func interrupted(ctx context.Context, err error) error {
	if err == nil || ctx.Err() == nil {
		return err
	}
	var s signalCause
	if errors.As(context.Cause(ctx), &s) {
		return exitError{code: 128 + s.number()}
	}
	return err
}
