package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/merge"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// simNode describes one node of a simulated multi-node job.
type simNode struct {
	host, job string
	rankBase  int
	scenario  string
	// clock is how far the node's clock is ahead of true time; lateStart
	// how long after the job's start its recorder starts (true time).
	clock, lateStart time.Duration
}

// jobStart is the simulated job's start, in true time.
var jobStart = time.Unix(1_750_000_000, 0)

// recordSimNode records one node of a simulated data-parallel job of 8
// GPUs per node into its own database, the way memrec record does on
// that node, but on a fake clock: length of recording at 10 ms.
func recordSimNode(t testing.TB, path string, n simNode, length time.Duration) {
	t.Helper()
	// The job starts at the same true time everywhere; each node sees it
	// on its own clock.
	sim, err := recorder.NewSim(recorder.SimConfig{GPUs: 8, Scenario: n.scenario, RankBase: n.rankBase}, jobStart.Add(n.clock))
	if err != nil {
		t.Fatal(err)
	}
	gpus, _ := sim.GPUs()
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	start := jobStart.Add(n.clock + n.lateStart)
	app, err := db.NewAppender(storage.Run{Name: "node-" + n.host, Host: n.host, Job: n.job, GPUs: gpus, IntervalNS: int64(10 * time.Millisecond), StartNS: start.UnixNano()},
		storage.AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	clock := recorder.NewFakeClock(start)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &recorder.Sampler{Source: sim, GPUs: []int{0, 1, 2, 3, 4, 5, 6, 7}, Interval: 10 * time.Millisecond, Procs: true, ProcsEvery: time.Second, Clock: clock,
		Sink: &stopAt{Sink: app, end: start.Add(length).UnixNano(), stop: cancel, rng: rand.New(rand.NewPCG(uint64(n.rankBase), 1))}}
	s.Run(ctx)
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
}

// stopAt cancels the recording at its first device sample at or after end.
// It also moves each step mark by up to ±3 ms, and every 50th by 250 ms,
// as a probe's marks arrive late by a varying amount.
type stopAt struct {
	recorder.Sink
	end   int64
	stop  func()
	marks int
	rng   *rand.Rand
}

func (s *stopAt) AppendMark(m storage.Mark) error {
	if m.Kind == wire.MarkStep {
		s.marks++
		m.T += s.rng.Int64N(int64(6*time.Millisecond)) - int64(3*time.Millisecond)
		if s.marks%50 == 0 {
			m.T += int64(250 * time.Millisecond)
		}
	}
	return s.Sink.AppendMark(m)
}

func (s *stopAt) AppendDevice(d storage.DeviceSample) error {
	if d.T >= s.end {
		s.stop()
	}
	return s.Sink.AppendDevice(d)
}

// fourNodes is a job of four nodes whose clocks are off by up to 2 s and
// whose recorders start up to a second apart; node2's last GPU leaks.
func fourNodes() []simNode {
	return []simNode{
		{host: "node0", job: "j42", rankBase: 0, scenario: "none", clock: 0, lateStart: 300 * time.Millisecond},
		{host: "node1", job: "j42", rankBase: 8, scenario: "none", clock: 1500 * time.Millisecond, lateStart: 0},
		{host: "node2", job: "j42", rankBase: 16, scenario: "leak", clock: -2 * time.Second, lateStart: 900 * time.Millisecond},
		{host: "node3", job: "j42", rankBase: 24, scenario: "none", clock: 700*time.Millisecond + 123*time.Microsecond, lateStart: 450 * time.Millisecond},
	}
}

func TestMergeFourNodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nodes := fourNodes()
	var files []string
	var sum storage.Counts
	siteT := jobStart.Add(nodes[2].clock + 20*time.Second).UnixNano() // on node2's clock
	for _, n := range nodes {
		f := filepath.Join(dir, n.host+".db")
		recordSimNode(t, f, n, 40*time.Second)
		files = append(files, f)
		db, err := storage.Open(f, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r, err := db.Run("node-" + n.host)
		if err == nil && n.host == "node2" { // an allocation-site snapshot of the leaking rank
			r, err = db.AddSites(r.Name, [][]storage.SiteSample{{{T: siteT, GPU: 7, PID: 20007, Rank: 23, Epoch: storage.None,
				Reason: wire.SitesSnapshot, File: "train.py", Line: 52, LiveBytes: 1 << 20, LiveBlocks: 1}}})
		}
		if err != nil {
			t.Fatal(err)
		}
		sum.Samples += r.Counts.Samples
		sum.ProcSamples += r.Counts.ProcSamples
		sum.TorchSamples += r.Counts.TorchSamples
		sum.Marks += r.Counts.Marks
		sum.Sites += r.Counts.Sites
		sum.Budgets += r.Counts.Budgets
		db.Close()
	}
	out := filepath.Join(dir, "job.db")
	stdout, errs, code := run(t, out, "", append([]string{"merge", out}, files...)...)
	if code != 0 {
		t.Fatalf("merge: %d %s", code, errs)
	}
	t.Logf("%s", stdout)

	db, err := storage.Open(out, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := db.Run("j42")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	if r.Counts != sum {
		t.Errorf("merged counts %+v, the nodes' together %+v", r.Counts, sum)
	}
	// node2's site snapshot is on its GPU 7, now GPU 23, on node0's clock.
	it := db.SiteSamples(r, 23, 20007, storage.MinTime, storage.MaxTime)
	if !it.Next() || it.At().File != "train.py" || it.At().T != siteT-r.Hosts[2].OffsetNS {
		t.Errorf("site snapshot after the merge: %v %+v", it.Err(), it.At())
	}
	db.Close()
	if len(r.GPUs) != 32 || len(r.Hosts) != 4 || r.Job != "j42" {
		t.Fatalf("merged run: %d GPUs, %d hosts, job %q", len(r.GPUs), len(r.Hosts), r.Job)
	}
	for k, h := range r.Hosts {
		// The offset found is the node's clock less the reference node's.
		want := nodes[k].clock - nodes[0].clock
		if d := time.Duration(h.OffsetNS) - want; d > 10*time.Millisecond || d < -10*time.Millisecond {
			t.Errorf("%s: offset %v, want %v within 10 ms", h.Name, time.Duration(h.OffsetNS), want)
		}
		if h.Name != nodes[k].host || (k > 0 && h.CommonSteps < 300) {
			t.Errorf("host %d: %+v", k, h)
		}
	}
	for i, g := range r.GPUs {
		if g.Index != i || g.Host != nodes[i/8].host || g.HostGPU != i%8 {
			t.Errorf("GPU %d: %+v", i, g)
		}
	}
	// Each offset (checked above against the true clocks) is printed.
	for _, h := range r.Hosts[1:] {
		if want := fmt.Sprintf("%+.6f s", float64(h.OffsetNS)/1e9); !strings.Contains(stdout, want) {
			t.Errorf("merge output lacks %s's offset %s:\n%s", h.Name, want, stdout)
		}
	}

	// Analysed as one 32-GPU run: the leaking GPU is node2's last, named
	// with its host, and no other GPU leaks.
	stdout, errs, code = run(t, out, "", "analyze", "j42", "--full")
	if code != 0 {
		t.Fatalf("analyze: %s", errs)
	}
	if !strings.Contains(stdout, "32 GPUs on 4 hosts") {
		t.Errorf("analyze does not see 32 GPUs on 4 hosts:\n%s", stdout)
	}
	leaking := 0
	for _, l := range strings.Split(stdout, "\n") {
		if strings.HasPrefix(l, "Leak:") && strings.Contains(l, " grows ") {
			leaking++
			if !strings.Contains(l, "node2/gpu7") {
				t.Errorf("leak named on the wrong GPU: %s", l)
			}
		}
	}
	if !strings.Contains(stdout, "Worst GPU: node2/gpu7: leaks") {
		t.Errorf("the worst GPU is not node2/gpu7:\n%s", stdout)
	}
	if leaking != 1 {
		t.Errorf("%d leak lines, want 1 (node2/gpu7):\n%s", leaking, stdout)
	}

	// compare names each run's worst GPU with its host.
	if _, errs, code := run(t, out, "", append([]string{"merge", "--name", "j42-again", out}, files...)...); code != 0 {
		t.Fatal(errs)
	}
	stdout, errs, code = run(t, out, "", "compare", "j42", "j42-again")
	if code != 0 || strings.Count(stdout, "32 GPUs on 4 hosts") != 2 || strings.Count(stdout, "worst GPU node2/gpu7: leaks") != 2 {
		t.Errorf("compare: %d %s\n%s", code, errs, stdout)
	}

	// The report draws the 32 GPUs as one heat map and gives a section of
	// its own only to the leaking GPU.
	rdir := filepath.Join(dir, "report")
	if d := os.Getenv("MEMREC_KEEP_REPORT"); d != "" {
		rdir = d
	}
	if _, errs, code := run(t, out, "", "report", "j42", "-o", rdir); code != 0 {
		t.Fatalf("report: %s", errs)
	}
	page, err := os.ReadFile(filepath.Join(rdir, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"heatmap.png", "peaks.png", "gpu23-timeline.png"} {
		if _, err := os.Stat(filepath.Join(rdir, f)); err != nil {
			t.Errorf("report lacks %s: %v", f, err)
		}
	}
	if _, err := os.Stat(filepath.Join(rdir, "gpu0-timeline.png")); err == nil {
		t.Error("a GPU without findings got charts of its own")
	}
	if !strings.Contains(string(page), "<h2>node2/gpu7") || strings.Contains(string(page), "<h2>node0/gpu3") || !strings.Contains(string(page), "The other 31 GPUs") {
		t.Error("the page's GPU sections are not the leaking GPU's alone")
	}
}

func TestMergeRefusesAndWritesNothing(t *testing.T) {
	dir := t.TempDir()
	rec := func(n simNode) string {
		f := filepath.Join(dir, fmt.Sprintf("%s-%s-%d.db", n.host, n.job, n.rankBase))
		recordSimNode(t, f, n, 3*time.Second)
		return f
	}
	a := rec(simNode{host: "a", job: "j1", rankBase: 0, scenario: "none"})
	b := rec(simNode{host: "b", job: "j1", rankBase: 8, scenario: "none"})
	sameHost := rec(simNode{host: "a", job: "j1", rankBase: 16, scenario: "none"})
	otherJob := rec(simNode{host: "c", job: "j2", rankBase: 16, scenario: "none"})
	overlap := rec(simNode{host: "d", job: "j1", rankBase: 8, scenario: "none"})
	out := filepath.Join(dir, "out.db")
	for _, c := range []struct {
		name   string
		inputs []string
		want   error
		says   []string
	}{
		{"same host twice", []string{a, b, sameHost}, merge.ErrSameHost, []string{a, sameHost, `"a"`}},
		{"different jobs", []string{a, b, otherJob}, merge.ErrOtherJob, []string{`"j1"`, `"j2"`, otherJob}},
		{"overlapping GPUs", []string{a, b, overlap}, merge.ErrGPUOverlap, []string{b, overlap, "GPU-5e000000-0000-0000-0000-000000000008"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, errs, code := run(t, out, "", append([]string{"merge", out}, c.inputs...)...)
			if code != 1 || !strings.Contains(errs, c.want.Error()) || !strings.Contains(errs, "nothing was written") {
				t.Fatalf("exit %d, %q: want %q", code, errs, c.want)
			}
			for _, s := range c.says {
				if !strings.Contains(errs, s) {
					t.Errorf("error %q does not name %s", errs, s)
				}
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("a refused merge left a new file %s: %v", out, err)
			}
		})
	}
	// The library says the same with sentinels.
	src, _ := storage.Open(a, storage.Options{ReadOnly: true})
	defer src.Close()
	ra, _ := src.Run("node-a")
	dst, _ := storage.Open(filepath.Join(dir, "lib.db"), storage.Options{})
	defer dst.Close()
	if _, err := merge.Runs(context.Background(), dst, []merge.Input{{File: "x", DB: src, Run: ra}, {File: "y", DB: src, Run: ra}}, merge.Options{}); !errors.Is(err, merge.ErrSameHost) {
		t.Errorf("a run merged with itself: %v", err)
	}
	if _, errs, code := run(t, out, "", "merge", out, a); code != 1 || !strings.Contains(errs, "requires at least 3 arg") {
		t.Errorf("one input: %d %s", code, errs)
	}
	if _, errs, code := run(t, out, "", "merge", a, a, b); code != 1 || !strings.Contains(errs, "both the output and an input") {
		t.Errorf("output among the inputs: %d %s", code, errs)
	}
}

func TestJobID(t *testing.T) {
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, c := range []struct {
		flag    string
		env     func(string) string
		command []string
		want    string
	}{
		{"mine", env("SLURM_JOB_ID", "7"), nil, "mine"},
		{"", env("TORCHELASTIC_RUN_ID", "r1", "SLURM_JOB_ID", "7"), nil, "r1"},
		{"", env("TORCHELASTIC_RUN_ID", "none", "SLURM_JOB_ID", "7"), nil, "7"},
		{"", env(), []string{"torchrun", "--nnodes", "2", "--rdzv-id", "exp3", "train.py"}, "exp3"},
		{"", env(), []string{"torchrun", "--rdzv_id=exp4", "train.py"}, "exp4"},
		{"", env(), []string{"torchrun", "--rdzv-id", "none", "train.py"}, ""},
		{"", env(), []string{"python", "train.py"}, ""},
	} {
		if got := jobID(c.flag, c.env, c.command); got != c.want {
			t.Errorf("jobID(%q, %v) = %q, want %q", c.flag, c.command, got, c.want)
		}
	}
}

// tenMinuteNodes records the four nodes of fourNodes for 10 minutes each at
// 10 ms (8 GPUs, process lists, allocator samples and marks) into dir.
func tenMinuteNodes(b *testing.B, dir string) []string {
	var files []string
	for _, n := range fourNodes() {
		f := filepath.Join(dir, n.host+".db")
		recordSimNode(b, f, n, 10*time.Minute)
		files = append(files, f)
	}
	return files
}

// BenchmarkMergeFourNodes is memrec merge of four 10-minute 8-GPU runs,
// from opening the files to the committed merged run.
func BenchmarkMergeFourNodes(b *testing.B) {
	dir := b.TempDir()
	files := tenMinuteNodes(b, dir)
	i := 0
	cpu := cpuClock()
	for b.Loop() {
		out := filepath.Join(dir, fmt.Sprintf("job%d.db", i))
		i++
		if _, errs, code := run(b, out, "", append([]string{"merge", out}, files...)...); code != 0 {
			b.Fatal(errs)
		}
	}
	b.ReportMetric((cpuClock()-cpu).Seconds()/float64(b.N), "cpu-s/op")
}

// cpuClock is the CPU time this process has used: on a shared machine the
// wall time of a benchmark says as much about the other processes.
func cpuClock() time.Duration {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkAnalyzeMerged is memrec analyze of the merged 32-GPU run of
// four 10-minute nodes.
func BenchmarkAnalyzeMerged(b *testing.B) {
	dir := b.TempDir()
	files := tenMinuteNodes(b, dir)
	out := filepath.Join(dir, "job.db")
	if _, errs, code := run(b, out, "", append([]string{"merge", out}, files...)...); code != 0 {
		b.Fatal(errs)
	}
	cpu := cpuClock()
	for b.Loop() {
		if _, errs, code := run(b, out, "", "analyze", "j42"); code != 0 {
			b.Fatal(errs)
		}
	}
	b.ReportMetric((cpuClock()-cpu).Seconds()/float64(b.N), "cpu-s/op")
}

// TestImportMerge imports two nodes' exports as one run: the same run as
// memrec merge makes of their databases.
func TestImportMerge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	nodes := fourNodes()[1:3]
	var dbs, exports []string
	for _, n := range nodes {
		f := filepath.Join(dir, n.host+".db")
		recordSimNode(t, f, n, 5*time.Second)
		x := filepath.Join(dir, n.host+".jsonl")
		if _, errs, code := run(t, f, "", "export", "node-"+n.host, "-o", x); code != 0 {
			t.Fatal(errs)
		}
		dbs, exports = append(dbs, f), append(exports, x)
	}
	merged := filepath.Join(dir, "merged.db")
	if _, errs, code := run(t, merged, "", append([]string{"merge", merged}, dbs...)...); code != 0 {
		t.Fatal(errs)
	}
	imported := filepath.Join(dir, "imported.db")
	out, errs, code := run(t, imported, "", append([]string{"import", "--merge"}, exports...)...)
	if code != 0 || !strings.Contains(out, `merged 2 runs of job "j42"`) {
		t.Fatalf("import --merge: %d %s %s", code, out, errs)
	}
	var runs [2]storage.Run
	for i, f := range []string{merged, imported} {
		db, err := storage.Open(f, storage.Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		if runs[i], err = db.Run("j42"); err != nil {
			t.Fatal(err)
		}
		db.Close()
	}
	a, b := runs[0], runs[1]
	if a.Counts != b.Counts || len(a.GPUs) != 16 || fmt.Sprint(a.GPUs) != fmt.Sprint(b.GPUs) || fmt.Sprint(a.Hosts) != fmt.Sprint(b.Hosts) || a.StartNS != b.StartNS {
		t.Errorf("import --merge made\n%+v\nmerge made\n%+v", b, a)
	}

	// A node of another job: refused, nothing imported.
	other := simNode{host: "node9", job: "j7", rankBase: 72, scenario: "none"}
	f := filepath.Join(dir, "other.db")
	recordSimNode(t, f, other, 3*time.Second)
	x := filepath.Join(dir, "other.jsonl")
	if _, errs, code := run(t, f, "", "export", "node-node9", "-o", x); code != 0 {
		t.Fatal(errs)
	}
	fresh := filepath.Join(dir, "fresh.db")
	if _, errs, code := run(t, fresh, "", "import", "--merge", exports[0], x); code != 1 || !strings.Contains(errs, merge.ErrOtherJob.Error()) || !strings.Contains(errs, "nothing was written") {
		t.Errorf("a node of another job: %d %s", code, errs)
	}
	if _, err := os.Stat(fresh); !os.IsNotExist(err) {
		t.Errorf("a refused import --merge left a new file: %v", err)
	}
}

// TestRecordJobAndHost: record stores the job and host it is given, and
// takes the job from the launcher's environment.
func TestRecordJobAndHost(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "m.db")
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "1", "--duration", "1s", "--name", "a", "--job", "j9", "--host", "nodeA")
	if code != 0 || !strings.Contains(errs, "job         j9, node nodeA") {
		t.Fatalf("record: %d %s", code, errs)
	}
	t.Setenv("SLURM_JOB_ID", "4242")
	if _, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "1", "--duration", "1s", "--name", "b"); code != 0 {
		t.Fatal(errs)
	}
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	a, _ := d.Run("a")
	b, _ := d.Run("b")
	host, _ := os.Hostname()
	if a.Job != "j9" || a.Host != "nodeA" || b.Job != "4242" || b.Host != host {
		t.Errorf("runs: a job %q host %q, b job %q host %q", a.Job, a.Host, b.Job, b.Host)
	}
}

// TestRecordFakeClock: --sim-clock fake records --duration of simulated
// time, tick for tick, without waiting for it.
func TestRecordFakeClock(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	t0 := time.Now()
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-clock", "fake", "--sim-gpus", "2", "--duration", "5m", "--name", "f")
	if code != 0 {
		t.Fatal(errs)
	}
	if took := time.Since(t0); took > time.Minute {
		t.Errorf("5 simulated minutes took %v", took)
	}
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r, _ := d.Run("f")
	// 5 minutes at 10 ms: 30 000 ticks of 2 GPUs, the last one 10 ms before the end.
	if r.Counts.Samples != 2*30000 || r.Recorder.Ticks != 30000 || r.Recorder.MissedTicks != 0 {
		t.Errorf("%d samples, %d ticks, %d missed", r.Counts.Samples, r.Recorder.Ticks, r.Recorder.MissedTicks)
	}
	if _, errs, code := run(t, db, "", "record", "--sim-clock", "fake", "--duration", "1s"); code != 1 || !strings.Contains(errs, "--sim-clock fake needs --source sim") {
		t.Errorf("fake clock with NVML: %d %s", code, errs)
	}
}

// rankLog is one line of bench/validation/ddp_probe.py's log: PyTorch's own readings
// of a rank at the end of a step.
type rankLog struct {
	Rank, Step                int
	Allocated, Reserved, Peak int64
}

func readRankLog(t *testing.T, path string) []rankLog {
	t.Helper()
	var out []rankLog
	dec := json.NewDecoder(bytes.NewReader(fixtures.Gunzip(t, path)))
	for {
		var m map[string]int64
		if err := dec.Decode(&m); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if _, ok := m["step"]; !ok {
			continue // the header
		}
		out = append(out, rankLog{int(m["rank"]), int(m["step"]), m["allocated"], m["reserved"], m["peak"]})
	}
	return out
}

// TestH200MultiNodeRun checks the merged run of bench/validation/h200_multinode.sh (two
// single-GPU nodes under torchrun --nnodes 2 on the H200 host, each recorded
// by its own memrec, merged) against each rank's own torch.cuda readings,
// logged by the training script at every step: memrec's allocator sample at
// each step mark of the rank holds exactly those readings, analyze's step
// peak of the rank's GPU is the largest the rank logged, and the leak
// planted on rank 1 (8 MiB a step) is named on node1's GPU.
func TestH200MultiNodeRun(t *testing.T) {
	dir := filepath.Join("testdata", "h200-multinode")
	db := filepath.Join(t.TempDir(), "m.db")
	if _, errs, code := run(t, db, "", "import", filepath.Join(dir, "merged.jsonl.gz")); code != 0 {
		t.Fatal(errs)
	}
	d, err := storage.Open(db, storage.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.Run("mnjob")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Hosts) != 2 || len(r.GPUs) != 2 || r.GPUs[1].Host != "node1" || r.GPUs[1].HostGPU != 1 {
		t.Fatalf("merged run: hosts %+v, GPUs %+v", r.Hosts, r.GPUs)
	}
	stepT := map[[2]int]int64{} // rank, step -> time of its mark
	marks := d.Marks(r, storage.MinTime, storage.MaxTime)
	for marks.Next() {
		if m := marks.At(); m.Kind == wire.MarkStep {
			stepT[[2]int{m.Rank, m.Step}] = m.T
		}
	}
	torch := map[[2]int64]storage.TorchSample{} // rank, time -> sample
	gpuOfRank := map[int]int{}
	series, _ := d.Series(r)
	for _, s := range series {
		if s.Kind != "torch" {
			continue
		}
		it := d.TorchSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime)
		for it.Next() {
			v := it.At()
			torch[[2]int64{int64(v.Rank), v.T}] = v
			gpuOfRank[v.Rank] = v.GPU
		}
	}
	d.Close()

	out, errs, code := run(t, db, "", "analyze", "mnjob", "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var rep analysis.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	for rank := range 2 {
		logged := readRankLog(t, filepath.Join(dir, fmt.Sprintf("rank%d.jsonl.gz", rank)))
		var peak int64
		for _, l := range logged {
			peak = max(peak, l.Peak)
			tm, ok := stepT[[2]int{rank, l.Step}]
			s, found := torch[[2]int64{int64(rank), tm}]
			if !ok || !found || s.Allocated != l.Allocated || s.Reserved != l.Reserved || s.PeakAllocated != l.Peak {
				t.Errorf("rank %d step %d: memrec %+v (found %v), torch %+v", rank, l.Step, s, ok && found, l)
			}
		}
		g := rep.GPUs[gpuOfRank[rank]]
		if g.PeakStepBytes == nil || *g.PeakStepBytes != peak || len(logged) != 240 {
			t.Errorf("rank %d on %s: step peak %v, the rank's largest %d (%d steps)", rank, g.Label(), g.PeakStepBytes, peak, len(logged))
		}
	}
	if rep.Worst == nil || rep.Worst.Label != "node1/gpu1" || rep.GPUs[1].Leak.Verdict != growth.VerdictLeak || rep.GPUs[0].Leak.Verdict == growth.VerdictLeak {
		t.Errorf("worst %+v, verdicts %s %s", rep.Worst, rep.GPUs[0].Leak.Verdict, rep.GPUs[1].Leak.Verdict)
	}
	// 8 MiB kept per step on rank 1.
	if s := rep.GPUs[1].Leak.SlopeBytesPerStep; s == nil || *s != 8<<20 {
		t.Errorf("rank 1's leak slope %v, want 8 MiB per step", s)
	}
	// Each node's total by the same growth rule: node1's grows by its
	// GPU's 8 MiB a step, node0's stays flat.
	for i, want := range []string{"flat", "grows"} {
		if len(rep.Hosts) != 2 || rep.Hosts[i].Growth == nil || rep.Hosts[i].Growth.Trend != want {
			t.Fatalf("hosts %+v: want node%d's total %s", rep.Hosts, i, want)
		}
	}
	if s := rep.Hosts[1].Growth.SlopeBytesPerStep; s == nil || *s != 8<<20 {
		t.Errorf("node1's total grows %v B a step, want 8 MiB", s)
	}
}
