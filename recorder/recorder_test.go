package recorder

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock/server"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// memSink keeps everything in memory.
type memSink struct {
	mu     sync.Mutex
	dev    []storage.DeviceSample
	procs  []storage.ProcSample
	torch  []storage.TorchSample
	marks  []storage.Mark
	sites  [][]storage.SiteSample
	budget []storage.BudgetSample
	refuse bool
}

func (s *memSink) AppendBudget(b storage.BudgetSample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.budget = append(s.budget, b)
	return nil
}

func (s *memSink) AppendDevice(d storage.DeviceSample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refuse {
		return errors.New("refused")
	}
	s.dev = append(s.dev, d)
	return nil
}
func (s *memSink) AppendProc(p storage.ProcSample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.procs = append(s.procs, p)
	return nil
}
func (s *memSink) AppendTorch(t storage.TorchSample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.torch = append(s.torch, t)
	return nil
}
func (s *memSink) AppendMark(m storage.Mark) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.marks = append(s.marks, m)
	return nil
}
func (s *memSink) AppendSites(rows []storage.SiteSample) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sites = append(s.sites, rows)
	return nil
}

// newDGX returns an 8-GPU mock server whose devices answer the memory and
// process queries (dgxa100 leaves them unimplemented).
func newDGX(t *testing.T, procs func(gpu int) []nvml.ProcessInfo) *server.Server {
	t.Helper()
	s := dgxa100.New()
	for i, d := range s.Devices {
		dev := d.(*server.Device)
		i := i
		total := uint64(40 << 30)
		dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{Total: total, Used: uint64(i+1) << 30, Reserved: 512 << 20, Free: total - uint64(i+1)<<30}, nvml.SUCCESS
		}
		dev.GetMemoryInfoFunc = func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: total, Used: uint64(i+1) << 30, Free: total - uint64(i+1)<<30}, nvml.SUCCESS
		}
		dev.GetComputeRunningProcessesFunc = func() ([]nvml.ProcessInfo, nvml.Return) {
			if procs == nil {
				return nil, nvml.SUCCESS
			}
			return procs(i), nvml.SUCCESS
		}
	}
	return s
}

