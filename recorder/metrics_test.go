package recorder

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// gather scrapes l and returns each metric's value by name and its labels
// written as k=v,... in label-name order.
func gather(t *testing.T, l *Live) map[string]map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(l)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, f := range fams {
		m := map[string]float64{}
		for _, mt := range f.Metric {
			var parts []string
			for _, lp := range mt.Label {
				parts = append(parts, lp.GetName()+"="+lp.GetValue())
			}
			m[strings.Join(parts, ",")] = value(mt)
		}
		out[f.GetName()] = m
	}
	return out
}

func value(m *dto.Metric) float64 {
	if m.Gauge != nil {
		return m.Gauge.GetValue()
	}
	return m.Counter.GetValue()
}

func liveRun() storage.Run {
	return storage.Run{Name: "r1", Host: "node7", GPUs: []storage.GPU{
		{Index: 0, UUID: "GPU-a", Name: "NVIDIA H200", TotalBytes: 1000, PCIBusID: "00000000:0F:00.0", Device: "nvidia0"},
		{Index: 3, UUID: "GPU-b", Name: "NVIDIA H200", TotalBytes: 2000, PCIBusID: "00000000:8A:00.0", Device: "nvidia3"},
	}, Job: "slurm-77", StartNS: 1_700_000_000_500_000_000}
}

func TestLiveMetricsShowLatestValues(t *testing.T) {
	names := map[int]string{42: "python3", 43: "torchrun"}
	l := NewLive(liveRun(), time.Second, LiveOptions{Version: "v1.2.3", ProcName: func(pid int) string { return names[pid] }})
	sink := l.Wrap(Discard)
	sec := int64(time.Second)
	sink.AppendDevice(storage.DeviceSample{T: 1 * sec, GPU: 0, Used: 100, Reserved: 10})
	sink.AppendDevice(storage.DeviceSample{T: 2 * sec, GPU: 0, Used: 300, Reserved: 20})
	sink.AppendDevice(storage.DeviceSample{T: 2 * sec, GPU: 3, Used: 700, Reserved: 50})
	sink.AppendDevice(storage.DeviceSample{T: 2 * sec, GPU: 9, Used: 1}) // not recorded: ignored
	sink.AppendProc(storage.ProcSample{T: 1 * sec, GPU: 0, PID: 41, Used: 80})
	sink.AppendProc(storage.ProcSample{T: 2 * sec, GPU: 0, PID: 42, Used: 250}) // a newer list without 41
	sink.AppendProc(storage.ProcSample{T: 2 * sec, GPU: 3, PID: 43, Used: 600})
	sink.AppendTorch(storage.TorchSample{T: sec, GPU: 3, PID: 43, Rank: 5, Allocated: 11, Reserved: 22, PeakAllocated: 33, InactiveSplit: 4, AllocRetries: 2, OOMs: 1, LargestSegment: 55, DeviceAllocs: 6, DeviceFrees: 5})
	// Not looked at yet: no largest segment.
	sink.AppendTorch(storage.TorchSample{T: sec, GPU: 0, PID: 42, Rank: 0, Allocated: 1})
	for _, s := range []int{3, 7, 6} { // ranks report out of order
		m := storage.NewMark(sec, wire.MarkStep)
		m.Step = s
		sink.AppendMark(m)
	}
	e := storage.NewMark(sec, wire.MarkEpochStart)
	e.Epoch = 2
	sink.AppendMark(e)
	l.Progress().Ticks.Add(12)
	l.Progress().Missed.Add(1)
	l.SetDropped(func() int64 { return 4 })

	got := gather(t, l)
	// Label sets as gather writes them: names in byte order.
	g0 := "UUID=GPU-a,device=nvidia0,gpu=0,hostname=node7,modelName=NVIDIA H200,pci_bus_id=00000000:0F:00.0,run=r1"
	g3 := "UUID=GPU-b,device=nvidia3,gpu=3,hostname=node7,modelName=NVIDIA H200,pci_bus_id=00000000:8A:00.0,run=r1"
	p42 := "UUID=GPU-a,device=nvidia0,gpu=0,hostname=node7,modelName=NVIDIA H200,pci_bus_id=00000000:0F:00.0,pid=42,process_name=python3,run=r1"
	p43 := "UUID=GPU-b,device=nvidia3,gpu=3,hostname=node7,modelName=NVIDIA H200,pci_bus_id=00000000:8A:00.0,pid=43,process_name=torchrun,run=r1"
	r5 := "UUID=GPU-b,device=nvidia3,gpu=3,hostname=node7,modelName=NVIDIA H200,pci_bus_id=00000000:8A:00.0,pid=43,process_name=torchrun,rank=5,run=r1"
	run := "hostname=node7,run=r1"
	want := map[string]map[string]float64{
		"memrec_gpu_memory_used_bytes":           {g0: 300, g3: 700},
		"memrec_gpu_memory_reserved_bytes":       {g0: 20, g3: 50},
		"memrec_gpu_memory_total_bytes":          {g0: 1000, g3: 2000},
		"memrec_gpu_memory_free_bytes":           {g0: 1000 - 300 - 20, g3: 2000 - 700 - 50},
		"memrec_process_memory_used_bytes":       {p42: 250, p43: 600},
		"memrec_recorder_ticks_total":            {run: 12},
		"memrec_recorder_missed_ticks_total":     {run: 1},
		"memrec_recorder_dropped_messages_total": {run: 4},
		"memrec_step":                            {run: 7},
		"memrec_epoch":                           {run: 2},
		"memrec_run_info":                        {"hostname=node7,memrec_job=slurm-77,run=r1,version=v1.2.3": 1},
		"memrec_run_start_time_seconds":          {run: 1_700_000_000.5},
	}
	r0 := "UUID=GPU-a,device=nvidia0,gpu=0,hostname=node7,modelName=NVIDIA H200,pci_bus_id=00000000:0F:00.0,pid=42,process_name=python3,rank=0,run=r1"
	for name, v := range map[string]float64{"allocated_bytes": 11, "reserved_bytes": 22, "step_peak_allocated_bytes": 33,
		"inactive_split_bytes": 4, "alloc_retries_total": 2, "ooms_total": 1, "device_allocs_total": 6, "device_frees_total": 5} {
		want["memrec_torch_"+name] = map[string]float64{r5: v, r0: 0}
	}
	want["memrec_torch_allocated_bytes"][r0] = 1
	want["memrec_torch_largest_segment_bytes"] = map[string]float64{r5: 55}
	for name, series := range want {
		if len(got[name]) != len(series) {
			t.Errorf("%s: got %v, want %v", name, got[name], series)
		}
		for labels, v := range series {
			if g, ok := got[name][labels]; !ok || g != v {
				t.Errorf("%s{%s} = %v (present %v), want %v", name, labels, g, ok, v)
			}
		}
	}
}

