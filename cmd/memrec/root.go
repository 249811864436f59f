package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/storage"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// streams are a command's standard input, output and error; tests pass buffers.
type streams struct {
	In       io.Reader
	Out, Err io.Writer
}

func defaultIO() streams { return streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr} }

// globals are the flags every command shares.
type globals struct {
	io     streams
	dbPath string
}

// exitError carries a process exit code (record exits with its child's code).
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newRootCmd(g *globals) *cobra.Command {
	root := &cobra.Command{
		Use:   "memrec",
		Short: "Record the GPU memory of a whole training run, then explain it",
		Long: `memrec records the GPU memory of a whole training run (NVML device memory,
per-process memory, PyTorch allocator statistics and epoch/step marks) into one
database file, and answers afterwards: per-epoch growth, leaks, fragmentation,
peaks, what happened before an OOM.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	def := os.Getenv("MEMREC_DB")
	if def == "" {
		def = "memrec.db"
	}
	root.PersistentFlags().StringVar(&g.dbPath, "db", def, "database file (env MEMREC_DB)")
	root.SetIn(g.io.In)
	root.SetOut(g.io.Out)
	root.SetErr(g.io.Err)
	root.AddCommand(newRecordCmd(g, nil), newAnnotateCmd(g), newAnalyzeCmd(g), newReportCmd(g), newDemoCmd(g), newCompareCmd(g), newRunsCmd(g), newExportCmd(g), newImportCmd(g), newSitesCmd(g), newMergeCmd(g), newRmCmd(g), newTagCmd(g), newViewCmd(g), newFitCmd(g), newCompactCmd(g))
	addCompletion(root, g)
	root.AddCommand(newGendocsCmd(g))
	return root
}

// execute runs the command line and returns the process exit code. The
// first SIGINT or SIGTERM cancels the commands' context (signalContext).
// Everything it prints passes through a safeWriter.
func execute(ctx context.Context, args []string, s streams) int {
	out, errw := newSafeWriter(s.Out), newSafeWriter(s.Err)
	defer out.Flush()
	defer errw.Flush()
	s.Out, s.Err = out, errw
	g := &globals{io: s}
	root := newRootCmd(g)
	root.SetArgs(args)
	ctx, stop := signalContext(ctx)
	defer stop()
	err := root.ExecuteContext(ctx)
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(s.Err, "memrec:", err.Error()+hint(err))
		return 1
	}
}

// hint is what the user can do about a library's error, in the words of
// the command line.
func hint(err error) string {
	switch {
	case errors.Is(err, storage.ErrNoRun):
		return " (memrec runs lists them)"
	case errors.Is(err, storage.ErrNotMemrec):
		return " (check --db; memrec leaves such a file as it is)"
	case errors.Is(err, storage.ErrNoDB):
		return " (record or import a run first, or pass --db)"
	case errors.Is(err, storage.ErrLocked):
		return " (a recorder may be writing to it; wait for it to finish or use another --db)"
	case errors.Is(err, storage.ErrNoName):
		return " (give one with --name)"
	case errors.Is(err, storage.ErrRenameMany):
		return " (--name renames exactly one run)"
	}
	return ""
}

func (g *globals) openRead() (*storage.DB, error) {
	return storage.Open(g.dbPath, storage.Options{ReadOnly: true})
}

// openWrite opens the database to write, creating it: for the commands
// that record or import.
func (g *globals) openWrite() (*storage.DB, error) {
	return storage.Open(g.dbPath, storage.Options{})
}

// openExisting opens the database to change what is in it (rm, tag): a
// missing file is an error, not a new database.
func (g *globals) openExisting() (*storage.DB, error) {
	return storage.Open(g.dbPath, storage.Options{MustExist: true})
}
