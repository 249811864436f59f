package nvsmi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/testsupport/fixtures"
)

func parseStrings(t *testing.T, loc *time.Location, files ...string) (*Log, error) {
	t.Helper()
	var srcs []Source
	for i, f := range files {
		srcs = append(srcs, Source{Name: []string{"a.csv", "b.csv", "c.csv"}[i], R: strings.NewReader(f)})
	}
	return Parse(srcs, loc)
}

// The four shapes of the two queries, as nvidia-smi's documentation and
// --help-query-gpu describe them.
const (
	gpuWithUnits = `timestamp, index, uuid, memory.used [MiB], memory.total [MiB]
2026/11/29 22:35:19.123, 0, GPU-aaaa, 1000 MiB, 143771 MiB
2026/11/29 22:35:19.124, 1, GPU-bbbb, 2000 MiB, 143771 MiB
2026/11/29 22:35:20.125, 0, GPU-aaaa, [N/A], 143771 MiB
2026/11/29 22:35:20.126, 1, GPU-bbbb, 2001 MiB, 143771 MiB
`
	gpuBare = `2026/11/29 22:35:19.123, 0, GPU-aaaa, 1000, 143771
2026/11/29 22:35:19.124, 1, GPU-bbbb, 2000, 143771
2026/11/29 22:35:20.125, 0, GPU-aaaa, [N/A], 143771
2026/11/29 22:35:20.126, 1, GPU-bbbb, 2001, 143771
`
	appsWithUnits = `timestamp, gpu_uuid, pid, used_gpu_memory [MiB]
2026/11/29 22:35:19.500, GPU-bbbb, 4242, 1500 MiB
2026/11/29 22:35:20.500, GPU-bbbb, 4242, [N/A]
`
	appsBare = `2026/11/29 22:35:19.500, GPU-bbbb, 4242, 1500
2026/11/29 22:35:20.500, GPU-bbbb, 4242, [N/A]
`
)

// A header and a data line of --query-gpu, for tests of single lines.
const (
	hdr = "timestamp, index, uuid, memory.used [MiB], memory.total [MiB]\n"
	row = "2026/11/29 22:35:19.123, 0, GPU-a, 1 MiB, 2 MiB\n"
)

func TestParseDocumentedShapes(t *testing.T) {
	utc := time.UTC
	at := func(s string) int64 { // the timestamps above, read as UTC
		tm, err := time.ParseInLocation("2006/01/02 15:04:05.000", s, utc)
		if err != nil {
			t.Fatal(err)
		}
		return tm.UnixNano()
	}
	wantDev := []storage.DeviceSample{
		{T: at("2026/11/29 22:35:19.123"), GPU: 0, Used: 1000 << 20},
		{T: at("2026/11/29 22:35:19.124"), GPU: 1, Used: 2000 << 20},
		{T: at("2026/11/29 22:35:20.126"), GPU: 1, Used: 2001 << 20},
	}
	wantProc := []storage.ProcSample{{T: at("2026/11/29 22:35:19.500"), GPU: 1, PID: 4242, Used: 1500 << 20}}
	for _, tc := range []struct{ name, gpu, apps string }{
		{"header and units", gpuWithUnits, appsWithUnits},
		{"neither", gpuBare, appsBare},
		{"mixed", gpuWithUnits, appsBare},
	} {
		l, err := parseStrings(t, utc, tc.gpu, tc.apps)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(l.GPUs) != 2 || l.GPUs[0] != (storage.GPU{Index: 0, UUID: "GPU-aaaa", TotalBytes: 143771 << 20}) || l.GPUs[1].UUID != "GPU-bbbb" {
			t.Errorf("%s: GPUs %+v", tc.name, l.GPUs)
		}
		if !slices.Equal(l.Device, wantDev) || !slices.Equal(l.Procs, wantProc) {
			t.Errorf("%s:\n device %+v\n want   %+v\n procs %+v\n want  %+v", tc.name, l.Device, wantDev, l.Procs, wantProc)
		}
		if l.Unavailable != 2 {
			t.Errorf("%s: %d unavailable values, want 2 (one [N/A] in each log)", tc.name, l.Unavailable)
		}
		if iv := l.Interval(); iv != at("2026/11/29 22:35:20.126")-at("2026/11/29 22:35:19.124") && iv != 0 {
			// GPU 0 has a single sample left, so no interval
			t.Errorf("%s: interval %d", tc.name, iv)
		}
	}
}

