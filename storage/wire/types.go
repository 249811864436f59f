package wire

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
