package recorder

import (
	"time"

	"github.com/memrec/memrec/storage"
)

// Source is what the sampler reads from: the GPUs of one machine. NVML and
// the simulator implement it; tests use go-nvml's mocks behind NVML.
type Source interface {
	// GPUs lists every GPU the source can see, by index.
	GPUs() ([]storage.GPU, error)
	// Driver is the driver version, "" if unknown.
	Driver() string
	// Read reads one GPU's memory at time t into r.Used and r.Reserved. A
	// reading that makes no sense is counted in r.Invalid and returned as
	// errInvalid.
	Read(gpu int, t time.Time, r *Reading) error
	// ReadProcs lists the processes using the GPU at time t into r.Procs
	// (reusing it). Entries that make no sense are left out and counted in
	// r.Invalid.
	ReadProcs(gpu int, t time.Time, r *Reading) error
	// Close releases the source.
	Close() error
}

// Reading is one GPU's memory at one tick.
type Reading struct {
	Used     int64
	Reserved int64 // driver-reserved (Memory_v2); 0 if not supported
	Procs    []Proc
	Invalid  int // values dropped as nonsense in this reading (Read and ReadProcs reset it)
}

// Proc is one process's memory on a GPU.
type Proc struct {
	PID  int
	Used int64
}

// ProcNamer is a Source that can name the processes it lists (the live
// metrics' process_name label). ProcName returns "" for a process it does
// not know.
type ProcNamer interface {
	ProcName(pid int) string
}

// EventSource is a Source that also produces what a probe inside the
// training job would send: marks and allocator samples. The simulator is
// one. Emit sends everything that happened up to t.
type EventSource interface {
	Emit(t time.Time, sink Sink)
}

// Sink receives what the recorder takes. storage.Appender is one. Its
// methods must be safe for concurrent use and must not block on disk.
type Sink interface {
	AppendDevice(storage.DeviceSample) error
	AppendProc(storage.ProcSample) error
	AppendTorch(storage.TorchSample) error
	AppendMark(storage.Mark) error
	// AppendSites stores one site snapshot (all its rows, or none).
	AppendSites([]storage.SiteSample) error
	// AppendBudget stores the budget a torch line carried (memrec.watch),
	// after that line's allocator sample.
	AppendBudget(storage.BudgetSample) error
}
