package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestBashCompletion sources memrec's bash script with the real
// bash-completion package and asks it, as bash does at a Tab, for the
// words of a command line: run names from the database (--db or
// MEMREC_DB), tag keys for compare --by, the values of --format, --source
// and --align.
func TestBashCompletion(t *testing.T) {
	t.Parallel()
	const lib = "/usr/share/bash-completion/bash_completion"
	if _, err := os.Stat(lib); err != nil {
		t.Skip("no bash-completion package (Debian: apt-get install bash-completion)")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db := filepath.Join(dir, "runs.db")
	for _, f := range []string{realRun} {
		if _, errs, code := run(t, db, "", "import", f); code != 0 {
			t.Fatal(errs)
		}
	}
	if _, errs, code := run(t, db, "", "import", "--name", "bs256-amp", realRun); code != 0 {
		t.Fatal(errs)
	}
	if _, errs, code := run(t, db, "", "tag", "bs256-amp", "seq_len=2048"); code != 0 {
		t.Fatal(errs)
	}
	// `memrec` on PATH is this test binary acting as memrec.
	bin := filepath.Join(dir, "bin")
	os.Mkdir(bin, 0o755)
	os.WriteFile(filepath.Join(bin, "memrec"), []byte("#!/bin/sh\nMEMREC_AS_MAIN=1 exec "+exe+" \"$@\"\n"), 0o755)
	script, errs, code := run(t, db, "", "completion", "bash")
	if code != 0 {
		t.Fatal(errs)
	}
	os.WriteFile(filepath.Join(dir, "memrec.bash"), []byte(script), 0o644)

	complete := func(line string, env ...string) []string {
		t.Helper()
		sh := `source ` + lib + `
source ` + filepath.Join(dir, "memrec.bash") + `
COMP_LINE="$LINE"; COMP_POINT=${#COMP_LINE}
read -r -a COMP_WORDS <<< "$COMP_LINE"
[[ $COMP_LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
__start_memrec memrec "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"`
		cmd := exec.Command("bash", "-c", sh)
		cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "LINE="+line)
		cmd.Env = append(cmd.Env, env...)
		// (stderr has bash's "compopt: not currently executing completion
		// function": compopt works only under a real Tab.)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%q: %v\n%s%s", line, err, out, stderr.String())
		}
		var words []string
		for _, w := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if w = strings.TrimSpace(w); w != "" {
				words = append(words, w)
			}
		}
		slices.Sort(words)
		return words
	}
	for _, tc := range []struct {
		line string
		env  []string
		want []string
	}{
		{"memrec --db " + db + " analyze ", nil, []string{"bs256-amp", "real-resnet18-bs128"}},
		{"memrec --db " + db + " analyze bs", nil, []string{"bs256-amp"}},
		{"memrec analyze ", []string{"MEMREC_DB=" + db}, []string{"bs256-amp", "real-resnet18-bs128"}},
		{"memrec --db " + db + " compare real-resnet18-bs128 ", nil, []string{"bs256-amp"}},
		{"memrec --db " + db + " view ", nil, []string{"bs256-amp", "real-resnet18-bs128"}},
		{"memrec --db " + db + " view bs256-amp ", nil, []string{"real-resnet18-bs128"}},
		{"memrec --db " + db + " compare --by ", nil, []string{"batch_size", "leak", "model", "seq_len", "torch"}},
		{"memrec export x --format ", nil, []string{"csv", "jsonl", "parquet", "tensorboard"}},
		{"memrec record --source ", nil, []string{"nvml", "sim"}},
		{"memrec compare a b --align ", nil, []string{"epoch", "step", "time"}},
		{"memrec completion ", nil, []string{"bash", "fish", "powershell", "zsh"}},
	} {
		if got := complete(tc.line, tc.env...); !slices.Equal(got, tc.want) {
			t.Errorf("%q: completes %q, want %q", tc.line, got, tc.want)
		}
	}
}

// TestCompletionUnsupportedShell: a shell memrec writes no script for is
// refused with exit 2 and a message naming the ones it does.
func TestCompletionUnsupportedShell(t *testing.T) {
	out, errs, code := run(t, "unused.db", "", "completion", "tcsh")
	if code != 2 || out != "" || !strings.Contains(errs, `completion "tcsh": want one of bash, zsh, fish, powershell`) {
		t.Errorf("completion tcsh: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, sh := range completionShells {
		if out, errs, code := run(t, "unused.db", "", "completion", sh); code != 0 || len(out) < 100 {
			t.Errorf("completion %s: exit %d, %d bytes, %s", sh, code, len(out), errs)
		}
	}
}
