package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/testsupport/fixtures"
)

// TestAnalyzeOOMCause: analyze's post-mortem of the real run that ran out
// of memory says where the memory was and the one change, with its number
// (the post-mortem's batch of at most 7626, TestAnalyzeOOMFiguresAtTheMoment),
// and --json carries it as cause.
func TestAnalyzeOOMCause(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	if _, errs, code := run(t, db, "", "import", fixtures.Path(fixtures.H200OOM)); code != 0 {
		t.Fatal(errs)
	}
	out, errs, code := run(t, db, "", "analyze", "r18-oom", "--full")
	for _, want := range []string{"where the memory was at the OOM (from the allocator sample at the OOM (no memrec.watch, no trace)): allocated",
		"what would have made this step fit: a micro-batch of 7626 (of the batch of 7728, accumulated over 2)"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("%d: output lacks %q:\n%s%s", code, want, out, errs)
		}
	}
	out, errs, code = run(t, db, "", "analyze", "r18-oom", "--json")
	if code != 0 || !strings.Contains(out, `"cause": {`) || !strings.Contains(out, `"kind": "micro_batch"`) {
		t.Errorf("%d: --json lacks the cause:\n%.2000s%s", code, out, errs)
	}
}