// TestTimeZone: the logs carry no zone; the same line read in two zones
// lies the zones' offset apart.
func TestTimeZone(t *testing.T) {
	plus2 := time.FixedZone("x", 2*3600)
	a, err := parseStrings(t, time.UTC, gpuBare)
	if err != nil {
		t.Fatal(err)
	}
	b, err := parseStrings(t, plus2, gpuBare)
	if err != nil {
		t.Fatal(err)
	}
	if d := a.Device[0].T - b.Device[0].T; d != int64(2*time.Hour) {
		t.Errorf("UTC minus UTC+2 = %v, want 2h", time.Duration(d))
	}
}

// TestAppsOnly: without the GPU log, GPUs get indices in order of first
// appearance.
func TestAppsOnly(t *testing.T) {
	l, err := parseStrings(t, time.UTC, "2026/01/01 00:00:00.000, GPU-z, 1, 10\n2026/01/01 00:00:00.000, GPU-y, 2, 20\n2026/01/01 00:00:01.000, GPU-z, 1, 11\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(l.GPUs) != 2 || l.GPUs[0].UUID != "GPU-z" || l.GPUs[1].UUID != "GPU-y" || l.Procs[1].GPU != 1 {
		t.Fatalf("GPUs %+v procs %+v", l.GPUs, l.Procs)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files []string
		want  string
	}{
		{"bad number", []string{hdr + row + "2026/11/29 22:35:19.123, 0, GPU-a, 1x MiB, 2 MiB\n"}, `a.csv:3: memory.used "1x MiB": want a number of MiB`},
		{"other unit", []string{hdr + "2026/11/29 22:35:19.123, 0, GPU-a, 1 GiB, 2 MiB\n"}, `a.csv:2: memory.used "1 GiB"`},
		{"unit in header", []string{"timestamp, index, memory.used [GiB]\n"}, `a.csv:1: column "memory.used [GiB]": memory must be in MiB`},
		{"bad time", []string{row + "2026-11-29T22:35:19, 0, GPU-a, 1, 2\n"}, `a.csv:2: timestamp "2026-11-29T22:35:19": want YYYY/MM/DD HH:MM:SS.mmm`},
		{"short line", []string{hdr + row + "2026/11/29 22:35:19.123, 0, GPU-a\n"}, "a.csv:3: 3 columns, want 5"},
		{"no header, odd columns", []string{"2026/11/29 22:35:19.123, 0, 1\n"}, "a.csv:1: 3 columns and no header"},
		{"unknown header", []string{"timestamp, name, temperature.gpu\n"}, "a.csv:1: the header names no timestamp or no memory used"},
		{"second header", []string{hdr + row + "timestamp, gpu_uuid, pid, used_gpu_memory [MiB]\n"}, "a.csv:3: a second, different header"},
		{"index changes uuid", []string{row, "\n\n2026/11/29 22:35:20.000, 0, GPU-b, 1, 2\n"}, "b.csv:3: GPU 0 is GPU-b here but GPU-a at a.csv:1"},
		{"uuid changes index", []string{row + "2026/11/29 22:35:20.000, 1, GPU-a, 1, 2\n"}, "a.csv:2: GPU GPU-a is index 1 here but index 0 at a.csv:1"},
		{"bad pid", []string{"2026/11/29 22:35:19.123, GPU-a, -3, 5\n"}, `a.csv:1: pid "-3": want a process id`},
		{"nothing", []string{hdr}, "no samples"},
		{"long line", []string{row + strings.Repeat("x", 2<<20) + "\n"}, "a.csv:2: a line longer than 1048576 bytes"},
	} {
		_, err := parseStrings(t, time.UTC, tc.files...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

// TestRepeatedHeader: nvidia-smi restarted into the same log writes its
// header again; that is no error.
func TestRepeatedHeader(t *testing.T) {
	l, err := parseStrings(t, time.UTC, gpuWithUnits+gpuWithUnits[:strings.Index(gpuWithUnits, "\n")+1]+"2026/11/29 22:40:00.000, 0, GPU-aaaa, 7 MiB, 143771 MiB\n")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(l.Device); n != 4 {
		t.Fatalf("%d samples, want 4", n)
	}
}

// TestImportRoundTrip: the JSON Lines of a log import into a store, and
// the store gives back the samples.
func TestImportRoundTrip(t *testing.T) {
	l, err := parseStrings(t, time.UTC, gpuWithUnits, appsWithUnits)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := l.WriteJSONL(&buf, "smi", ""); err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(t.TempDir()+"/m.db", storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "smi", R: &buf}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if r.Counts.Samples != 3 || r.Counts.ProcSamples != 1 || r.Recorder.Source != storage.SourceNvidiaSMI || r.Recorder.Invalid != 2 || len(r.GPUs) != 2 {
		t.Fatalf("run %+v", r)
	}
	var got []storage.DeviceSample
	for _, g := range []int{0, 1} {
		it := db.DeviceSamples(r, g, storage.MinTime, storage.MaxTime)
		for it.Next() {
			got = append(got, it.At())
		}
	}
	if len(got) != 3 || got[0].Used != 1000<<20 || got[2].Used != 2001<<20 {
		t.Fatalf("stored %+v", got)
	}
}

// readGz returns a gzipped testdata file.
func readGz(t *testing.T, name string) string {
	t.Helper()
	return string(fixtures.Gunzip(t, filepath.Join("testdata", name)))
}

// dataLines counts a log's lines that are not empty and not the header.
func dataLines(s string) int {
	n := 0
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" && !strings.HasPrefix(l, "timestamp") {
			n++
		}
	}
	return n
}

// TestRealLogs reads the four real logs of an H200 machine: every line is
// a sample, the two GPUs keep their uuids, and GPU 0's peak and its time
// agree with memrec's own recording of that GPU at the same time (read in
// UTC, the machine's zone), to nvidia-smi's 1 MiB and 250 ms.
func TestRealLogs(t *testing.T) {
	gpuH, gpuP := readGz(t, "gpu-header-units.csv.gz"), readGz(t, "gpu-noheader-nounits.csv.gz")
	appsH, appsP := readGz(t, "apps-header-units.csv.gz"), readGz(t, "apps-noheader-nounits.csv.gz")
	const uuid0, uuid1 = "GPU-b9255ade-04f8-2ae3-2bde-4b68a345ebcb", "GPU-a6d64387-ee1d-9d98-5ad0-f5f53f817318"
	for _, tc := range []struct{ name, gpu, apps string }{{"header and units", gpuH, appsH}, {"neither", gpuP, appsP}} {
		l, err := parseStrings(t, time.UTC, tc.gpu, tc.apps)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if len(l.Device) != dataLines(tc.gpu) || len(l.Procs) != dataLines(tc.apps) || l.Unavailable != 0 {
			t.Errorf("%s: %d samples, %d process samples, %d unavailable; the logs have %d and %d lines", tc.name,
				len(l.Device), len(l.Procs), l.Unavailable, dataLines(tc.gpu), dataLines(tc.apps))
		}
		if len(l.GPUs) != 2 || l.GPUs[0].UUID != uuid0 || l.GPUs[1].UUID != uuid1 || l.GPUs[0].TotalBytes != 143771<<20 {
			t.Errorf("%s: GPUs %+v", tc.name, l.GPUs)
		}
		if iv := l.Interval(); iv < 240e6 || iv > 260e6 {
			t.Errorf("%s: interval %v, the logs were written every 250 ms", tc.name, time.Duration(iv))
		}

		// memrec's own recording of GPU 0.
		var peak storage.DeviceSample
		for _, line := range strings.Split(readGz(t, "memrec-smi-train.jsonl.gz"), "\n") {
			var s struct {
				Type string `json:"type"`
				T    int64  `json:"t_ns"`
				GPU  int    `json:"gpu"`
				Used int64  `json:"used_bytes"`
			}
			if json.Unmarshal([]byte(line), &s) == nil && s.Type == "sample" && s.GPU == 0 && s.Used > peak.Used {
				peak = storage.DeviceSample{T: s.T, Used: s.Used}
			}
		}
		var smiPeak storage.DeviceSample
		for _, s := range l.Device {
			if s.GPU == 0 && s.Used > smiPeak.Used {
				smiPeak = s
			}
		}
		if d := smiPeak.Used - peak.Used; d < -(1<<20) || d > 1<<20 {
			t.Errorf("%s: GPU 0 peak %d MiB in the log, %.3f MiB recorded by memrec", tc.name, smiPeak.Used>>20, float64(peak.Used)/(1<<20))
		}
		if d := time.Duration(smiPeak.T - peak.T); d < -300*time.Millisecond || d > 300*time.Millisecond {
			t.Errorf("%s: GPU 0 peak %v apart from memrec's (log read as UTC)", tc.name, d)
		}
	}
}

// TestRealLogWithUnavailable: a value nvidia-smi could not read drops its
// sample and is counted; a broken line anywhere fails the whole log.
func TestRealLogWithUnavailable(t *testing.T) {
	lines := strings.Split(readGz(t, "gpu-header-units.csv.gz"), "\n")
	full, err := parseStrings(t, time.UTC, strings.Join(lines, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	na := slices.Clone(lines)
	na[5] = strings.Replace(na[5], strings.Split(na[5], ", ")[3], "[N/A]", 1)
	na[9] = strings.Replace(na[9], strings.Split(na[9], ", ")[3], "[Not Supported]", 1)
	l, err := parseStrings(t, time.UTC, strings.Join(na, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if l.Unavailable != 2 || len(l.Device) != len(full.Device)-2 {
		t.Errorf("%d unavailable, %d samples of %d", l.Unavailable, len(l.Device), len(full.Device))
	}
	bad := slices.Clone(lines)
	bad[100] = strings.Replace(bad[100], " MiB", " MB", 1)
	if _, err := parseStrings(t, time.UTC, strings.Join(bad, "\n")); err == nil || !strings.HasPrefix(err.Error(), "a.csv:101: memory.used") {
		t.Errorf("a broken line 101: %v", err)
	}
}

// A header is recognised whatever its columns' order, and name and
// memory.reserved are read: the GPU's name, the driver's reservation.
func TestHeaderInAnyOrder(t *testing.T) {
	l, err := parseStrings(t, time.UTC, `index, name, memory.total [MiB], memory.reserved [MiB], memory.used [MiB], uuid, timestamp
0, NVIDIA H200, 143771 MiB, 616 MiB, 1000 MiB, GPU-aaaa, 2026/11/29 22:35:19.123
0, NVIDIA H200, 143771 MiB, [N/A], 1001 MiB, GPU-aaaa, 2026/11/29 22:35:19.373
`)
	if err != nil {
		t.Fatal(err)
	}
	want := storage.GPU{Index: 0, UUID: "GPU-aaaa", Name: "NVIDIA H200", TotalBytes: 143771 << 20}
	if len(l.GPUs) != 1 || l.GPUs[0] != want {
		t.Errorf("GPUs %+v, want %+v", l.GPUs, want)
	}
	// 616 MiB reserved; unknown ([N/A]) stays unknown (0), the sample kept.
	if len(l.Device) != 2 || l.Device[0].Reserved != 616<<20 || l.Device[0].Used != 1000<<20 || l.Device[1].Reserved != 0 || l.Device[1].Used != 1001<<20 {
		t.Errorf("samples %+v", l.Device)
	}
}

// Years past 2262 do not fit int64 nanoseconds: they are refused by the
// 1970..2200 bound on the calendar, never wrapped into another year.
func TestTimestampOutsideBounds(t *testing.T) {
	for _, ts := range []string{"2600/01/01 00:00:00.000", "9999/12/31 23:59:59.999", "1969/12/31 23:59:59.000", "2200/01/01 00:00:00.000"} {
		_, err := parseStrings(t, time.UTC, hdr+ts+", 0, GPU-a, 1 MiB, 2 MiB\n")
		want := `a.csv:2: timestamp "` + ts + `" is outside 1970..2200`
		if err == nil || err.Error() != want {
			t.Errorf("%s: error %v, want %q", ts, err, want)
		}
	}
	if _, err := parseStrings(t, time.UTC, hdr+"2199/12/31 23:59:59.999, 0, GPU-a, 1 MiB, 2 MiB\n"); err != nil {
		t.Errorf("the last moment before 2200: %v", err)
	}
}

// At the end of daylight saving time the clock shows 02:00..03:00 twice:
// the second pass is read as the later hour, so a log's times keep going
// forward and no sample lands on another's time.
func TestDSTFoldKeepsBothHours(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone data:", err)
	}
	// 2026-10-25: 03:00 CEST became 02:00 CET.
	walls := []string{"01:59:00", "02:00:00", "02:30:00", "02:59:00", "02:00:00", "02:30:00", "02:59:00", "03:00:00"}
	var log strings.Builder
	log.WriteString(hdr)
	for _, w := range walls {
		log.WriteString("2026/10/25 " + w + ".000, 0, GPU-a, 1 MiB, 2 MiB\n")
	}
	l, err := parseStrings(t, berlin, log.String())
	if err != nil {
		t.Fatal(err)
	}
	// 00:59 UTC, then every half hour but the 29-minute steps to :59.
	utc := func(hm string) int64 {
		tm, _ := time.Parse("2006-01-02 15:04", "2026-10-25 "+hm)
		return tm.UnixNano()
	}
	want := []int64{utc("23:59") - 24*int64(time.Hour), utc("00:00"), utc("00:30"), utc("00:59"), utc("01:00"), utc("01:30"), utc("01:59"), utc("02:00")}
	var got []int64
	for _, s := range l.Device {
		got = append(got, s.T)
	}
	if !slices.Equal(got, want) || l.Folded != 3 {
		t.Errorf("times %v\nwant  %v\n(folded %d, want 3)", got, want, l.Folded)
	}
}

// A --query-gpu log without index whose uuid nvidia-smi could not read
// ([N/A]) cannot tell its GPUs apart: those rows are dropped and counted,
// never one new GPU a row.
func TestUnavailableUUIDsAreNotGPUs(t *testing.T) {
	var log strings.Builder
	log.WriteString("timestamp, uuid, memory.used [MiB]\n")
	for i := range 30 {
		fmt.Fprintf(&log, "2026/11/29 22:35:%02d.000, [N/A], %d MiB\n", i, i)
	}
	log.WriteString("2026/11/29 22:36:00.000, GPU-aaaa, 5 MiB\n")
	l, err := parseStrings(t, time.UTC, log.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(l.GPUs) != 1 || l.GPUs[0].UUID != "GPU-aaaa" || len(l.Device) != 1 || l.Unavailable != 30 {
		t.Errorf("%d GPUs (%+v), %d samples, %d unavailable", len(l.GPUs), l.GPUs, len(l.Device), l.Unavailable)
	}
	// With an index, a uuid read later than the GPU's first line is its.
	l, err = parseStrings(t, time.UTC, hdr+"2026/11/29 22:35:19.123, 0, [N/A], 1 MiB, 2 MiB\n2026/11/29 22:35:20.123, 0, GPU-a, 1 MiB, 2 MiB\n")
	if err != nil || len(l.GPUs) != 1 || l.GPUs[0].UUID != "GPU-a" {
		t.Errorf("uuid learnt late: %v, GPUs %+v", err, l.GPUs)
	}
	// A process on a GPU of unknown uuid is dropped and counted.
	l, err = parseStrings(t, time.UTC, row, "2026/11/29 22:35:19.500, [N/A], 4242, 1500\n")
	if err != nil || len(l.Procs) != 0 || l.Unavailable != 1 {
		t.Errorf("process on [N/A]: %v, %d processes, %d unavailable", err, len(l.Procs), l.Unavailable)
	}
}

// FuzzParse feeds the parser arbitrary logs: it must return a log or an
// error, never panic; and what it accepts, the import accepts too (every
// line it writes parses, every time in 1970..2200).
func FuzzParse(f *testing.F) {
	f.Add(gpuWithUnits, appsWithUnits)
	f.Add(gpuBare, appsBare)
	f.Add("index, memory.used [MiB], timestamp, uuid\n0, 5 MiB, 2026/10/25 02:30:00.000, GPU-a\n", "")
	f.Add(hdr+"2600/01/01 00:00:00.000, 0, GPU-a, 1 MiB, 2 MiB\n", "")
	f.Fuzz(func(t *testing.T, gpu, apps string) {
		berlin, _ := time.LoadLocation("Europe/Berlin")
		l, err := parseStrings(t, berlin, gpu, apps)
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := l.WriteJSONL(&buf, "fuzz", "h"); err != nil {
			t.Fatal(err)
		}
		var p wire.Parser
		for i, line := range bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n")) {
			r, err := p.Parse(line)
			if err != nil {
				t.Fatalf("line %d %s: %v", i+1, line, err)
			}
			if r.Type == wire.TypeSample && (r.Device.T < storage.EarliestTime || r.Device.T >= storage.LatestTime) {
				t.Fatalf("line %d: time %d outside 1970..2200", i+1, r.Device.T)
			}
		}
		if len(l.GPUs) > storage.MaxGPUs {
			t.Fatalf("%d GPUs", len(l.GPUs))
		}
	})
}
