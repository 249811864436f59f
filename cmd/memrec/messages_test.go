package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Messages of bad input speak memrec's words: what the file is, what to
// do, each prefix once, no library or Go type text.
func TestBadInputMessages(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	random := filepath.Join(dir, "random.db")
	b := make([]byte, 5000)
	for i := range b {
		b[i] = byte(i*7919 + i>>3)
	}
	os.WriteFile(random, b, 0o644)
	folder := filepath.Join(dir, "logs")
	os.Mkdir(folder, 0o755)
	csv := filepath.Join(dir, "gpu.csv")
	os.WriteFile(csv, []byte(smiLog(t, "gpu-header-units.csv.gz")), 0o644)
	bare := filepath.Join(dir, "bare.csv")
	os.WriteFile(bare, []byte(smiLog(t, "gpu-noheader-nounits.csv.gz")), 0o644)
	tagList := filepath.Join(dir, "tags.jsonl")
	os.WriteFile(tagList, []byte(`{"type":"run","name":"x","tags":{"k":[1]}}`+"\n"), 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--db", random, "runs"}, random + ": not a memrec database (file size too small 5000) (check --db; memrec leaves such a file as it is)"},
		{[]string{"import", folder}, "import: " + folder + " is a folder, not a file to import (nothing was imported)"},
		{[]string{"import", filepath.Join(dir, "nope.jsonl")}, "import: " + filepath.Join(dir, "nope.jsonl") + ": no such file (nothing was imported)"},
		{[]string{"import", csv}, "import: " + csv + " is an nvidia-smi CSV log, not JSON Lines: import it with --format nvidia-smi (nothing was imported)"},
		{[]string{"import", bare}, "import: " + bare + " is an nvidia-smi CSV log, not JSON Lines: import it with --format nvidia-smi (nothing was imported)"},
		{[]string{"import", tagList}, "import: " + tagList + `:1: run tag "k": want a string or number, got a list (nothing was imported)`},
	} {
		_, errs, code := run(t, db, "", tc.args...)
		errs = strings.TrimSpace(errs)
		if code != 1 || !strings.HasSuffix(errs, tc.want) {
			t.Errorf("%v: %d %q\nwant %q", tc.args, code, errs, tc.want)
		}
		for _, twice := range []string{"import: import:", "pickle: pickle:", "open " + db + ": open", "torchsnap.", "*"} {
			if strings.Contains(errs, twice) {
				t.Errorf("%v: %q has %q", tc.args, errs, twice)
			}
		}
	}
	// An empty input says there is no run, once.
	empty := filepath.Join(dir, "blank.jsonl")
	os.WriteFile(empty, []byte("\n\n"), 0o644)
	if _, errs, _ := run(t, db, "", "import", empty); !strings.Contains(errs, "import: no run in the input") || strings.Count(errs, "import:") != 1 {
		t.Errorf("empty input: %q", errs)
	}
}
