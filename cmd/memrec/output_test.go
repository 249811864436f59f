package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/memrec/memrec/testsupport/fixtures"
)

// badOutput matches what a formatting path prints when it goes wrong: a Go
// verb it could not apply (%!g(*float64=0x…), %!d(MISSING)) or a number
// that is not one.
var badOutput = regexp.MustCompile(`%!|\bNaN\b|[+-]Inf\b`)

// outputFixtures writes every kind of run the commands must cope with into
// dir and returns the files: the real runs, the same runs without probe
// (device only), a device-only run whose epochs are inferred, a run with
// GPUs and no samples, and a run with only marks.
func outputFixtures(t *testing.T, dir string) []string {
	t.Helper()
	files := []string{fixtures.Path(fixtures.CleanRun), fixtures.Path(fixtures.LeakRun),
		fixtures.Path(fixtures.H200OOM), fixtures.Path(fixtures.H200Plain[0]), fixtures.Path(fixtures.H200GPT[0])}
	write := func(name string, data []byte) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	eval, _ := fixtures.EvalRun("eval-pauses").Write()
	write("eval-pauses.jsonl", eval)
	write("clean-device.jsonl", fixtures.DeviceOnly(t, fixtures.CleanRun))
	write("leak-device.jsonl", fixtures.DeviceOnly(t, fixtures.LeakRun))
	write("empty.jsonl", []byte(`{"type":"run","name":"empty","start_ns":1000000000,"tags":{"batch_size":"8"}}
{"type":"gpu","gpu":0,"name":"NVIDIA H200","total_bytes":150754820096}
`))
	var marks strings.Builder
	marks.WriteString(`{"type":"run","name":"marks-only","start_ns":1000000000,"tags":{"batch_size":"16"}}
{"type":"gpu","gpu":0,"total_bytes":1000}
{"type":"mark","t_ns":1000000000,"kind":"epoch_start","epoch":0}
`)
	for i := range 20 {
		fmt.Fprintf(&marks, `{"type":"mark","t_ns":%d,"kind":"step","step":%d}`+"\n", 1000000000+int64(i+1)*1e7, i)
	}
	marks.WriteString(`{"type":"mark","t_ns":1300000000,"kind":"oom","text":"CUDA out of memory."}` + "\n")
	write("marks-only.jsonl", []byte(marks.String()))
	return files
}

// TestNoBrokenNumbersInAnyOutput runs every command that prints figures on
// every fixture and fails on a Go formatting verb or a NaN/Inf anywhere in
// what they write, text, JSON or HTML.
func TestNoBrokenNumbersInAnyOutput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	files := outputFixtures(t, dir)
	if _, errs, code := run(t, db, "", append([]string{"import"}, files...)...); code != 0 {
		t.Fatal(errs)
	}
	names := []string{fixtures.CleanRun, fixtures.LeakRun, fixtures.CleanRun + "-device", fixtures.LeakRun + "-device", "empty", "marks-only",
		"r18-oom", "plain-leak-bs64", "gpt-bs8", "eval-pauses"}
	check := func(what, out string) {
		t.Helper()
		if loc := badOutput.FindStringIndex(out); loc != nil {
			lo, hi := max(0, loc[0]-120), min(len(out), loc[1]+120)
			t.Errorf("%s prints %q: …%s…", what, out[loc[0]:loc[1]], out[lo:hi])
		}
	}
	mustRun := func(args ...string) string {
		t.Helper()
		out, errs, code := run(t, db, "", args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		check(strings.Join(args, " "), out+errs)
		return out
	}
	mustRun("runs")
	mustRun("runs", "--json", "--check")
	for _, n := range names {
		mustRun("analyze", n)
		mustRun("analyze", n, "--json")
		mustRun("export", n)
		mustRun("export", n, "--format", "csv")
		mustRun("export", n, "--from", "0", "--to", "5")
		rep := filepath.Join(dir, "rep-"+n)
		mustRun("report", n, "-o", rep, "--width", "400", "--height", "200")
		page, err := os.ReadFile(filepath.Join(rep, "index.html"))
		if err != nil {
			t.Fatal(err)
		}
		// The embedded PNGs are base64, where "NaN" can occur by chance.
		page = regexp.MustCompile(`data:image/png;base64,[A-Za-z0-9+/=]+`).ReplaceAll(page, nil)
		check("report "+n, string(page))
	}
	for _, align := range []string{"step", "epoch", "time"} {
		cmp := filepath.Join(dir, "cmp-"+align)
		mustRun(append([]string{"compare", "--align", align, "-o", cmp}, names...)...)
		page, err := os.ReadFile(filepath.Join(cmp, "index.html"))
		if err != nil {
			t.Fatal(err)
		}
		check("compare page", string(regexp.MustCompile(`data:image/png;base64,[A-Za-z0-9+/=]+`).ReplaceAll(page, nil)))
		mustRun(append([]string{"compare", "--json", "--align", align}, names...)...)
	}
	mustRun("compare", "--by", "batch_size")
	mustRun("compare", "--by", "batch_size", "--json")
	if testing.Verbose() {
		t.Log(bytes.Count([]byte(mustRun("analyze", "empty")), []byte("\n")), "lines for the empty run")
	}
}