func TestNVMLReadsEveryGPU(t *testing.T) {
	srv := newDGX(t, func(gpu int) []nvml.ProcessInfo {
		return []nvml.ProcessInfo{
			{Pid: uint32(1000 + gpu), UsedGpuMemory: 700 << 20},
			{Pid: 0, UsedGpuMemory: 5},           // garbage: pid 0
			{Pid: 77, UsedGpuMemory: ^uint64(0)}, // not available
			{Pid: 78, UsedGpuMemory: 1 << 50},    // more than the GPU has
		}
	})
	n, err := NewNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	gpus, _ := n.GPUs()
	if len(gpus) != 8 || gpus[3].UUID == "" || !strings.Contains(gpus[3].Name, "A100") || gpus[3].TotalBytes == 0 {
		t.Fatalf("gpus: %+v", gpus)
	}
	if n.Driver() != "550.54.15" {
		t.Errorf("driver %q", n.Driver())
	}
	var r Reading
	if err := n.Read(3, time.Now(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Used != 4<<30 || r.Reserved != 512<<20 || r.Invalid != 0 {
		t.Fatalf("reading %+v", r)
	}
	if err := n.ReadProcs(3, time.Now(), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Procs) != 1 || r.Procs[0].PID != 1003 || r.Invalid != 3 {
		t.Fatalf("reading %+v", r)
	}
}

func TestNVMLFallsBackToMemoryInfoV1(t *testing.T) {
	srv := newDGX(t, nil)
	for _, d := range srv.Devices {
		d.(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			return nvml.Memory_v2{}, nvml.ERROR_NOT_SUPPORTED
		}
	}
	n, err := NewNVML(srv)
	if err != nil {
		t.Fatal(err)
	}
	var r Reading
	if err := n.Read(0, time.Now(), &r); err != nil || r.Used != 1<<30 || r.Reserved != 0 {
		t.Fatalf("%+v %v", r, err)
	}
}

func TestNVMLWithoutDriver(t *testing.T) {
	lib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	_, err := NewNVML(lib)
	if !errors.Is(err, ErrNoDriver) {
		t.Fatal(err)
	}
	var ret nvml.Return
	if !errors.As(err, &ret) || ret != nvml.ERROR_LIBRARY_NOT_FOUND {
		t.Fatalf("NVML return code lost: %v", err)
	}
}

func TestNVMLNonsenseDeviceReadingDropped(t *testing.T) {
	srv := newDGX(t, nil)
	srv.Devices[0].(*server.Device).GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
		return nvml.Memory_v2{Total: 40 << 30, Used: 1 << 62}, nvml.SUCCESS
	}
	n, _ := NewNVML(srv)
	sink := &memSink{}
	clock := NewFakeClock(time.Unix(1000, 0))
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sampler{Source: n, GPUs: []int{0, 1}, Interval: time.Millisecond, Clock: clock, Sink: sink}
	clock.Hook = func(now time.Time) time.Duration {
		if now.Sub(time.Unix(1000, 0)) >= 10*time.Millisecond {
			cancel()
		}
		return 0
	}
	st := s.Run(ctx)
	if st.Invalid != st.Ticks || int64(len(sink.dev)) != st.Ticks {
		t.Fatalf("stats %+v, %d samples", st, len(sink.dev))
	}
	for _, d := range sink.dev {
		if d.GPU != 1 {
			t.Fatal("nonsense reading stored")
		}
	}
}

// TestSamplerAbsoluteSchedule drives the sampler with a fake clock: ticks
// land on t0 + k·interval, and slow ticks make later ones missed, not shifted.
func TestSamplerAbsoluteSchedule(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	clock := NewFakeClock(t0)
	srv := newDGX(t, nil)
	n, _ := NewNVML(srv)
	sink := &memSink{}
	ctx, cancel := context.WithCancel(context.Background())
	const interval = 10 * time.Millisecond
	calls := 0
	// Every Now after a sleep is the tick's timestamp; make tick 5 take
	// 35 ms (it ends 3.5 intervals later) and stop after 1 s.
	clock.Hook = func(now time.Time) time.Duration {
		calls++
		if now.Sub(t0) >= time.Second {
			cancel()
		}
		if now.Equal(t0.Add(5 * interval)) {
			return 35 * time.Millisecond
		}
		return 0
	}
	s := &Sampler{Source: n, GPUs: []int{0, 2}, Interval: interval, Clock: clock, Sink: sink}
	st := s.Run(ctx)
	// Tick 5's Now returns t0+85ms: 3.5 intervals late, so ticks 5, 6 and
	// 7 are missed and tick 8 (due t0+80ms) is taken at 85 ms.
	if st.Missed != 3 {
		t.Fatalf("missed %d, want 3 (%+v)", st.Missed, st)
	}
	var times []time.Duration
	for _, d := range sink.dev {
		if d.GPU == 0 {
			times = append(times, time.Unix(0, d.T).Sub(t0))
		}
	}
	for k, tt := range times[:5] {
		if tt != time.Duration(k)*interval {
			t.Fatalf("tick %d at %v, want %v", k, tt, time.Duration(k)*interval)
		}
	}
	if times[5] != 85*time.Millisecond || times[6] != 90*time.Millisecond {
		t.Fatalf("after the slow tick: %v", times[5:8])
	}
	if st.Ticks+st.Missed != 101 || st.Samples != 2*st.Ticks {
		t.Fatalf("stats %+v", st)
	}
	// Both GPUs of a tick share one timestamp.
	if sink.dev[0].T != sink.dev[1].T || sink.dev[0].GPU != 0 || sink.dev[1].GPU != 2 {
		t.Fatal("GPUs of one tick have different times")
	}
}

func TestLateHistogram(t *testing.T) {
	var h lateHist
	for i := 0; i < 990; i++ {
		h.add(40 * time.Microsecond)
	}
	for i := 0; i < 10; i++ {
		h.add(900 * time.Microsecond)
	}
	if p50 := h.quantile(0.5); p50 < 40*time.Microsecond || p50 > 48*time.Microsecond {
		t.Errorf("p50 %v", p50)
	}
	if p99 := h.quantile(0.995); p99 < 900*time.Microsecond || p99 > 1100*time.Microsecond {
		t.Errorf("p99.5 %v", p99)
	}
	if h.max != 900*time.Microsecond {
		t.Error(h.max)
	}
}

func TestListener(t *testing.T) {
	sink := &memSink{}
	l, err := Listen(t.TempDir(), sink, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Dir(l.Path))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory mode %v %v", fi.Mode(), err)
	}
	var drops []string
	var dmu sync.Mutex
	l.onDrop = func(err error) { dmu.Lock(); drops = append(drops, err.Error()); dmu.Unlock() }

	// Eight ranks at once, each with a few good lines and some bad ones.
	var wg sync.WaitGroup
	for rank := 0; rank < 8; rank++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", l.Path)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for step := 0; step < 50; step++ {
				m := storage.NewMark(int64(1e18)+int64(step), wire.MarkStep)
				m.Step, m.Rank = step, rank
				c.Write(wire.AppendMark(nil, m))
				ts := storage.TorchSample{T: int64(1e18) + int64(step), GPU: rank, PID: 100 + rank, Rank: rank, Allocated: 5, Reserved: 7}
				c.Write(wire.AppendTorch(nil, ts))
			}
			site := storage.SiteSample{T: int64(1e18) + 99, GPU: rank, PID: 100 + rank, Rank: rank, Epoch: 0,
				Reason: wire.SitesEpochEnd, File: "/w/train.py", Line: 52, LiveBytes: 256000, LiveBlocks: 1}
			untracked := site
			untracked.File, untracked.Line, untracked.LiveBytes, untracked.LiveBlocks = wire.SiteUntracked, 0, 0, 0
			c.Write(wire.AppendSites(nil, []storage.SiteSample{untracked, site}))
			if rank == 0 {
				c.Write([]byte("{not json\n"))
				c.Write([]byte(`{"type":"sample","t_ns":1,"gpu":0,"used_bytes":1}` + "\n"))
				c.Write([]byte(`{"type":"bogus"}` + "\n"))
				c.Write(append(bytes.Repeat([]byte("x"), MaxLine+10), '\n'))
				c.Write([]byte(`{"type":"mark","t_ns":5,"kind":"event","text":"after the junk"}`)) // no newline
			}
		}()
	}
	wg.Wait()
	time.Sleep(50 * time.Millisecond)
	l.Close(time.Second)
	st := l.Stats()
	if st.Marks != 401 || st.Torch != 400 || st.Sites != 8 || st.Dropped != 4 {
		t.Fatalf("stats %+v, drops %q", st, drops)
	}
	for _, rows := range sink.sites {
		if len(rows) != 2 || rows[1].Label() != "train.py:52" || rows[1].LiveBytes != 256000 || rows[1].GPU != rows[1].Rank {
			t.Errorf("site snapshot %+v", rows)
		}
	}
	if _, err := os.Stat(l.Path); !os.IsNotExist(err) {
		t.Error("socket left behind")
	}
	if err := Send(l.Path, storage.NewMark(1, "event")); err == nil {
		t.Error("send to a closed recorder succeeded")
	}
}

