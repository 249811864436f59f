package main

import (
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
)

// A command that takes a run, called without one, says what RUN is and
// where to find one; an unknown flag gets the nearest one.
func TestArgumentAndFlagMessages(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"analyze"}, "analyze needs RUN, a run's name or id (memrec runs lists them); usage: memrec analyze RUN"},
		{[]string{"export"}, "export needs RUN, a run's name or id (memrec runs lists them)"},
		{[]string{"report"}, "report needs RUN, a run's name or id (memrec runs lists them)"},
		{[]string{"rm"}, "rm needs RUN, a run's name or id (memrec runs lists them)"},
		{[]string{"tag"}, "tag needs RUN, a run's name or id (memrec runs lists them)"},
		{[]string{"analyze", "a", "b"}, "analyze: accepts 1 arg(s), received 2; usage: memrec analyze RUN, where RUN is a run's name or id (memrec runs lists them)"},
		{[]string{"analyze", "a", "--jsno"}, "unknown flag: --jsno (did you mean --json?)"},
		{[]string{"runs", "--chek"}, "unknown flag: --chek (did you mean --check?)"},
		{[]string{"analyze", "a", "--dbb", "x"}, "unknown flag: --dbb (did you mean --db?)"},
		{[]string{"analyze", "a", "--zzzzzz"}, "unknown flag: --zzzzzz (memrec analyze --help lists the flags)"},
	} {
		_, errs, code := run(t, db, "", tc.args...)
		if code == 0 || !strings.HasPrefix(strings.TrimSpace(errs), "memrec: "+tc.want) {
			t.Errorf("%v: exit %d, %q\nwant %q", tc.args, code, strings.TrimSpace(errs), "memrec: "+tc.want)
		}
	}
}

// --version is the build's: the ldflags' version where set, else the
// module's version and the commit it was built from.
func TestBuildVersion(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		set  string
		info *debug.BuildInfo
		ok   bool
		want string
	}{
		{"v1.2.0", &debug.BuildInfo{Main: debug.Module{Version: "v9"}}, true, "v1.2.0"},
		{"dev", nil, false, "dev"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}}, true, "v0.3.1"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: vcs("vcs.revision", "c664fbc0123456789abcdef", "vcs.time", "2026-12-07T05:15:00Z", "vcs.modified", "true")}, true,
			"dev (commit c664fbc01234, 2026-12-07T05:15:00Z, modified)"},
		{"dev", &debug.BuildInfo{Main: debug.Module{Version: "v0.3.1"}, Settings: vcs("vcs.revision", "abc", "vcs.modified", "false")}, true, "v0.3.1 (commit abc)"},
	} {
		if got := buildVersion(tc.set, tc.info, tc.ok); got != tc.want {
			t.Errorf("buildVersion(%q, %+v): %q, want %q", tc.set, tc.info, got, tc.want)
		}
	}
}

// runs --check ends with its verdict; the table's durations are written
// as analyze writes them.
func TestRunsCheckSaysOK(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	out, errs, code := run(t, db, "", "runs", "--check")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || lines[len(lines)-1] != "check: all 1 runs OK (every chunk decoded, every summary matched)" {
		t.Errorf("exit %d, %s\n%s", code, errs, out)
	}
	if regexp.MustCompile(`\d(ms|s|m)\b`).MatchString(lines[1]) {
		t.Errorf("a Go duration, not analyze's words:\n%s", out)
	}
	// One GPU: no imbalance to tell.
	full, _, _ := run(t, db, "", "analyze", "real-resnet18-bs128", "--full")
	if strings.Contains(full, "Imbalance") {
		t.Errorf("an imbalance line for one GPU:\n%s", full)
	}
}

// Importing memrec's own CSV export says what it is and how to import the
// run; a name already stored names the flags that resolve it.
func TestImportMessagesNameWhatToDo(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", realRun); code != 0 {
		t.Fatal(errs)
	}
	csv := filepath.Join(dir, "run.csv")
	if _, errs, code := run(t, db, "", "export", "real-resnet18-bs128", "--format", "csv", "-o", csv); code != 0 {
		t.Fatal(errs)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"import", csv}, "memrec: import: " + csv + " is memrec's CSV export; import reads JSON Lines: write the run with memrec export RUN --format jsonl and import that (nothing was imported)"},
		{[]string{"import", realRun}, "--name NEW imports it under another name, --replace replaces the stored run)"},
	} {
		_, errs, code := run(t, db, "", tc.args...)
		if code == 0 || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, %q\nwant %q", tc.args, code, errs, tc.want)
		}
		// One hint: storage's sentinel says what is wrong, cmd the flags.
		if strings.Count(errs, "(") != 1 {
			t.Errorf("%v: %q gives more than one hint", tc.args, errs)
		}
	}
}
