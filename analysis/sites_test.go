package analysis

import (
	"errors"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// A leak of 4 MiB a step on GPU 1, kept at train.py:52: the verdict names
// that line, and the site explains the whole slope.
func TestWhereNamesTheLeakSite(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(11, 12))}
	c := analysistest.Train{GPUs: 2, Epochs: 4, StepsPerEpoch: 60, StepNS: 100e6, Leak: []int64{0, 4 * MiB}, Noise: 64 << 10, Sites: true}
	g.Train("leak", c)
	job := c.Job()
	rep := analyzeJSONL(t, g.String())["leak"]
	clean, leak := rep.GPUs[0], rep.GPUs[1]
	if clean.Where == nil || clean.Where.Growing == nil || len(clean.Where.Growing) != 0 || clean.Leak.HeldBy != nil {
		t.Errorf("GPU 0 (no leak): where %+v, held by %+v", clean.Where, clean.Leak.HeldBy)
	}
	w := leak.Where
	if w == nil || w.Snapshots != 4 || len(w.Growing) != 1 {
		t.Fatalf("GPU 1 where %+v", w)
	}
	gs := w.Growing[0]
	// What leaked between the first and the last epoch end.
	steps := c.Epochs * c.StepsPerEpoch
	if gs.Site != "train.py:52" || gs.Func != "keep" || gs.GrowthBytes != job.Kept(1, steps)-job.Kept(1, c.StepsPerEpoch) || gs.BytesPerStep == nil ||
		*gs.BytesPerStep != float64(job.LeakPerStep(1)) || gs.BytesPerEpoch == nil || *gs.BytesPerEpoch != float64(job.EpochDelta(1, 1)) {
		t.Errorf("growing site %+v", gs)
	}
	if !analysistest.Within(gs.Share, 1, 0.02) {
		t.Errorf("share of the slope %.3f, want 1", gs.Share)
	}
	h := leak.Leak.HeldBy
	if h == nil || h.Site != "train.py:52" || h.Line != 52 {
		t.Fatalf("held by %+v", h)
	}
	if s := leak.Leak.Sentence(1); !strings.Contains(s, "GPU 1 grows 4.0 MiB per step") || !strings.Contains(s, "of it is held by blocks allocated at train.py:52 in `keep`") {
		t.Errorf("sentence %q", s)
	}
	// At the end the leak (240 steps · 4 MiB = 960 MiB) is below the weights
	// (2.5 GiB) and above the buffer (512 MiB).
	end := w.AtEnd
	if end == nil || end.Reason != "epoch_end" || len(end.Top) != 3 || end.Top[0].Site != "model.py:10" ||
		end.Top[1].Site != "train.py:52" || end.Top[1].LiveBytes != job.Kept(1, steps) || end.UntrackedBytes != GiB {
		t.Errorf("at end %+v", end)
	}
	if end.LiveBytes != GiB+3*GiB+job.Kept(1, steps) || w.AtPeak.TNS != end.TNS {
		t.Errorf("end live %d, peak at %d (end at %d)", end.LiveBytes, w.AtPeak.TNS, end.TNS)
	}
}

// The same leak where the probe kept stacks on one step in 8 only (a
// CPU-bound job): the site holds an eighth of what leaked and the untracked
// entry the rest. The growth is scaled back, the site still explains the
// whole slope, the sentence says it is an estimate, and the untracked
// entry is not a growing site.
func TestWhereScalesSampledSites(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(11, 12)), SampleEvery: 8}
	c := analysistest.Train{GPUs: 1, Epochs: 4, StepsPerEpoch: 64, StepNS: 100e6, Leak: []int64{4 * MiB}, Noise: 64 << 10, Sites: true}
	g.Train("leak", c)
	job := c.Job()
	gr := analyzeJSONL(t, g.String())["leak"].GPUs[0]
	w := gr.Where
	if w == nil || len(w.Growing) != 1 {
		t.Fatalf("where %+v", w)
	}
	gs := w.Growing[0]
	steps := c.Epochs * c.StepsPerEpoch
	if gs.Site != "train.py:52" || gs.SampledEvery != 8 || gs.GrowthBytes != job.Kept(0, steps)-job.Kept(0, c.StepsPerEpoch) ||
		gs.BytesPerStep == nil || *gs.BytesPerStep != float64(job.LeakPerStep(0)) || gs.LastBytes-gs.FirstBytes != gs.GrowthBytes/8 {
		t.Errorf("growing site %+v", gs)
	}
	if !analysistest.Within(gs.Share, 1, 0.02) {
		t.Errorf("share of the slope %.3f, want 1", gs.Share)
	}
	h := gr.Leak.HeldBy
	if h == nil || h.SampledEvery != 8 {
		t.Fatalf("held by %+v", h)
	}
	if s := gr.Leak.Sentence(0); !strings.Contains(s, "held by blocks allocated at train.py:52 in `keep` (estimated: stacks kept on one step in 8)") {
		t.Errorf("sentence %q", s)
	}
}