func TestSimScenarios(t *testing.T) {
	start := time.Unix(2_000_000, 0)
	for _, sc := range []string{ScenarioNone, ScenarioLeak, ScenarioFragmentation, ScenarioOOM} {
		t.Run(sc, func(t *testing.T) {
			sim, err := NewSim(SimConfig{GPUs: 2, Scenario: sc}, start)
			if err != nil {
				t.Fatal(err)
			}
			sink := &memSink{}
			var r Reading
			var used [2][]int64
			for ms := 0; ms <= 10000; ms += 10 {
				now := start.Add(time.Duration(ms) * time.Millisecond)
				for g := 0; g < 2; g++ {
					sim.Read(g, now, &r)
					used[g] = append(used[g], r.Used)
				}
				sim.Emit(now, sink)
			}
			steps := map[int]int{}
			var ooms int
			for _, m := range sink.marks {
				if m.Kind == wire.MarkStep {
					steps[m.Rank]++
				}
				if m.Kind == wire.MarkOOM {
					ooms++
				}
			}
			growth := func(g int) int64 { return used[g][len(used[g])-1] - used[g][400] } // after warm-up (4 s)
			switch sc {
			case ScenarioNone:
				if steps[0] < 85 || steps[1] < 85 || growth(0) != 0 || growth(1) != 0 {
					t.Fatalf("steps %v, growth %d %d", steps, growth(0), growth(1))
				}
			case ScenarioLeak:
				// Past the first epoch the cache holds the peak, which
				// grows by the leak, plus the model's headroom.
				s0, _ := sim.step(1, start.Add(4*time.Second))
				s1, _ := sim.step(1, start.Add(10*time.Second))
				want := float64(sim.job.Kept(1, s1)-sim.job.Kept(1, s0)) * (1 + sim.job.Headroom)
				if growth(0) != 0 || math.Abs(float64(growth(1))-want) > float64(2*sim.job.Page) || sim.job.LeakPerStep(1) != 16<<20 {
					t.Fatalf("growth %d %d, want 0 and %.0f", growth(0), growth(1), want)
				}
			case ScenarioFragmentation:
				last := sink.torch[len(sink.torch)-1]
				if float64(last.Reserved-last.Allocated)/float64(last.Reserved) < 0.5 || growth(0) <= 0 {
					t.Fatalf("not fragmented: %+v", last)
				}
			case ScenarioOOM:
				// A step's peak of 7 GiB + s · 512 MiB of leak first
				// exceeds what the allocator can have, 24 GiB less what
				// the driver reserves (615.1 MiB), the idle GPU (3.25 MiB),
				// the 512 MiB context and NCCL's 256 MiB (22.646 GiB), at
				// s = 32: GPU 1 marks steps 0 to 31, then dies. Device used
				// never passes the total, nor reserved what the process
				// can have.
				free := float64(24<<30-simDriverReserved-sim.job.Idle-sim.job.Context-sim.job.NCCL) / (1 << 30)
				want := int(math.Floor((free-7)/0.5)) + 1
				if ooms != 1 || used[1][len(used[1])-1] != sim.job.Idle || steps[1] != want || want != 32 {
					t.Fatalf("ooms %d, last used %d, steps %d, want %d", ooms, used[1][len(used[1])-1], steps[1], want)
				}
				for g := range used {
					for i, u := range used[g] {
						if u > 24<<30 {
							t.Fatalf("GPU %d at %d ms: %d B used of 24 GiB", g, 10*i, u)
						}
					}
				}
				for _, x := range sink.torch {
					if x.Reserved > 24<<30-sim.job.Idle-sim.job.Context-sim.job.NCCL || x.Allocated > x.Reserved {
						t.Fatalf("allocator sample %+v", x)
					}
				}
			}
		})
	}
	if _, err := NewSim(SimConfig{Scenario: "nope"}, start); err == nil {
		t.Fatal("unknown scenario accepted")
	}
}