func TestLiveMetricsBeforeAnySample(t *testing.T) {
	got := gather(t, NewLive(liveRun(), time.Second, LiveOptions{}))
	if len(got["memrec_gpu_memory_used_bytes"]) != 0 {
		t.Errorf("GPUs shown before their first sample: %v", got["memrec_gpu_memory_used_bytes"])
	}
	if v := got["memrec_step"]["hostname=node7,run=r1"]; v != -1 {
		t.Errorf("step before the first mark = %v, want -1", v)
	}
}

func TestLiveProcessGoneWhenNotListed(t *testing.T) {
	l := NewLive(liveRun(), time.Second, LiveOptions{})
	sink := l.Wrap(Discard)
	sec := int64(time.Second)
	sink.AppendProc(storage.ProcSample{T: sec, GPU: 0, PID: 41, Used: 80})
	// The GPU emptied: its lists hold nobody, and its samples go on.
	sink.AppendDevice(storage.DeviceSample{T: 5 * sec, GPU: 0, Used: 3})
	if got := gather(t, l)["memrec_process_memory_used_bytes"]; len(got) != 0 {
		t.Errorf("a process not listed for 4 s (lists at least every 1 s) is still shown: %v", got)
	}
}

// TestLiveScrapeNeverBlocksWriters holds a scrape in the middle of its
// answer (its reader stops reading) and appends meanwhile: every append
// must return.
func TestLiveScrapeNeverBlocksWriters(t *testing.T) {
	l := NewLive(liveRun(), time.Second, LiveOptions{})
	sink := l.Wrap(Discard)
	sink.AppendDevice(storage.DeviceSample{T: 1, GPU: 0, Used: 1})
	ch := make(chan prometheus.Metric) // nobody reads: Collect blocks at its first metric
	go func() { l.Collect(ch); close(ch) }()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 1000 {
			sink.AppendDevice(storage.DeviceSample{T: int64(i), GPU: 0, Used: int64(i)})
			sink.AppendProc(storage.ProcSample{T: int64(i), GPU: 3, PID: 1000 + i, Used: 1}) // new keys: copy on write
			sink.AppendTorch(storage.TorchSample{T: int64(i), GPU: 0, Rank: i})
			l.Progress().Ticks.Add(1)
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("appends blocked behind a stalled scrape")
	}
	for range ch { // let the stalled scrape finish
	}
}

