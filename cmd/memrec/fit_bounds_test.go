package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/fit"
)

// TestFitFlagBounds: values that cannot be searched are refused before
// any trial, naming the flag.
func TestFitFlagBounds(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--min", "1e308"}, "--min 1e+308: want a finite value above 0, at most 2147483648"},
		{[]string{"--min", "0"}, "--min 0: want a finite value above 0"},
		{[]string{"--min", "NaN"}, "--min NaN: want a finite value"},
		{[]string{"--max", "NaN"}, "--max NaN: want a finite value above 0"},
		{[]string{"--max", "+Inf"}, "--max +Inf: want a finite value above 0"},
		{[]string{"--max", "-1"}, "--max -1: want a finite value above 0"},
		{[]string{"--max", "4294967296"}, "--max 4.294967296e+09: want a finite value above 0, at most 2147483648"},
		{[]string{"--min", "8", "--max", "4"}, "--max 4 is below --min 8"},
		{[]string{"--steps", "-1"}, "--steps -1: want 0 (the exit code decides) or more"},
	} {
		args := append(append([]string{"fit", "--source", "sim"}, c.flags...), "--", "sh", "-c", "exit 0", "x", "{}")
		_, errs, code := run(t, db, "", args...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d, want 1 and %q:\n%s", c.flags, code, c.want, errs)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("a database was made for flags that cannot be searched")
	}
}

// TestFitWithoutStepMarks: a command that exits 0 without a step mark is
// an error after its first trial (it would "run" every value); with
// --steps 0 its exit code decides, and the values stay bounded: --max, or
// without it the ceiling of 2^31, never past it and never infinite.
func TestFitWithoutStepMarks(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "m.db")
	r, errs, code := fitJSON(t, db, "--id", "nomarks", "--", "sh", "-c", "exit 0", "x", "{}")
	if code != 1 || len(r.Trials) != 1 || !strings.Contains(errs, "exited 0 without a step mark") || !strings.Contains(errs, "--steps 0") {
		t.Fatalf("no step marks: exit %d, %d trials:\n%s", code, len(r.Trials), errs)
	}
	r, errs, code = fitJSON(t, db, "--id", "exitcode", "--steps", "0", "--min", "4", "--max", "64", "--", "sh", "-c", "exit 0", "x", "{}")
	if code != 0 || f64v(r.LargestRan) != 64 || !strings.Contains(r.Note, "(--max) ran") {
		t.Fatalf("--steps 0 --max 64: exit %d, largest ran %v, note %q:\n%s", code, f64v(r.LargestRan), r.Note, errs)
	}
	checkTrials(t, db, r)
	// Above 40 the command fails: with --steps 0 that ends the search.
	r, errs, code = fitJSON(t, db, "--id", "exitfail", "--steps", "0", "--min", "4", "--max", "64", "--", "sh", "-c", `[ "$1" -le 40 ]`, "x", "{}")
	if last := r.Trials[len(r.Trials)-1]; code != 1 || last.Outcome != fit.Failed || last.Value <= 40 {
		t.Fatalf("--steps 0, failing above 40: exit %d, trials %+v:\n%s", code, r.Trials, errs)
	}
	r, errs, code = fitJSON(t, db, "--id", "ceiling", "--steps", "0", "--min", "1", "--", "sh", "-c", "exit 0", "x", "{}")
	if code != 0 || f64v(r.LargestRan) != fit.Ceiling || !strings.Contains(r.Note, "2^31") {
		t.Fatalf("--steps 0 without --max: exit %d, largest ran %v, note %q:\n%s", code, f64v(r.LargestRan), r.Note, errs)
	}
	for _, tr := range r.Trials {
		if tr.Value > fit.Ceiling || tr.Value < 1 {
			t.Errorf("trial %d at %v, outside 1..2^31", tr.N, tr.Value)
		}
	}
}

// TestFitEndsSetsidChildren: a trial's child that starts a session of
// its own (setsid) leaves the trial's process group; it is still ended
// with its trial, and waited for.
func TestFitEndsSetsidChildren(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	script := `setsid sleep 300 & echo $! > "$2/pid-$1"; exit 0`
	r, errs, code := fitJSON(t, db, "--id", "setsid", "--steps", "0", "--min", "4", "--max", "8", "--", "sh", "-c", script, "x", "{}", dir)
	if code != 0 || len(r.Trials) == 0 {
		t.Fatalf("exit %d, %d trials:\n%s", code, len(r.Trials), errs)
	}
	for _, tr := range r.Trials {
		b, err := os.ReadFile(filepath.Join(dir, "pid-"+num(tr.Value)))
		if err != nil {
			t.Fatalf("trial %d wrote no pid: %v", tr.N, err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		// Its process may take a moment to disappear from /proc once
		// reaped; alive ignores zombies.
		for deadline := time.Now().Add(2 * time.Second); alive(pid); time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Errorf("trial %d's setsid child %d still runs after the fit", tr.N, pid)
				break
			}
		}
	}
}
