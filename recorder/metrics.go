package recorder

import (
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// Live keeps the latest value of everything a recording takes, for a
// Prometheus scrape while it runs.
//
// Writers (the sampler, the marks listener) store each new value with one
// atomic pointer store; a scrape loads those pointers and builds its answer
// from what they point to, which is never changed again. The two sides share
// no lock, so a scrape never waits for the sampler, and the sampler never
// waits for a scrape, however slow the scraper reads. The only lock is taken
// by writers alone, and only when a process or rank appears for the first
// time (the tables are copied on write).
//
// Values are as fresh as the sink sees them: the Go sampling loop hands each
// tick over at once, the native loop once a second (drainEvery).
type Live struct {
	run, host  string
	job        string
	startNS    int64
	opts       LiveOptions
	names      sync.Map         // pid → process name, read once per process
	gpus       map[int]*liveGPU // fixed at NewLive
	order      []int
	procsEvery time.Duration
	progress   Progress
	dropped    atomic.Pointer[func() int64]
	epoch      atomic.Int64
	step       atomic.Int64
	samples    atomic.Int64 // device samples seen

	desc  *descs
	mu    sync.Mutex // writers only, to add a key to procs or torch
	procs atomic.Pointer[map[procKey]*atomic.Pointer[storage.ProcSample]]
	// page, if set, is served at / and /api/ beside /metrics (set before
	// Serve).
	page  http.Handler
	torch atomic.Pointer[map[int]*atomic.Pointer[storage.TorchSample]]
}

// Progress counts the sampler's ticks as they happen. Safe for concurrent
// use; the zero value counts from zero.
type Progress struct {
	Ticks, Missed atomic.Int64
}

type liveGPU struct {
	info   storage.GPU
	labels []string // gpu, UUID, pci_bus_id, device, modelName, hostname, run
	cur    atomic.Pointer[storage.DeviceSample]
	// listT is the time of the newest process list of this GPU.
	listT atomic.Int64
}

type procKey struct{ gpu, pid int }

// LiveOptions say what the live metrics carry beyond the run's own
// figures. The zero value: no version, no process names, current labels.
type LiveOptions struct {
	// Version is memrec's version, on memrec_run_info.
	Version string
	// ProcName names a process by its pid for the process_name label (""
	// where unknown); nil leaves the label empty. It is called at most
	// once per process that has a name, from a scrape.
	ProcName func(pid int) string
	// LegacyHostname spells the host label "Hostname", as dcgm-exporter did
	// before it renamed it to "hostname", for dashboards written then.
	LegacyHostname bool
}

// NewLive returns the live view of a recording of run (its name, host,
// job, start and GPUs). procsEvery is the sampler's ProcsEvery: a process
// not listed for longer than that (and a second) is gone and no longer
// shown.
func NewLive(run storage.Run, procsEvery time.Duration, opts LiveOptions) *Live {
	// Label values must be valid UTF-8 (a scrape fails as a whole on one
	// that is not); a run name or host from the command line may not be.
	l := &Live{run: label(run.Name), host: label(run.Host), job: label(run.Job), startNS: run.StartNS, opts: opts, gpus: map[int]*liveGPU{}, procsEvery: procsEvery}
	l.opts.Version = label(opts.Version)
	for _, g := range run.GPUs {
		l.gpus[g.Index] = &liveGPU{info: g, labels: []string{strconv.Itoa(g.Index), label(g.UUID), label(g.PCIBusID), label(g.Device), label(g.Name), l.host, l.run}}
		l.order = append(l.order, g.Index)
	}
	l.desc = newDescs(opts.LegacyHostname)
	l.epoch.Store(storage.None)
	l.step.Store(storage.None)
	l.procs.Store(&map[procKey]*atomic.Pointer[storage.ProcSample]{})
	l.torch.Store(&map[int]*atomic.Pointer[storage.TorchSample]{})
	return l
}

// Progress is where the sampler counts its ticks (Sampler.Progress).
func (l *Live) Progress() *Progress { return &l.progress }

// SetDropped sets how the number of dropped probe messages is read at each
// scrape (the listener's count); nil reads 0. Safe for concurrent use.
func (l *Live) SetDropped(f func() int64) {
	if f == nil {
		l.dropped.Store(nil)
		return
	}
	l.dropped.Store(&f)
}

// Wrap returns a sink that shows every value in the live view and passes it
// on to next. A value is shown even when next refuses it (a database that
// cannot be written does not blind the metrics).
func (l *Live) Wrap(next Sink) Sink { return &liveSink{next: next, l: l} }

type liveSink struct {
	next Sink
	l    *Live
}

func (s *liveSink) AppendDevice(d storage.DeviceSample) error {
	s.l.samples.Add(1)
	if g := s.l.gpus[d.GPU]; g != nil {
		g.cur.Store(&d)
	}
	return s.next.AppendDevice(d)
}

func (s *liveSink) AppendProc(p storage.ProcSample) error {
	if g := s.l.gpus[p.GPU]; g != nil && p.T > g.listT.Load() {
		g.listT.Store(p.T)
	}
	storeLatest(&s.l.mu, &s.l.procs, procKey{p.GPU, p.PID}, p, func(old storage.ProcSample) bool {
		return old.T < p.T-int64(s.l.procsEvery)-int64(time.Second) // long gone
	})
	return s.next.AppendProc(p)
}

func (s *liveSink) AppendTorch(t storage.TorchSample) error {
	storeLatest(&s.l.mu, &s.l.torch, t.Rank, t, nil)
	return s.next.AppendTorch(t)
}

func (s *liveSink) AppendSites(rows []storage.SiteSample) error { return s.next.AppendSites(rows) }

func (s *liveSink) AppendBudget(b storage.BudgetSample) error { return s.next.AppendBudget(b) }

func (s *liveSink) AppendMark(m storage.Mark) error {
	switch {
	case m.Kind == wire.MarkEpochStart && m.Epoch >= 0:
		s.l.epoch.Store(int64(m.Epoch))
	case m.Kind == wire.MarkStep && m.Step >= 0:
		// Ranks step together; the run's step is the furthest one.
		for {
			cur := s.l.step.Load()
			if int64(m.Step) <= cur || s.l.step.CompareAndSwap(cur, int64(m.Step)) {
				break
			}
		}
	}
	return s.next.AppendMark(m)
}

// storeLatest stores v as key's latest value. A key seen before costs one
// atomic store; a new key copies the table under mu (writers only), leaving
// out the entries stale says are gone.
func storeLatest[K comparable, V any](mu *sync.Mutex, table *atomic.Pointer[map[K]*atomic.Pointer[V]], key K, v V, stale func(V) bool) {
	if p := (*table.Load())[key]; p != nil {
		p.Store(&v)
		return
	}
	mu.Lock()
	defer mu.Unlock()
	old := *table.Load()
	if p := old[key]; p != nil { // added by another writer meanwhile
		p.Store(&v)
		return
	}
	next := make(map[K]*atomic.Pointer[V], len(old)+1)
	for k, p := range old {
		if stale == nil || !stale(*p.Load()) {
			next[k] = p
		}
	}
	p := &atomic.Pointer[V]{}
	p.Store(&v)
	next[key] = p
	table.Store(&next)
}

// The exported metrics. Names follow Prometheus' conventions (base units,
// _total for counters); the GPU labels are spelled as current dcgm-exporter
// spells them (gpu, UUID, pci_bus_id, device, modelName, hostname), so
// dashboards can join the two on any of them (docs/metrics.md).
type descs struct {
	used, resv, free, total, proc                      *prometheus.Desc
	alloc, tresv, peak, split, largest                 *prometheus.Desc
	ticks, missed, dropped, epoch, step, info, started *prometheus.Desc
	// counters are the allocator's event counts, one a row of
	// wire.TorchFields that has Help, in the table's order.
	counters []torchCounter
}

// torchCounter is one allocator counter on /metrics and the row it reads.
type torchCounter struct {
	desc *prometheus.Desc
	get  func(wire.TorchSample) int64
}

// JobLabel names the run's job (--job) on memrec_run_info: not "job",
// which is the scrape's own label (Prometheus would store memrec's as
// exported_job).
const JobLabel = "memrec_job"

// HostnameLabel is the host label's name; LegacyHostnameLabel the one
// dcgm-exporter used before (LiveOptions.LegacyHostname).
const (
	HostnameLabel       = "hostname"
	LegacyHostnameLabel = "Hostname"
)

func newDescs(legacy bool) *descs {
	host := HostnameLabel
	if legacy {
		host = LegacyHostnameLabel
	}
	gpu := []string{"gpu", "UUID", "pci_bus_id", "device", "modelName", host, "run"}
	proc := append(gpu[:len(gpu):len(gpu)], "pid", "process_name")
	rank := append(proc[:len(proc):len(proc)], "rank")
	run := []string{host, "run"}
	d := prometheus.NewDesc
	ds := &descs{
		used:    d("memrec_gpu_memory_used_bytes", "GPU memory in use as NVML reports it: every process and the driver's allocations, not the driver-reserved part.", gpu, nil),
		resv:    d("memrec_gpu_memory_reserved_bytes", "GPU memory the driver reserves for itself (NVML memory info v2); 0 where not reported.", gpu, nil),
		free:    d("memrec_gpu_memory_free_bytes", "GPU memory free: total less used less driver-reserved.", gpu, nil),
		total:   d("memrec_gpu_memory_total_bytes", "GPU memory in all.", gpu, nil),
		proc:    d("memrec_process_memory_used_bytes", "GPU memory one process uses on one GPU, from its latest process list.", proc, nil),
		alloc:   d("memrec_torch_allocated_bytes", "Memory the rank's caching allocator (PyTorch, or JAX's) has handed out to tensors.", rank, nil),
		tresv:   d("memrec_torch_reserved_bytes", "Memory the rank's caching allocator holds from the driver (JAX: its pool).", rank, nil),
		peak:    d("memrec_torch_step_peak_allocated_bytes", "Peak of allocated memory since the rank's previous report (its last step).", rank, nil),
		split:   d("memrec_torch_inactive_split_bytes", "Reserved memory in split blocks no tensor uses (fragmentation).", rank, nil),
		largest: d("memrec_torch_largest_segment_bytes", "The largest segment with room free the rank's allocator was seen to hold: its largest request that comes and goes. Absent until the probe has looked (after the third step).", rank, nil),
		ticks:   d("memrec_recorder_ticks_total", "Sampling ticks the recorder took.", run, nil),
		missed:  d("memrec_recorder_missed_ticks_total", "Sampling ticks the recorder skipped because their time had passed.", run, nil),
		dropped: d("memrec_recorder_dropped_messages_total", "Probe messages dropped (malformed, too long, unknown, or dropped by a probe's full queue).", run, nil),
		epoch:   d("memrec_epoch", "The run's current epoch (from epoch_start marks); -1 before the first.", run, nil),
		step:    d("memrec_step", "The furthest step any rank has finished (from step marks); -1 before the first.", run, nil),
		info:    d("memrec_run_info", "The recording: always 1, with the run, its job and memrec's version as labels (for joins and Grafana annotations).", []string{host, "run", JobLabel, "version"}, nil),
		started: d("memrec_run_start_time_seconds", "When the run started, Unix seconds.", run, nil),
	}
	for _, f := range wire.TorchFields {
		if f.Help != "" {
			ds.counters = append(ds.counters, torchCounter{desc: d("memrec_torch_"+f.Name+"_total", f.Help, rank, nil), get: f.Get})
		}
	}
	return ds
}

func (d *descs) all() []*prometheus.Desc {
	all := []*prometheus.Desc{d.used, d.resv, d.free, d.total, d.proc, d.alloc, d.tresv, d.peak, d.split, d.largest,
		d.ticks, d.missed, d.dropped, d.epoch, d.step, d.info, d.started}
	for _, c := range d.counters {
		all = append(all, c.desc)
	}
	return all
}

// procName is the name of process pid, read once (LiveOptions.ProcName).
func (l *Live) procName(pid int) string {
	if l.opts.ProcName == nil {
		return ""
	}
	if v, ok := l.names.Load(pid); ok {
		return v.(string)
	}
	name := label(l.opts.ProcName(pid))
	if name != "" { // a process not yet (or no longer) seen is asked again
		l.names.Store(pid, name)
	}
	return name
}

// label is s as a label value: valid UTF-8, each invalid byte replaced by
// U+FFFD.
func label(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// Describe implements prometheus.Collector.
func (l *Live) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range l.desc.all() {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the latest values, read without
// waiting for any writer. A GPU not yet sampled is left out.
func (l *Live) Collect(ch chan<- prometheus.Metric) {
	// A metric that cannot be made (never, with labels made valid by
	// label) is left out rather than failing the scrape.
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		if m, err := prometheus.NewConstMetric(d, prometheus.GaugeValue, float64(v), labels...); err == nil {
			ch <- m
		}
	}
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		if m, err := prometheus.NewConstMetric(d, prometheus.CounterValue, float64(v), labels...); err == nil {
			ch <- m
		}
	}
	D := l.desc
	var newest int64
	for _, i := range l.order {
		g := l.gpus[i]
		d := g.cur.Load()
		if d == nil {
			continue
		}
		newest = max(newest, d.T)
		gauge(D.used, d.Used, g.labels...)
		gauge(D.resv, d.Reserved, g.labels...)
		if g.info.TotalBytes > 0 {
			gauge(D.total, g.info.TotalBytes, g.labels...)
			gauge(D.free, max(0, g.info.TotalBytes-d.Used-d.Reserved), g.labels...)
		}
	}
	for k, p := range *l.procs.Load() {
		g := l.gpus[k.gpu]
		s := p.Load()
		// Only the GPU's newest list: a process missing from it is gone.
		if g == nil || s.T < g.listT.Load() || s.T < newest-int64(l.procsEvery)-int64(time.Second) {
			continue
		}
		gauge(D.proc, s.Used, append(g.labels[:len(g.labels):len(g.labels)], strconv.Itoa(k.pid), l.procName(k.pid))...)
	}
	for rank, p := range *l.torch.Load() {
		s := p.Load()
		// gpu, UUID, pci_bus_id, device, modelName, host, run, pid, process_name, rank
		labels := []string{strconv.Itoa(s.GPU), "", "", "", "", l.host, l.run, strconv.Itoa(s.PID), l.procName(s.PID), strconv.Itoa(rank)}
		if g := l.gpus[s.GPU]; g != nil {
			copy(labels[1:5], g.labels[1:5])
		}
		gauge(D.alloc, s.Allocated, labels...)
		gauge(D.tresv, s.Reserved, labels...)
		gauge(D.peak, s.PeakAllocated, labels...)
		gauge(D.split, s.InactiveSplit, labels...)
		if s.LargestSegment > 0 {
			gauge(D.largest, s.LargestSegment, labels...)
		}
		for _, c := range D.counters {
			counter(c.desc, c.get(*s), labels...)
		}
	}
	var dropped int64
	if f := l.dropped.Load(); f != nil {
		dropped = (*f)()
	}
	counter(D.ticks, l.progress.Ticks.Load(), l.host, l.run)
	counter(D.missed, l.progress.Missed.Load(), l.host, l.run)
	counter(D.dropped, dropped, l.host, l.run)
	gauge(D.epoch, l.epoch.Load(), l.host, l.run)
	gauge(D.step, l.step.Load(), l.host, l.run)
	gauge(D.info, 1, l.host, l.run, l.job, l.opts.Version)
	if m, err := prometheus.NewConstMetric(D.started, prometheus.GaugeValue, float64(l.startNS)/1e9, l.host, l.run); err == nil {
		ch <- m
	}
}

// Handler serves the live view at /metrics in the Prometheus exposition
// format (text, or protobuf where the scraper asks for it), and the live
// page at / and /api/ when the recording has one (Watch.Page). Every path
// answers GET and HEAD only (405 otherwise). The page answers only
// requests whose Host is an IP address, localhost or the machine's name
// (HostGuard; Serve narrows it to the address bound); /metrics answers
// any Host, since a scraper names its target as its service discovery
// found it (an alias, a pod's IP).
func (l *Live) Handler() http.Handler { return l.handler("", nil) }

func (l *Live) handler(named string, bound net.Addr) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(l)
	mux := http.NewServeMux()
	mux.Handle("/metrics", readOnly(newExposition(reg, DefaultServeLimits)))
	if l.page != nil {
		page := HostGuard(readOnly(l.page), named, bound)
		mux.Handle("/{$}", page)
		mux.Handle("/api/", page)
		return mux
	}
	mux.Handle("/", readOnly(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("memrec: metrics at /metrics\n"))
	})))
	return mux
}

// Serve serves Handler on ln within DefaultServeLimits until the returned
// stop is called; stop waits at most a second for scrapes in flight and
// closes ln.
func (l *Live) Serve(ln net.Listener) (stop func()) {
	return ServeHTTP(ln, l.handler("", ln.Addr()), DefaultServeLimits)
}