// The OOM's post-mortem lists the holders at the OOM.
func TestWhereOOMHolders(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(13, 14))}
	c := analysistest.Train{GPUs: 1, Epochs: 2, StepsPerEpoch: 30, StepNS: 100e6, Leak: []int64{64 * MiB}, OOMAt: 45, Sites: true}
	g.Train("oom", c)
	job := c.Job()
	rep := analyzeJSONL(t, g.String())["oom"]
	gr := rep.GPUs[0]
	if len(gr.OOMs) != 1 || len(gr.OOMs[0].Holders) != 3 {
		t.Fatalf("ooms %+v", gr.OOMs)
	}
	hs := gr.OOMs[0].Holders
	// 45 leaks of 64 MiB (2.8 GiB) by then: the leak is the largest holder.
	if hs[0].Site != "train.py:52" || hs[0].LiveBytes != job.Kept(0, job.OOMStep(0, c.Epochs*c.StepsPerEpoch)) || hs[1].Site != "model.py:10" {
		t.Errorf("holders %+v", hs)
	}
	if gr.Where.OOM == nil || gr.Where.OOM.Reason != "oom" || gr.Where.AtEnd.Reason != "epoch_end" {
		t.Errorf("where %+v", gr.Where)
	}
}

// The chart's bands add up to each snapshot's live bytes; the growing site
// is the first band.
func TestWhereSeries(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(15, 16))}
	c := analysistest.Train{GPUs: 1, Epochs: 3, StepsPerEpoch: 20, StepNS: 100e6, Leak: []int64{4 * MiB}, Sites: true}
	g.Train("leak", c)
	job := c.Job()
	w := analyzeJSONL(t, g.String())["leak"].GPUs[0].Where
	if len(w.Series) != 5 || w.Series[0].Name != "train.py:52 keep" || !w.Series[0].Growth || w.Series[4].Name != "untracked" {
		t.Fatalf("series %+v", w.Series)
	}
	for k := 0; k < 3; k++ {
		var sum int64
		for _, s := range w.Series {
			sum += s.Bytes[k]
		}
		// weights 2.5 GiB + buffer 512 MiB + untracked 1 GiB + the leak so far
		if want := int64(4*GiB) + job.Kept(0, (k+1)*c.StepsPerEpoch); sum != want {
			t.Errorf("snapshot %d: bands add up to %d, want %d", k, sum, want)
		}
	}
}

// cpuTime is the process's user and system CPU time in ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkAnalyzeSites times Analyze on the same run with and without
// site snapshots at its epoch ends (bench/README.md: analysis with sites).
func BenchmarkAnalyzeSites(b *testing.B) {
	for _, sites := range []bool{false, true} {
		g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(21, 22))}
		g.Train("r", analysistest.Train{GPUs: 1, Epochs: 10, StepsPerEpoch: 500, StepNS: 100e6, Leak: []int64{1 * MiB}, Noise: 64 << 10, Sites: sites})
		db, err := storage.Open(filepath.Join(b.TempDir(), "a.db"), storage.Options{})
		if err != nil {
			b.Fatal(err)
		}
		runs, err := jsonl.Import(db, []jsonl.Source{{Name: "gen", R: strings.NewReader(g.String())}}, jsonl.ImportOptions{})
		if err != nil {
			b.Fatal(err)
		}
		name := "without_sites"
		if sites {
			name = "with_sites"
		}
		b.Run(name, func(b *testing.B) {
			// CPU time as well as wall time: on a loaded machine the wall
			// time measures the other processes.
			c0 := cpuTime()
			for b.Loop() {
				if _, err := Analyze(db, runs[0], Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-c0)/1e6/float64(b.N), "cpu-ms/op")
		})
		db.Close()
	}
}

// Sites.Bands over the whole run are the report's bands; over a window
// they are its snapshots and the one before it, ranked among themselves;
// with n = 1 the one site shown is the growing one and the rest adds up
// under "other sites".
func TestSitesBands(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(15, 16))}
	c := analysistest.Train{GPUs: 1, Epochs: 4, StepsPerEpoch: 20, StepNS: 100e6, Leak: []int64{4 * MiB}, Sites: true}
	g.Train("leak", c)
	db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "gen", R: strings.NewReader(g.String())}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run := runs[0]
	rep, err := Analyze(db, run, Options{})
	if err != nil {
		t.Fatal(err)
	}
	in, err := SitesInput(db, run, 0, storage.NewDecodeBudget(storage.DefaultDecodeBudget))
	if err != nil {
		t.Fatal(err)
	}
	s, err := sites.ReadSites(db, run, 0, in)
	if err != nil {
		t.Fatal(err)
	}
	want := rep.GPUs[0].Where.Series
	got := s.Bands(storage.MinTime, storage.MaxTime, sites.ChartSites)
	if s.Len() != 4 || !slices.EqualFunc(got, want, func(a, b sites.SiteSeries) bool {
		return a.Name == b.Name && a.Band == b.Band && a.Growth == b.Growth && slices.Equal(a.TNS, b.TNS) && slices.Equal(a.Bytes, b.Bytes)
	}) {
		t.Fatalf("%d snapshots; bands of the whole run %+v, want the report's %+v", s.Len(), got, want)
	}
	// From just after the second snapshot: the second (held) and the last two.
	ts := want[0].TNS
	w := s.Bands(ts[1]+1, storage.MaxTime, 1)
	if len(w) != 3 || w[0].Site != "train.py:52" || w[0].Func != "keep" || !w[0].Growth || w[1].Band != sites.BandOther || w[2].Band != sites.BandUntracked ||
		!slices.Equal(w[0].TNS, ts[1:]) {
		t.Fatalf("window bands %+v", w)
	}
	for k := range w[0].TNS {
		var sum, wantSum int64
		for _, b := range w {
			sum += b.Bytes[k]
		}
		for _, b := range want {
			wantSum += b.Bytes[k+1]
		}
		if sum != wantSum || w[0].Bytes[k] != want[0].Bytes[k+1] {
			t.Errorf("snapshot %d: bands add up to %d, want %d; the leak %d, want %d", k+1, sum, wantSum, w[0].Bytes[k], want[0].Bytes[k+1])
		}
	}
	if b := s.Bands(storage.MinTime, ts[0], 3); b != nil {
		t.Errorf("bands before the first snapshot: %+v", b)
	}
}