// TestLiveServe scrapes over HTTP what the sampler stores, with the
// simulator on a fake clock: the served value of each GPU is the value the
// simulator gives for the last tick.
func TestLiveServe(t *testing.T) {
	start := time.Unix(1_700_000_000, 0)
	sim, err := NewSim(SimConfig{GPUs: 2}, start)
	if err != nil {
		t.Fatal(err)
	}
	gpus, _ := sim.GPUs()
	run := storage.Run{Name: "served", Host: "h", GPUs: gpus}
	l := NewLive(run, time.Second, LiveOptions{})
	clock := NewFakeClock(start)
	ctx, cancel := context.WithCancel(context.Background())
	ticks := 0
	s := &Sampler{Source: sim, GPUs: []int{0, 1}, Interval: 10 * time.Millisecond, Clock: clock, Sink: l.Wrap(Discard), Progress: l.Progress()}
	// Stop after 250 ticks: the sink counts them.
	s.Sink = &stopAfter{Sink: s.Sink, n: 2 * 250, stop: cancel, count: &ticks}
	st := s.Run(ctx)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := l.Serve(ln)
	defer stop()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	last := start.Add(time.Duration(st.Ticks-1) * 10 * time.Millisecond)
	for _, g := range gpus {
		var r Reading
		sim.Read(g.Index, last, &r)
		line := `memrec_gpu_memory_used_bytes{UUID="` + g.UUID + `",device="` + g.Device + `",gpu="` + strconv.Itoa(g.Index) + `",hostname="h",modelName="` + g.Name + `",pci_bus_id="` + g.PCIBusID + `",run="served"} ` +
			strconv.FormatFloat(float64(r.Used), 'g', -1, 64)
		if !strings.Contains(string(body), line+"\n") {
			t.Errorf("scrape lacks %q:\n%s", line, body)
		}
	}
	if !strings.Contains(string(body), `memrec_recorder_ticks_total{hostname="h",run="served"} `+strconv.FormatInt(st.Ticks, 10)+"\n") {
		t.Errorf("ticks: want %d in\n%s", st.Ticks, body)
	}
}

// stopAfter cancels after n device samples.
type stopAfter struct {
	Sink
	n     int
	count *int
	stop  func()
}

func (s *stopAfter) AppendDevice(d storage.DeviceSample) error {
	*s.count++
	if *s.count == s.n {
		s.stop()
	}
	return s.Sink.AppendDevice(d)
}

// BenchmarkLiveScrape is one scrape of /metrics at 8 GPUs, each with its
// process and rank, as the handler answers it (text format).
func BenchmarkLiveScrape(b *testing.B) {
	var gpus []storage.GPU
	for i := range 8 {
		gpus = append(gpus, storage.GPU{Index: i, UUID: "GPU-" + strconv.Itoa(i), Name: "NVIDIA H200", TotalBytes: 150 << 30})
	}
	l := NewLive(storage.Run{Name: "bench", Host: "node1", GPUs: gpus}, time.Second, LiveOptions{})
	sink := l.Wrap(Discard)
	for i := range 8 {
		sink.AppendDevice(storage.DeviceSample{T: 1, GPU: i, Used: 80 << 30})
		sink.AppendProc(storage.ProcSample{T: 1, GPU: i, PID: 100 + i, Used: 79 << 30})
		sink.AppendTorch(storage.TorchSample{T: 1, GPU: i, PID: 100 + i, Rank: i, Allocated: 60 << 30})
	}
	h := l.Handler()
	req := httptest.NewRequest("GET", "/metrics", nil)
	b.ReportAllocs()
	var n int
	for b.Loop() {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		n = w.Body.Len()
	}
	b.ReportMetric(float64(n), "B/scrape")
}

// TestLiveLegacyHostname: LegacyHostname spells the host label as older
// dcgm-exporter releases did, on every metric that has one.
func TestLiveLegacyHostname(t *testing.T) {
	got := gather(t, NewLive(liveRun(), time.Second, LiveOptions{LegacyHostname: true}))
	for name, series := range got {
		for labels := range series {
			if !strings.Contains(labels, "Hostname=node7") || strings.Contains(labels, "hostname=") {
				t.Errorf("%s{%s}: want Hostname, not hostname", name, labels)
			}
		}
	}
	if len(got["memrec_run_info"]) != 1 {
		t.Errorf("memrec_run_info: %v", got["memrec_run_info"])
	}
}

// TestNVMLProcName: a process is named as /proc/PID/comm names it.
func TestNVMLProcName(t *testing.T) {
	b, err := os.ReadFile("/proc/self/comm")
	if err != nil {
		t.Skip("no /proc")
	}
	var n NVML
	if got, want := n.ProcName(os.Getpid()), strings.TrimSpace(string(b)); got != want || got == "" {
		t.Errorf("ProcName(self) = %q, want %q", got, want)
	}
	if got := n.ProcName(-1); got != "" {
		t.Errorf("ProcName(-1) = %q", got)
	}
}
