package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/memrec/memrec/storage"
)

// version is set at build time with -ldflags "-X main.version=..."; without
// it, buildVersion reads the module's version and commit from the binary.
var version = "dev"

// buildVersion is version, or, where the build did not set it, the
// module's version and the commit it was built from (go build in a
// checkout records it), with "modified" for uncommitted changes.
func buildVersion(set string, info *debug.BuildInfo, ok bool) string {
	if set != "dev" || !ok {
		return set
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	var extra []string
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if r := settings["vcs.revision"]; r != "" {
		extra = append(extra, "commit "+r[:min(12, len(r))])
	}
	if t := settings["vcs.time"]; t != "" {
		extra = append(extra, t)
	}
	if settings["vcs.modified"] == "true" {
		extra = append(extra, "modified")
	}
	if len(extra) > 0 {
		v += " (" + strings.Join(extra, ", ") + ")"
	}
	return v
}

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
	info, ok := debug.ReadBuildInfo()
	root := &cobra.Command{
		Use:   "memrec",
		Short: "Record the GPU memory of a whole training run, then explain it",
		Long: `memrec records the GPU memory of a whole training run (NVML device memory,
per-process memory, PyTorch allocator statistics and epoch/step marks) into one
database file, and answers afterwards: per-epoch growth, leaks, fragmentation,
peaks, what happened before an OOM.`,
		Version:       buildVersion(version, info, ok),
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
	explainRunArgs(root)
	root.SetFlagErrorFunc(suggestFlag)
	return root
}

// explainRunArgs makes each command that takes a run say, when its
// arguments are wrong, what RUN is and where to find one.
func explainRunArgs(root *cobra.Command) {
	for _, c := range root.Commands() {
		use := strings.Fields(c.Use)
		if c.Args == nil || len(use) < 2 || !strings.HasPrefix(use[1], "RUN") {
			continue
		}
		check := c.Args
		c.Args = func(cmd *cobra.Command, args []string) error {
			err := check(cmd, args)
			switch {
			case err == nil:
				return nil
			case len(args) == 0:
				return fmt.Errorf("%s needs RUN, a run's name or id (memrec runs lists them); usage: memrec %s", cmd.Name(), cmd.Use)
			}
			return fmt.Errorf("%s: %w; usage: memrec %s, where RUN is a run's name or id (memrec runs lists them)", cmd.Name(), err, cmd.Use)
		}
	}
}

// suggestFlag adds to an unknown flag's error the command's flag nearest
// to it in spelling, as cobra does for commands.
func suggestFlag(cmd *cobra.Command, err error) error {
	msg := err.Error()
	name, ok := strings.CutPrefix(msg, "unknown flag: --")
	if !ok {
		return err
	}
	best, dist := "", 3 // more than two edits away is no suggestion
	visit := func(f *pflag.Flag) {
		if d := levenshtein(name, f.Name); d < dist {
			best, dist = f.Name, d
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	if best == "" {
		return fmt.Errorf("%w (memrec %s --help lists the flags)", err, cmd.Name())
	}
	return fmt.Errorf("%w (did you mean --%s?)", err, best)
}

// levenshtein is the edit distance of a and b.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := range ra {
		cur := make([]int, len(rb)+1)
		cur[0] = i + 1
		for j := range rb {
			cost := 1
			if ra[i] == rb[j] {
				cost = 0
			}
			cur[j+1] = min(prev[j+1]+1, cur[j]+1, prev[j]+cost)
		}
		prev = cur
	}
	return prev[len(rb)]
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
