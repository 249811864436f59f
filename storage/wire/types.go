package wire

import "strconv"

// DeviceSample is one NVML reading of a GPU: the device view of memory.
type DeviceSample struct {
	T        int64 // Unix ns (stored to 1 µs)
	GPU      int
	Used     int64 // bytes used on the device, all processes and the driver
	Reserved int64 // bytes the driver reserves (NVML Memory_v2); 0 if unknown
}

// ProcSample is one process's memory on one GPU as NVML sees it.
type ProcSample struct {
	T    int64
	GPU  int
	PID  int
	Used int64
}

// TorchSample is one reading of PyTorch's caching allocator in one process:
// the allocator view of memory.
type TorchSample struct {
	T             int64
	GPU           int
	PID           int
	Rank          int
	Allocated     int64
	Reserved      int64
	Active        int64
	InactiveSplit int64
	PeakAllocated int64 // since the previous report
	Segments      int64
	AllocRetries  int64
	OOMs          int64
	// LargestSegment is the largest segment the allocator was seen to
	// hold so far (bytes): the size of the largest request it served.
	// 0 when not looked at (before the probe's first look, older probes,
	// expandable segments).
	LargestSegment int64
	// DeviceAllocs and DeviceFrees count the allocator's cudaMalloc and
	// cudaFree calls since the process started: a cache that keeps
	// allocating and freeing device memory thrashes.
	DeviceAllocs int64
	DeviceFrees  int64
}

// MarkKind is what a mark says happened. The set is open: a kind memrec
// gives no meaning to is stored and shown as it came.
type MarkKind string

// Mark kinds that memrec gives a meaning to (docs/format.md).
const (
	MarkEpochStart MarkKind = "epoch_start"
	MarkEpochEnd   MarkKind = "epoch_end"
	MarkStep       MarkKind = "step"
	MarkEvent      MarkKind = "event"
	MarkOOM        MarkKind = "oom"
	MarkExit       MarkKind = "exit"
	// MarkProbe is the probe's note about itself, in Text: why it has no
	// allocator view ("torch 1.13.1 without CUDA: no allocator view").
	MarkProbe MarkKind = "probe"
)

// String is the kind as the "kind" field spells it.
func (k MarkKind) String() string { return string(k) }

// None is the value of a Mark's optional integer field that is absent.
const None = -1

// Mark is a timestamped annotation. Its integer fields are None when absent;
// a present one is never negative.
type Mark struct {
	T     int64
	Kind  MarkKind
	Epoch int
	Step  int
	Rank  int
	GPU   int
	PID   int
	Code  int // exit status, for kind "exit"
	Text  string
}

// NewMark returns a mark with every optional field absent.
func NewMark(t int64, kind MarkKind) Mark {
	return Mark{T: t, Kind: kind, Epoch: None, Step: None, Rank: None, GPU: None, PID: None, Code: None}
}

// Special files of a SiteSample: the entries of a snapshot that are not one
// line of code.
const (
	// SiteUntracked holds the blocks without a Python stack (allocated while
	// the allocator's history was off, or by autograd's backward threads).
	SiteUntracked = "<untracked>"
	// SiteOther adds up the sites a bounded message had no room for.
	SiteOther = "<other>"
)

// SitesReason is why a site snapshot was taken. The set is open: a reason
// memrec gives no meaning to is stored as it comes.
type SitesReason string

// Reasons a site snapshot was taken, as the probe sends them.
const (
	SitesEpochEnd SitesReason = "epoch_end"
	SitesOOM      SitesReason = "oom"
	SitesExit     SitesReason = "exit"
	SitesSnapshot SitesReason = "snapshot" // memrec.snapshot()
	SitesWindow   SitesReason = "window"   // the end of a trace window
	SitesTrack    SitesReason = "track"    // the end of a memrec.track block
	SitesTrace    SitesReason = "trace"    // rebuilt from an imported snapshot's trace
)

// String is the reason as the "sites" line spells it.
func (r SitesReason) String() string { return string(r) }

// SiteSample is one allocation site in one snapshot of a process's
// allocator on one GPU: the live blocks that a line of code allocated, and
// what it allocated and freed during the snapshot's window. A snapshot is
// the SiteSamples of one (T, GPU, PID); it always has a SiteUntracked entry,
// so a snapshot without sites is still seen.
type SiteSample struct {
	T       int64
	GPU     int
	PID     int
	Rank    int         // None if absent
	Reason  SitesReason // why the snapshot was taken
	Epoch   int         // None if absent
	Name    string      // the snapshot's or the tracked block's name; "" if none
	SinceNS int64       // start of the window Alloc* and Freed* count; 0 without a trace
	// SampledEvery is N when the history kept stacks on one step in N
	// only (on average, since the previous snapshot; blocks of the other
	// steps are untracked); 0 or 1: every step. Kept to three decimals.
	SampledEvery float64
	File         string // the site's file, or SiteUntracked or SiteOther
	Line         int
	Func         string
	Stack        string // callers, innermost first, one "file:line func" a line
	// LiveBytes and LiveBlocks are the site's blocks alive in the snapshot.
	LiveBytes, LiveBlocks int64
	// AllocBytes, Allocs, FreedBytes, Frees count the trace's events of
	// the site since SinceNS.
	AllocBytes, Allocs, FreedBytes, Frees int64
	Sites                                 int64 // SiteOther only: how many sites it adds up
	Bad                                   int64 // SiteUntracked only: snapshot entries that made no sense, dropped
}

// Label is how a site is shown: "train.py:52", or the special file.
func (s SiteSample) Label() string {
	if s.File == SiteUntracked || s.File == SiteOther || s.Line == 0 && len(s.File) > 1 && s.File[0] == '<' {
		return s.File // the special entries, and memrec.watch's categories ("<optimizer state>")
	}
	base := s.File
	for i := len(base) - 1; i >= 0; i-- {
		if base[i] == '/' || base[i] == '\\' {
			base = base[i+1:]
			break
		}
	}
	return base + ":" + strconv.Itoa(s.Line)
}

// Key identifies the site across snapshots (file and line).
func (s SiteSample) Key() string { return s.File + ":" + strconv.Itoa(s.Line) }
