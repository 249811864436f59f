package storage

import (
	"strconv"
	"time"

	"github.com/memrec/memrec/storage/wire"
)

// Run is one recorded (or imported) training run: its metadata and counts.
// The zero value is not a stored run; runs come from DB.Runs, DB.Run or
// Appender.Run.
type Run struct {
	ID   uint64 `json:"id"`
	Name string `json:"name"`
	Host string `json:"host,omitempty"`
	// Job is the job this run belongs to (record's --job, or the
	// launcher's TORCHELASTIC_RUN_ID or SLURM_JOB_ID); "" if unknown.
	Job string `json:"job,omitempty"`
	// Hosts are the nodes a merged run was recorded on, in merge order;
	// nil for a run of one machine.
	Hosts      []HostInfo        `json:"hosts,omitempty"`
	StartNS    int64             `json:"start_ns"`
	EndNS      int64             `json:"end_ns,omitempty"` // last data time, or the recorder's stop time
	IntervalNS int64             `json:"interval_ns,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	GPUs       []GPU             `json:"gpus"`
	// Complete is false while a recorder writes the run, and stays false if
	// it died: everything it committed is readable, the rest is lost.
	Complete bool     `json:"complete"`
	Counts   Counts   `json:"counts"`
	Recorder Recorder `json:"recorder,omitempty"`
	// Writer is the process of the Appender writing the run, from its
	// creation to its final commit (storage/live.go); nil otherwise.
	Writer *Writer `json:"writer,omitempty"`

	// window, when set, limits every read through this value to
	// [from, to); see Within.
	window *window
}

type window struct{ from, to, runStart, runEnd int64 }

// Within returns a copy of r through which reads see only the data in
// [from, to) (Unix ns): DeviceSamples, ProcSamples, TorchSamples, Marks
// and Export clamp their ranges to it, and StartNS and EndNS become the
// window's bounds inside the run. Reads seek to the window's first chunk,
// so they cost time in proportion to the window, not to the run. Counts
// stay the whole run's. Windows nest: the result is the intersection.
func (r Run) Within(from, to int64) Run {
	runStart, runEnd := r.StartNS, r.EndNS
	if r.window != nil {
		from, to, runStart, runEnd = max(from, r.window.from), min(to, r.window.to), r.window.runStart, r.window.runEnd
	}
	r.window = &window{from: from, to: to, runStart: runStart, runEnd: runEnd}
	r.StartNS = max(r.StartNS, from)
	if to-1 < r.EndNS {
		r.EndNS = to - 1
	}
	r.EndNS = max(r.EndNS, r.StartNS)
	return r
}

// Before returns a copy of r through which reads see the lookBack ns of
// data before r's window (none for a whole run): what a window's first
// moments carry in from before it, the last sample before its start.
func (r Run) Before(lookBack int64) (Run, bool) {
	if r.window == nil {
		return r, false
	}
	from := r.window.from
	w := r
	w.window = nil
	w.StartNS, w.EndNS = r.window.runStart, r.window.runEnd
	return w.Within(max(w.StartNS, from-lookBack), from), true
}

// RunEndNS is the end of the whole run, also through a window.
func (r Run) RunEndNS() int64 {
	if r.window != nil {
		return r.window.runEnd
	}
	return r.EndNS
}

// RunStartNS is the start of the whole run, also through a window.
func (r Run) RunStartNS() int64 {
	if r.window != nil {
		return r.window.runStart
	}
	return r.StartNS
}

// Window returns the bounds set by Within, and false for a whole run.
func (r Run) Window() (from, to int64, ok bool) {
	if r.window == nil {
		return MinTime, MaxTime, false
	}
	return r.window.from, r.window.to, true
}

// Duration is the time between the run's start and its last data.
func (r Run) Duration() time.Duration {
	if r.EndNS <= r.StartNS {
		return 0
	}
	return time.Duration(r.EndNS - r.StartNS)
}

// GPUByIndex returns the run's GPU with that index.
func (r Run) GPUByIndex(i int) (GPU, bool) {
	for _, g := range r.GPUs {
		if g.Index == i {
			return g, true
		}
	}
	return GPU{}, false
}

// GPU identifies one device of a run.
type GPU struct {
	Index      int    `json:"gpu"`
	UUID       string `json:"uuid,omitempty"`
	Name       string `json:"name,omitempty"`
	TotalBytes int64  `json:"total_bytes,omitempty"`
	// PCIBusID is NVML's PCI bus id ("00000000:0F:00.0") and Device the
	// GPU's device file ("nvidia3", from its minor number): dcgm-exporter's
	// pci_bus_id and device labels. "" where unknown (older files, imports).
	PCIBusID string `json:"pci_bus_id,omitempty"`
	Device   string `json:"device,omitempty"`
	// Host and HostGPU are, in a merged run, the node the GPU is on and
	// its NVML index there (Index numbers the GPUs of all nodes). Host is
	// "" in a run of one machine.
	Host    string `json:"host,omitempty"`
	HostGPU int    `json:"host_gpu,omitempty"`
}

// Label names the GPU for people: "node2/gpu3" in a merged run, "gpu3"
// otherwise.
func (g GPU) Label() string {
	if g.Host == "" {
		return "gpu" + strconv.Itoa(g.Index)
	}
	return g.Host + "/gpu" + strconv.Itoa(g.HostGPU)
}

// HostInfo is one node of a merged run.
type HostInfo struct {
	Name string `json:"name"`
	Run  string `json:"run"` // the node's own run
	Job  string `json:"job,omitempty"`
	GPUs int    `json:"gpus"`
	// OffsetNS was subtracted from every time of the node to bring it onto
	// the first node's clock: how far its clock was ahead.
	OffsetNS int64 `json:"offset_ns"`
	// CommonSteps is how many step marks the offset was found on (0: the
	// clocks were not aligned), SpreadNS the median distance of those
	// steps from the offset.
	CommonSteps int      `json:"common_steps"`
	SpreadNS    int64    `json:"spread_ns"`
	Complete    bool     `json:"complete"`
	Recorder    Recorder `json:"recorder"`
}

// Counts are the numbers of stored items of each kind.
type Counts struct {
	Samples      int64 `json:"samples"`
	ProcSamples  int64 `json:"proc_samples"`
	TorchSamples int64 `json:"torch_samples"`
	Marks        int64 `json:"marks"`
	Sites        int64 `json:"sites,omitempty"`   // rows of site snapshots: one per site
	Budgets      int64 `json:"budgets,omitempty"` // budget samples (memrec.watch)
}

// add counts n entries of series kind k.
func (c *Counts) add(k seriesKind, n int64) { *schemas[k].count(c) += n }

// plus adds sign·o to c.
func (c *Counts) plus(o Counts, sign int64) {
	c.Samples += sign * o.Samples
	c.ProcSamples += sign * o.ProcSamples
	c.TorchSamples += sign * o.TorchSamples
	c.Marks += sign * o.Marks
	c.Sites += sign * o.Sites
	c.Budgets += sign * o.Budgets
}

// Total is the number of samples, marks and site rows.
func (c Counts) Total() int64 {
	return c.Samples + c.ProcSamples + c.TorchSamples + c.Marks + c.Sites + c.Budgets
}

// Recorder holds what the recorder measured about itself. All zero for an
// imported run that did not carry them.
type Recorder struct {
	Ticks       int64   `json:"ticks,omitempty"`
	MissedTicks int64   `json:"missed_ticks,omitempty"`
	AchievedHz  float64 `json:"achieved_hz,omitempty"`
	Dropped     int64   `json:"dropped,omitempty"` // probe messages dropped (malformed, too long, unknown)
	Invalid     int64   `json:"invalid,omitempty"` // NVML readings that made no sense, not stored
	Source      string  `json:"source,omitempty"`
	Driver      string  `json:"driver,omitempty"`
	// NotStarted is why the recording's command could not be started ("":
	// it was, or there was none). Such a run is never marked complete.
	NotStarted string `json:"not_started,omitempty"`
}

// SourceNvidiaSMI is Recorder.Source of a run imported from nvidia-smi's
// CSV logs: memory known to 1 MiB, no allocator samples, no marks.
const SourceNvidiaSMI = "nvidia-smi"

// The records a run stores are the records of the interchange format,
// defined in package wire (which the recorder's socket shares); they are
// named here too so that users of storage need not import wire. Their
// constants (mark kinds, sites reasons, the special site files) are not
// re-named: they are used as wire.MarkStep and so on, so a new one is one
// edit in storage/wire/types.go.
type (
	DeviceSample = wire.DeviceSample
	ProcSample   = wire.ProcSample
	TorchSample  = wire.TorchSample
	Mark         = wire.Mark
	MarkKind     = wire.MarkKind
	SiteSample   = wire.SiteSample
	SitesReason  = wire.SitesReason
)

// None is the value of a Mark's optional integer field that is absent.
const None = wire.None

// NewMark returns a mark with every optional field absent.
func NewMark(t int64, kind MarkKind) Mark { return wire.NewMark(t, kind) }
