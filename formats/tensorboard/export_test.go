package tensorboard

import (
	"bytes"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// TestMaskedCRC checks the CRC against the published CRC-32C check value
// (of "123456789": 0xe3069283) and the mask against its definition.
func TestMaskedCRC(t *testing.T) {
	c := uint32(0xe3069283)
	want := ((c >> 15) | (c << 17)) + 0xa282ead8
	if got := maskedCRC([]byte("123456789")); got != want {
		t.Fatalf("maskedCRC = %#x, want %#x", got, want)
	}
}

func TestRecordFraming(t *testing.T) {
	datas := [][]byte{{}, {0x42}, bytes.Repeat([]byte("memrec"), 50)}
	var file []byte
	for _, d := range datas {
		file = appendRecord(file, d)
	}
	if want := 3*recordOverhead + 1 + 300; len(file) != want {
		t.Fatalf("file is %d bytes, want %d", len(file), want)
	}
	got, err := readRecords(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(datas) {
		t.Fatalf("%d records, want %d", len(got), len(datas))
	}
	for i := range datas {
		if !bytes.Equal(got[i], datas[i]) {
			t.Errorf("record %d = %q, want %q", i, got[i], datas[i])
		}
	}
	for _, tc := range []struct {
		name string
		at   int
	}{{"length", 0}, {"length crc", 9}, {"data", 16 + 12 + 1 + 12 + 5}, {"data crc", 16 + 12 + 1 + 2}} {
		bad := bytes.Clone(file)
		bad[tc.at] ^= 0x10
		if _, err := readRecords(bad); err == nil {
			t.Errorf("a flipped bit in the %s (byte %d) went unnoticed", tc.name, tc.at)
		}
	}
}

// syntheticReport is one GPU with every figure Export writes, values chosen
// so that each is distinct.
func syntheticReport() *analysis.Report {
	const s = int64(1_700_000_000_000_000_000)
	ms := func(n int64) int64 { return s + n*1_000_000 }
	i64 := func(v int64) *int64 { return &v }
	g := analysis.GPUReport{GPU: 3}
	g.Timeline.Used = analysis.Series{T: []int64{ms(0), ms(10), ms(20), ms(30)}, V: []int64{1 << 30, 3 << 29, 5 << 20, 7 << 20}, I: []int64{0, 7, 9, 12}}
	g.Timeline.Allocated = analysis.Series{T: []int64{ms(5), ms(25)}, V: []int64{100 << 20, 200 << 20}, I: []int64{0, 1}}
	g.Timeline.Reserved = analysis.Series{T: []int64{ms(5), ms(25)}, V: []int64{300 << 20, 400 << 20}, I: []int64{0, 1}}
	g.Steps = growth.StepsOf(growth.StepMark{TNS: ms(12), Step: 1}, growth.StepMark{TNS: ms(22), Step: 2})
	g.StepPeaks = []growth.FloorPoint{{X: 1, TNS: ms(2), Bytes: 250 << 20}, {X: 2, TNS: ms(12), Bytes: 260 << 20}}
	g.FragSeries = []analysis.FragPoint{{TNS: ms(5), Frag: 0.25, Stuck: 0.125, I: 0}, {TNS: ms(25), Frag: 0.5, Stuck: 0.0625, I: 1}}
	g.Epochs = []analysis.EpochDelta{{Epoch: 0, EndNS: ms(15), DeltaUsedBytes: i64(-4 << 20), DeltaAllocatedBytes: i64(6 << 20)}, {Epoch: 1, EndNS: ms(30)}}
	return &analysis.Report{StartNS: s, GPUs: []analysis.GPUReport{g}}
}

func TestExportSynthetic(t *testing.T) {
	rep := syntheticReport()
	var buf bytes.Buffer
	if err := Export(&buf, rep, 0); err != nil {
		t.Fatal(err)
	}
	ef, err := readEventFile(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if ef.Version != "brain.Event:2" || ef.Wall0 != 1.7e9 {
		t.Fatalf("first event: version %q at %v", ef.Version, ef.Wall0)
	}
	const t0 = 1.7e9
	// Steps: a point belongs to the first step mark at or after it (12 ms
	// ends step 1, 22 ms step 2); after the last mark, the last step.
	want := map[string][]scalar{
		"device_used_MiB/gpu3":           {{Step: 1, Wall: t0, V: 1024}, {Step: 1, Wall: t0 + .010, V: 1536}, {Step: 2, Wall: t0 + .020, V: 5}, {Step: 2, Wall: t0 + .030, V: 7}},
		"allocated_MiB/gpu3":             {{Step: 1, Wall: t0 + .005, V: 100}, {Step: 2, Wall: t0 + .025, V: 200}},
		"reserved_MiB/gpu3":              {{Step: 1, Wall: t0 + .005, V: 300}, {Step: 2, Wall: t0 + .025, V: 400}},
		"step_peak_allocated_MiB/gpu3":   {{Step: 1, Wall: t0 + .002, V: 250}, {Step: 2, Wall: t0 + .012, V: 260}},
		"fragmentation/gpu3":             {{Step: 1, Wall: t0 + .005, V: 0.25}, {Step: 2, Wall: t0 + .025, V: 0.5}},
		"fragmentation_stuck/gpu3":       {{Step: 1, Wall: t0 + .005, V: 0.125}, {Step: 2, Wall: t0 + .025, V: 0.0625}},
		"epoch_delta_used_MiB/gpu3":      {{Step: 0, Wall: t0 + .015, V: -4}},
		"epoch_delta_allocated_MiB/gpu3": {{Step: 0, Wall: t0 + .015, V: 6}},
	}
	if len(ef.ByTag) != len(want) {
		t.Errorf("tags %v, want %d", keys(ef.ByTag), len(want))
	}
	for tag, ws := range want {
		got := ef.ByTag[tag]
		if len(got) != len(ws) {
			t.Errorf("%s: %d scalars, want %d", tag, len(got), len(ws))
			continue
		}
		for i, w := range ws {
			g := got[i]
			if g.Step != w.Step || g.V != w.V || math.Abs(g.Wall-w.Wall) > 1e-6 {
				t.Errorf("%s[%d] = step %d wall %.4f value %v, want step %d wall %.4f value %v", tag, i, g.Step, g.Wall, g.V, w.Step, w.Wall, w.V)
			}
		}
	}

	// Without step marks the step is the sample's index.
	rep.GPUs[0].Steps = nil
	buf.Reset()
	if err := Export(&buf, rep, 0); err != nil {
		t.Fatal(err)
	}
	if ef, err = readEventFile(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	var steps []int64
	for _, s := range ef.ByTag["device_used_MiB/gpu3"] {
		steps = append(steps, s.Step)
	}
	if want := []int64{0, 7, 9, 12}; !slices.Equal(steps, want) {
		t.Errorf("steps without step marks: %v, want the sample indices %v", steps, want)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// realExport exports a real H200 run with at most points points a series;
// it returns the event file and the run's device samples of GPU 0 by time.
func realExport(t *testing.T, name string, points int) ([]byte, *analysis.Report, map[int64]int64) {
	t.Helper()
	return exportRun(t, name, fixtures.Read(t, name), points)
}

// exportRun imports a run from its JSON Lines and exports it as realExport
// does.
func exportRun(t *testing.T, name string, lines []byte, points int) ([]byte, *analysis.Report, map[int64]int64) {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: name, R: bytes.NewReader(lines)}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analysis.Analyze(db, runs[0], analysis.Options{Width: Buckets(points)})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Export(&buf, rep, points); err != nil {
		t.Fatal(err)
	}
	used := map[int64]int64{}
	it := db.DeviceSamples(runs[0], 0, storage.MinTime, storage.MaxTime)
	for it.Next() {
		used[it.At().T] = it.At().Used
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), rep, used
}

// TestExportRealRun: every device_used point is a real sample at its time,
// the peak survives downsampling, and no series exceeds the points asked.
func TestExportRealRun(t *testing.T) {
	const points = 400
	file, rep, used := realExport(t, fixtures.LeakRun, points)
	ef, err := readEventFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var peak int64
	for _, u := range used {
		peak = max(peak, u)
	}
	byWall := map[int64]int64{}
	for tns, u := range used {
		byWall[int64(math.Round(float64(tns)/1e3))] = u // µs, as float64 seconds keep it
	}
	got := ef.ByTag["device_used_MiB/gpu0"]
	if len(got) == 0 || len(got) > points {
		t.Fatalf("device_used: %d points, want 1..%d", len(got), points)
	}
	var top float32
	for _, s := range got {
		u, ok := byWall[int64(math.Round(s.Wall*1e6))]
		if !ok {
			t.Fatalf("device_used at %.6f: no sample at that time", s.Wall)
		}
		if want := float32(float64(u) / (1 << 20)); s.V != want {
			t.Fatalf("device_used at %.6f = %v MiB, the sample says %v", s.Wall, s.V, want)
		}
		top = max(top, s.V)
	}
	if want := float32(float64(peak) / (1 << 20)); top != want {
		t.Errorf("highest device_used %v MiB, the run's peak is %v", top, want)
	}
	for tag, ss := range ef.ByTag {
		if len(ss) > points {
			t.Errorf("%s: %d points, more than %d", tag, len(ss), points)
		}
	}
	for _, tag := range []string{"allocated_MiB/gpu0", "reserved_MiB/gpu0", "step_peak_allocated_MiB/gpu0", "fragmentation/gpu0", "epoch_delta_used_MiB/gpu0"} {
		if len(ef.ByTag[tag]) == 0 {
			t.Errorf("no %s", tag)
		}
	}
	if n, want := len(ef.ByTag["epoch_delta_used_MiB/gpu0"]), len(rep.GPUs[0].Epochs); n != want {
		t.Errorf("%d epoch deltas, the run has %d epochs", n, want)
	}
	// Steps follow the training: never negative, and the last is the run's last step.
	last := rep.GPUs[0].Steps.Last().Step
	if s := got[len(got)-1].Step; s != int64(last) {
		t.Errorf("last device_used step %d, the run's last step is %d", s, last)
	}
}

// TestExportDefaultFitsTensorBoard: by default no series has more points
// than TensorBoard keeps (so its loader keeps them all), and the device
// series keeps the run's highest and lowest sample, on a run with
// more samples than that.
func TestExportDefaultFitsTensorBoard(t *testing.T) {
	file, _, used := realExport(t, fixtures.LeakRun, 0)
	if len(used) <= TensorBoardKeeps {
		t.Fatalf("the run has %d samples: too few to need downsampling", len(used))
	}
	ef, err := readEventFile(file)
	if err != nil {
		t.Fatal(err)
	}
	checkKeepsExtremes(t, ef.ByTag, used)
}

// checkKeepsExtremes: every series of byTag has at most TensorBoardKeeps
// points, and device_used_MiB/gpu0 holds the highest and lowest of used.
func checkKeepsExtremes(t *testing.T, byTag map[string][]scalar, used map[int64]int64) {
	t.Helper()
	peak, trough := int64(math.MinInt64), int64(math.MaxInt64)
	for _, u := range used {
		peak, trough = max(peak, u), min(trough, u)
	}
	for tag, ss := range byTag {
		if len(ss) > TensorBoardKeeps {
			t.Errorf("%s: %d points, TensorBoard keeps %d", tag, len(ss), TensorBoardKeeps)
		}
	}
	got := byTag["device_used_MiB/gpu0"]
	hi, lo := float32(math.Inf(-1)), float32(math.Inf(1))
	for _, s := range got {
		hi, lo = max(hi, s.V), min(lo, s.V)
	}
	if want := float32(float64(peak) / (1 << 20)); hi != want {
		t.Errorf("device_used: highest of %d points %v MiB, the run's peak %v MiB", len(got), hi, want)
	}
	if want := float32(float64(trough) / (1 << 20)); lo != want {
		t.Errorf("device_used: lowest of %d points %v MiB, the run's lowest %v MiB", len(got), lo, want)
	}
}

// FuzzEventRoundTrip: any scalar written reads back the same through the
// tests' reader, framing and CRCs checked.
func FuzzEventRoundTrip(f *testing.F) {
	f.Add("device_used_MiB/gpu0", int64(0), 1.7e9, float32(1024))
	f.Add("", int64(1<<62), -1.5, float32(math.Inf(-1)))
	f.Add("ü/\x00", int64(7), 0.0, float32(math.Copysign(0, -1)))
	f.Fuzz(func(t *testing.T, tag string, step int64, wall float64, v float32) {
		if step < 0 {
			step = -step - 1
		}
		var buf bytes.Buffer
		w := NewWriter(&buf, 12.5)
		w.Scalar(tag, step, wall, v)
		w.Scalar(tag+"x", step+1, wall, v)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		ef, err := readEventFile(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if ef.Version != FileVersion || ef.Wall0 != 12.5 || len(ef.Scalars) != 2 {
			t.Fatalf("%+v", ef)
		}
		s := ef.Scalars[0]
		same := func(a, b float64) bool { return a == b || math.IsNaN(a) && math.IsNaN(b) }
		if s.Tag != tag || s.Step != step || !same(s.Wall, wall) || math.Float32bits(s.V) != math.Float32bits(v) {
			t.Fatalf("wrote %q %d %v %v, read %+v", tag, step, wall, v, s)
		}
		if ef.Scalars[1].Step != step+1 || ef.Scalars[1].Tag != tag+"x" {
			t.Fatalf("second scalar %+v", ef.Scalars[1])
		}
	})
}