// TestSiteRowsTakenFromTheBudgetAtTheBound reads a GPU's site snapshots
// with a budget of exactly what keeping them costs, one byte less, and
// nothing beyond the marks: at the bound every snapshot is kept; one byte
// short the last is left out whole and its rows counted; with nothing left
// for rows every row is counted. Analyze says so in one note and in
// site_rows_left_out. The rows of each snapshot are counted from the
// store, not from the reader.
func TestSiteRowsTakenFromTheBudgetAtTheBound(t *testing.T) {
	g := &analysistest.Gen{Rand: rand.New(rand.NewPCG(15, 16))}
	g.Train("leak", analysistest.Train{GPUs: 1, Epochs: 4, StepsPerEpoch: 20, StepNS: 100e6, Leak: []int64{4 * MiB}, Sites: true})
	db, run := importRun(t, g.String())
	series, err := db.Series(run)
	if err != nil {
		t.Fatal(err)
	}
	perT := map[int64]int{}
	var total int
	var last int64
	for _, s := range series {
		if s.Kind != storage.SeriesSites || s.GPU != 0 {
			continue
		}
		it := db.SiteSamples(run, 0, s.PID, run.StartNS, run.EndNS+1)
		for it.Next() {
			r := it.At()
			perT[r.T]++
			total++
			last = max(last, r.T)
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if len(perT) != 4 {
		t.Fatalf("%d snapshots in the store, want 4", len(perT))
	}

	big := storage.NewDecodeBudget(storage.DefaultDecodeBudget)
	in, err := SitesInput(db, run, 0, big)
	if err != nil {
		t.Fatal(err)
	}
	marks := big.Used()
	if _, err := sites.ReadSites(db, run, 0, in); err != nil {
		t.Fatal(err)
	}
	rows := big.Used() - marks
	if min := int64(total) * int64(unsafe.Sizeof(storage.SiteSample{})); rows < min {
		t.Fatalf("%d rows took %d bytes, less than their structs' %d", total, rows, min)
	}
	whole := storage.NewDecodeBudget(storage.DefaultDecodeBudget)
	if _, err := Analyze(db, run, Options{Budget: whole}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		short      int64 // bytes below what keeping every row costs
		snaps, out int
	}{
		{"at the bound", 0, 4, 0},
		{"one byte short", 1, 3, perT[last]},
		{"nothing for rows", rows, 0, total},
	} {
		t.Run(c.name, func(t *testing.T) {
			in, err := SitesInput(db, run, 0, storage.NewDecodeBudget(marks+rows-c.short))
			if err != nil {
				t.Fatal(err)
			}
			s, err := sites.ReadSites(db, run, 0, in)
			if err != nil {
				t.Fatal(err)
			}
			lo := s.LeftOut()
			if s.Len() != c.snaps || lo.Rows != c.out || (c.out > 0) != errors.Is(lo.Err, storage.ErrDecodeBudget) {
				t.Errorf("ReadSites: %d snapshots, %d rows left out (%v); want %d, %d", s.Len(), lo.Rows, lo.Err, c.snaps, c.out)
			}

			rep, err := Analyze(db, run, Options{Budget: storage.NewDecodeBudget(whole.Used() - c.short)})
			if err != nil {
				t.Fatal(err)
			}
			gr := rep.GPUs[0]
			snaps := 0
			if gr.Where != nil {
				snaps = gr.Where.Snapshots
			}
			var notes []string
			for _, n := range rep.Notes {
				if strings.Contains(n, "site rows left out") {
					notes = append(notes, n)
				}
			}
			wantNotes := 0
			if c.out > 0 {
				wantNotes = 1
			}
			if snaps != c.snaps || gr.SiteRowsLeftOut != c.out || len(notes) != wantNotes {
				t.Errorf("Analyze: %d snapshots, %d rows left out, notes %q; want %d, %d and %d note", snaps, gr.SiteRowsLeftOut, notes, c.snaps, c.out, wantNotes)
			}
		})
	}
}
