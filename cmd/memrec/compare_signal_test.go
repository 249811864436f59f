package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/memrec/memrec/testsupport/fixtures"
)

// cancelOnWrite is an output that is signalled (its context cancelled
// with a SIGINT cause) by the first line written to it: the signal comes
// after the runs are analysed, while compare prints.
type cancelOnWrite struct {
	cancel context.CancelCauseFunc
	strings.Builder
}

func (c *cancelOnWrite) Write(p []byte) (int, error) {
	c.cancel(signalCause{syscall.SIGINT})
	return c.Builder.Write(p)
}

// TestCompareStopsAtALateSignal signals compare once it prints: it exits
// 130 and writes no -o folder. Before, a signal after the analysis was
// not looked at: the folder was written and compare exited 0.
func TestCompareStopsAtALateSignal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	for _, r := range []string{fixtures.CleanRun, fixtures.LeakRun} {
		if _, errs, code := run(t, db, "", "import", fixtures.Path(r)); code != 0 {
			t.Fatalf("import %s: %d %s", r, code, errs)
		}
	}
	for _, format := range []string{"table", "json"} {
		t.Run(format, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			out := &cancelOnWrite{cancel: cancel}
			var errb strings.Builder
			folder := filepath.Join(dir, "cmp-"+format)
			args := []string{"--db", db, "compare", fixtures.CleanRun, fixtures.LeakRun, "-o", folder}
			if format == "json" {
				args = append(args, "--json")
			}
			code := execute(ctx, args, streams{In: strings.NewReader(""), Out: out, Err: &errb})
			if code != 130 || !strings.Contains(errb.String(), "stopped") {
				t.Errorf("exit %d, want 130; stderr %q", code, errb.String())
			}
			if _, err := os.Stat(folder); !os.IsNotExist(err) {
				t.Errorf("the folder %s was written (%v)", folder, err)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, ".cmp-"+format+"*")); len(left) != 0 {
				t.Errorf("left behind: %q", left)
			}
		})
	}
}