func openDB(t *testing.T) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "r.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func simSource(t *testing.T) Source {
	s, err := NewSim(SimConfig{GPUs: 2}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRecordChildExitCodeAndMarks(t *testing.T) {
	db := openDB(t)
	var log bytes.Buffer
	res, err := Record(context.Background(), Options{
		Open: openIn(db), Run: storage.Run{Name: "child"}, Source: simSource(t), Interval: 5 * time.Millisecond, Log: &log,
		Env:     []string{"WANT_GPUS=0=GPU-5e000000-0000-0000-0000-000000000000,1=GPU-5e000000-0000-0000-0000-000000000001"},
		Command: []string{"sh", "-c", `test -S "$MEMREC_SOCKET" && test "$MEMREC_RUN" = child && test "$MEMREC_GPUS" = "$WANT_GPUS" && sleep 0.3 && exit 7`},
	})
	if err != nil {
		t.Fatal(err)
	}
	// It sampled while the child ran; a loaded machine may miss ticks, but
	// those taken and missed fit the schedule of the time it sampled.
	st := res.Sampler
	if res.ExitCode != 7 || !res.Child || st.Ticks < 1 || time.Duration(st.Ticks+st.Missed-1)*5*time.Millisecond > st.Elapsed || st.Elapsed > res.Wall {
		t.Fatalf("%+v\n%s", res, log.String())
	}
	r, err := db.Run("child")
	if err != nil || !r.Complete || r.Recorder.Ticks != res.Sampler.Ticks || r.Recorder.Source != "sim" {
		t.Fatalf("%+v %v", r, err)
	}
	it := db.Marks(r, storage.MinTime, storage.MaxTime)
	var exit *storage.Mark
	for it.Next() {
		if m := it.At(); m.Kind == wire.MarkExit {
			exit = &m
		}
	}
	if exit == nil || exit.Code != 7 {
		t.Fatalf("exit mark %+v", exit)
	}
}

// TestRecordCommandIsTheJob: with a command, the simulated source gives
// the GPUs' memory only; the marks and allocator samples are the command's
// (its probe's), not a simulated job's mixed in with them. The simulated
// job here started 5 s ago, so it has steps and an epoch to report at the
// first tick.
func TestRecordCommandIsTheJob(t *testing.T) {
	db := openDB(t)
	sim, err := NewSim(SimConfig{GPUs: 2}, time.Now().Add(-5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	res, err := Record(context.Background(), Options{
		Open: openIn(db), Run: storage.Run{Name: "job"}, Source: sim, Interval: 5 * time.Millisecond, Log: &log,
		Command: []string{"sh", "-c", "sleep 0.2"},
	})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v\n%s", err, res, log.String())
	}
	r, err := db.Run("job")
	if err != nil {
		t.Fatal(err)
	}
	if r.Counts.Samples == 0 || r.Counts.TorchSamples != 0 {
		t.Errorf("device samples %d (want some), allocator samples %d (want none)", r.Counts.Samples, r.Counts.TorchSamples)
	}
	var kinds []storage.MarkKind
	for it := db.Marks(r, storage.MinTime, storage.MaxTime); it.Next(); {
		kinds = append(kinds, it.At().Kind)
	}
	if len(kinds) != 1 || kinds[0] != wire.MarkExit {
		t.Errorf("marks %v, want only the exit mark", kinds)
	}
}

func TestRecordPassesSignalsToChild(t *testing.T) {
	db := openDB(t)
	sigs := make(chan os.Signal, 1)
	// The signal is sent once the shell has set its trap (a fixed wait
	// was too short for a shell started on a loaded machine).
	ready := filepath.Join(t.TempDir(), "trapped")
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			if _, err := os.Stat(ready); err == nil {
				sigs <- syscall.SIGTERM
				return
			}
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	var log bytes.Buffer
	res, err := Record(context.Background(), Options{
		Open: openIn(db), Run: storage.Run{Name: "sig"}, Source: simSource(t), Interval: 10 * time.Millisecond, Log: &log,
		Command: []string{"sh", "-c", `trap 'exit 42' TERM; : > "$0"; while :; do sleep 0.01; done`, ready}, Signals: sigs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 42 || !strings.Contains(log.String(), "passing terminated") {
		t.Fatalf("exit %d, log %q", res.ExitCode, log.String())
	}
	// A child that does not trap it dies of it: 128+15.
	go func() {
		time.Sleep(200 * time.Millisecond)
		sigs <- syscall.SIGTERM
	}()
	res, _ = Record(context.Background(), Options{
		Open: openIn(db), Run: storage.Run{Name: "sig2"}, Source: simSource(t), Interval: 10 * time.Millisecond, Log: &log,
		Command: []string{"sleep", "10"}, Signals: sigs,
	})
	if res.ExitCode != 143 {
		t.Fatalf("exit %d", res.ExitCode)
	}
}

func TestRecordCommandNotFound(t *testing.T) {
	var log bytes.Buffer
	res, err := Record(context.Background(), Options{
		Open: openIn(openDB(t)), Run: storage.Run{Name: "nf"}, Source: simSource(t), Interval: 10 * time.Millisecond, Log: &log,
		Command: []string{"/no/such/program"},
	})
	if err != nil || res.ExitCode != 127 || !strings.Contains(log.String(), "/no/such/program") {
		t.Fatalf("%v %d %q", err, res.ExitCode, log.String())
	}
}

// TestRecordSurvivesDatabaseFailure: when the database cannot be written,
// the command runs to its end and its exit code comes back.
func TestRecordSurvivesDatabaseFailure(t *testing.T) {
	t.Run("cannot open", func(t *testing.T) {
		var log bytes.Buffer
		res, err := Record(context.Background(), Options{
			Open: func(storage.Run) (Store, error) { return nil, errors.New("open /ro/memrec.db: permission denied") }, Run: storage.Run{Name: "x"}, Source: simSource(t),
			Interval: 10 * time.Millisecond, Log: &log, Command: []string{"sh", "-c", "sleep 0.1; exit 4"},
		})
		if err != nil || res.ExitCode != 4 || !strings.Contains(log.String(), "NOT RECORDING") {
			t.Fatalf("%v %d %q", err, res.ExitCode, log.String())
		}
	})
	t.Run("fails during the run", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "f.db")
		db, err := storage.Open(path, storage.Options{})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			time.Sleep(200 * time.Millisecond)
			db.Close() // every commit from now on fails
		}()
		var log syncBuffer
		res, err := Record(context.Background(), Options{
			Open: func(run storage.Run) (Store, error) { return DBStore(db, run, &log) },
			Run:  storage.Run{Name: "x"}, Source: simSource(t), Interval: 10 * time.Millisecond, Log: &log,
			Command: []string{"sh", "-c", "sleep 1.5; exit 5"},
		})
		if err != nil || res.ExitCode != 5 || res.DBErrors == 0 || !strings.Contains(log.String(), "cannot write the database") {
			t.Fatalf("%v %+v %q", err, res, log.String())
		}
	})
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestSelectGPUs(t *testing.T) {
	all := []storage.GPU{{Index: 0}, {Index: 1}, {Index: 2}}
	if _, _, err := selectGPUs(all, []int{0, 5}, storage.Run{}); !errors.Is(err, ErrNoSuchGPU) {
		t.Fatal(err)
	}
	g, r, err := selectGPUs(all, []int{2, 0, 2}, storage.Run{})
	if err != nil || fmt.Sprint(g) != "[0 2]" || len(r.GPUs) != 2 {
		t.Fatal(g, r, err)
	}
}

// TestSamplerListsProcessesWhenMemoryMoves: with ProcsEvery, a GPU's
// processes are listed at the first tick, whenever its used memory moved,
// and at least every ProcsEvery; with 0, at every tick.
func TestSamplerListsProcessesWhenMemoryMoves(t *testing.T) {
	for _, tc := range []struct {
		every time.Duration
		want  []int // ticks with a list
	}{
		{100 * time.Millisecond, []int{0, 10, 20, 30, 35, 36, 46, 56, 66, 76, 86, 96}},
		{0, nil}, // every tick
	} {
		t0 := time.Unix(1_000_000, 0)
		clock := NewFakeClock(t0)
		srv := newDGX(t, func(gpu int) []nvml.ProcessInfo { return []nvml.ProcessInfo{{Pid: 42, UsedGpuMemory: 1 << 30}} })
		dev := srv.Devices[0].(*server.Device)
		reads := 0
		dev.GetMemoryInfo_v2Func = func() (nvml.Memory_v2, nvml.Return) {
			used := uint64(1 << 30)
			if reads >= 35 {
				used += 2 << 20 // moves at tick 35, and again at 36
			}
			if reads >= 36 {
				used += 2 << 20
			}
			reads++
			return nvml.Memory_v2{Total: 40 << 30, Used: used}, nvml.SUCCESS
		}
		n, _ := NewNVML(srv)
		ctx, cancel := context.WithCancel(context.Background())
		clock.Hook = func(now time.Time) time.Duration {
			if now.Sub(t0) >= time.Second {
				cancel()
			}
			return 0
		}
		sink := &memSink{}
		st := (&Sampler{Source: n, GPUs: []int{0}, Interval: 10 * time.Millisecond, Procs: true, ProcsEvery: tc.every, Clock: clock, Sink: sink}).Run(ctx)
		var got []int
		for _, p := range sink.procs {
			got = append(got, int(time.Unix(0, p.T).Sub(t0)/(10*time.Millisecond)))
		}
		want := tc.want
		if want == nil {
			for k := 0; k < int(st.Ticks); k++ {
				want = append(want, k)
			}
		}
		if !slices.Equal(got, want) || st.Procs != int64(len(want)) {
			t.Errorf("every %v: lists at ticks %v, want %v", tc.every, got, want)
		}
	}
}

// fakeLoop is a native loop that replays records.
type fakeLoop struct {
	batches [][]loopRecord
	lost    []int64
	stopped bool
}

func (f *fakeLoop) drain(h func(loopRecord)) int64 {
	if len(f.batches) == 0 {
		return f.lost[len(f.lost)-1]
	}
	for _, r := range f.batches[0] {
		h(r)
	}
	f.batches, f.lost = f.batches[1:], f.lost[1:]
	return f.lost[0]
}

func (f *fakeLoop) stop(h func(loopRecord)) int64 {
	f.stopped = true
	return f.drain(h)
}

// TestRunLoopAccounts: the Go end of a native loop stores its readings and
// counts ticks, misses, invalid readings, failures and lost readings.
func TestRunLoopAccounts(t *testing.T) {
	loop := &fakeLoop{
		batches: [][]loopRecord{
			{{Kind: loopTick, T: 1, Late: 20 * time.Microsecond}, {Kind: loopDevice, GPU: 0, T: 1, Used: 5, Reserved: 1},
				{Kind: loopProc, GPU: 0, T: 1, PID: 9, Used: 4}, {Kind: loopMissed, T: 3, Count: 2}},
			{{Kind: loopTick, T: 4, Late: 40 * time.Microsecond}, {Kind: loopInvalid, GPU: 0, T: 4},
				{Kind: loopFailed, GPU: 0, T: 4, Err: errors.New("GPU 0 processes: boom")}},
		},
		lost: []int64{0, 3, 3},
	}
	sink := &memSink{}
	var logged []string
	s := &Sampler{Sink: sink, OnError: func(err error) { logged = append(logged, err.Error()) }}
	ctx, cancel := context.WithTimeout(context.Background(), drainEvery+drainEvery/2)
	defer cancel()
	st := s.runLoop(ctx, loop)
	if !loop.stopped || !st.Native || st.Ticks != 2 || st.Missed != 2 || st.Samples != 1 || st.Procs != 1 || st.Invalid != 1 || st.Errors != 1+3 {
		t.Fatalf("%+v", st)
	}
	if len(sink.dev) != 1 || sink.dev[0] != (storage.DeviceSample{T: 1, GPU: 0, Used: 5, Reserved: 1}) || len(sink.procs) != 1 || sink.procs[0].PID != 9 {
		t.Fatalf("stored %+v %+v", sink.dev, sink.procs)
	}
	if len(logged) != 2 || !slices.ContainsFunc(logged, func(l string) bool { return strings.HasPrefix(l, "3 readings lost") }) {
		t.Fatalf("logged %q", logged)
	}
	if st.LateMax != 40*time.Microsecond {
		t.Errorf("late max %v", st.LateMax)
	}
}

// openIn opens the recording's store in db.
func openIn(db *storage.DB) func(storage.Run) (Store, error) {
	return func(run storage.Run) (Store, error) { return DBStore(db, run, io.Discard) }
}

// slowSource is a simulated job whose every reading takes a while, as on
// a machine too busy for the speed asked.
type slowSource struct {
	*Sim
	each time.Duration
}

func (s slowSource) Read(gpu int, t time.Time, r *Reading) error {
	time.Sleep(s.each)
	return s.Sim.Read(gpu, t, r)
}

// TestScaledClockRecordsTheWholeDuration: a job at a speed the machine
// cannot keep (each reading takes a millisecond of real time, a tick asks
// for 10 µs) is recorded whole: every tick of its --duration, none missed,
// the run spanning the job's duration; only the real time is longer.
func TestScaledClockRecordsTheWholeDuration(t *testing.T) {
	db := openDB(t)
	sim, err := NewSim(SimConfig{GPUs: 1}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	const interval, duration, speed = time.Second, 200 * time.Second, 1e5
	res, err := Record(context.Background(), Options{Open: openIn(db), Run: storage.Run{Name: "slow"}, Source: slowSource{sim, time.Millisecond},
		Interval: interval, Duration: duration, Clock: NewScaledClock(speed), GoLoop: true, Log: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	st := res.Sampler
	if want := int64(duration / interval); st.Ticks != want || st.Missed != 0 {
		t.Errorf("%d ticks taken, %d missed; want all %d of the job's %v", st.Ticks, st.Missed, want, duration)
	}
	r, err := db.Run("slow")
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Duration(); got < duration-interval || got > duration+interval {
		t.Errorf("run spans %v of the job, want %v", got, duration)
	}
	if res.Wall < time.Duration(st.Ticks)*time.Millisecond {
		t.Errorf("took %v of real time for %d readings of 1 ms", res.Wall, st.Ticks)
	}
}

// TestScaledClock sleeps 2 s of a clock 1000 times faster than real time:
// it wakes at or after the 2 s, in far less real time.
func TestScaledClock(t *testing.T) {
	c := NewScaledClock(1000)
	real0, t0 := time.Now(), c.Now()
	c.SleepUntil(context.Background(), t0.Add(2*time.Second))
	if got := c.Now().Sub(t0); got < 2*time.Second {
		t.Errorf("woke %v into the clock, before the 2 s", got)
	}
	if real := time.Since(real0); real < 2*time.Millisecond || real > time.Second {
		t.Errorf("2 s at 1000x took %v of real time, want 2 ms and a little", real)
	}
	if got := c.Real(3 * time.Second); got != 3*time.Millisecond {
		t.Errorf("Real(3s) = %v", got)
	}
}
