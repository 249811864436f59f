package recorder

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/memrec/memrec/storage"
)

// ErrNoDriver means NVML could not be loaded: no NVIDIA driver here.
var ErrNoDriver = errors.New("no NVIDIA driver found (NVML could not be loaded)")

// NVML reads GPU memory through NVML. It is safe for concurrent use by one
// sampler; Close it when done.
type NVML struct {
	lib     nvml.Interface
	devices []nvml.Device
	gpus    []storage.GPU
	noV2    []bool // GetMemoryInfo_v2 unsupported: use GetMemoryInfo
	driver  string
	// path is the library file when opened by OpenNVML: sampling can then
	// run on a native thread that calls it directly.
	path string
}

// DefaultNVMLPath is the driver's NVML library.
const DefaultNVMLPath = "libnvidia-ml.so.1"

// OpenNVML loads the NVML library at path (DefaultNVMLPath for the
// driver's) and opens it as NewNVML does. A sampler reading a source opened
// this way samples on a native thread, outside the Go runtime.
func OpenNVML(path string) (*NVML, error) {
	n, err := NewNVML(nvml.New(nvml.WithLibraryPath(path)))
	if err != nil {
		return nil, err
	}
	n.path = path
	return n, nil
}

// NewNVML initialises lib (nvml.New() for the real library) and reads the
// identity of every GPU. Without a driver it returns ErrNoDriver.
func NewNVML(lib nvml.Interface) (*NVML, error) {
	if ret := lib.Init(); ret != nvml.SUCCESS {
		if ret == nvml.ERROR_LIBRARY_NOT_FOUND || ret == nvml.ERROR_DRIVER_NOT_LOADED {
			return nil, fmt.Errorf("%w: %w", ErrNoDriver, ret)
		}
		return nil, fmt.Errorf("NVML init: %w", ret)
	}
	n := &NVML{lib: lib}
	if v, ret := lib.SystemGetDriverVersion(); ret == nvml.SUCCESS {
		n.driver = v
	}
	count, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		lib.Shutdown()
		return nil, fmt.Errorf("NVML device count: %w", ret)
	}
	for i := 0; i < count; i++ {
		d, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			lib.Shutdown()
			return nil, fmt.Errorf("NVML device %d: %w", i, ret)
		}
		g := storage.GPU{Index: i}
		if u, ret := d.GetUUID(); ret == nvml.SUCCESS {
			g.UUID = u
		}
		if name, ret := d.GetName(); ret == nvml.SUCCESS {
			g.Name = name
		}
		if m, ret := d.GetMemoryInfo(); ret == nvml.SUCCESS {
			g.TotalBytes = int64(m.Total)
		}
		if p, ret := d.GetPciInfo(); ret == nvml.SUCCESS {
			g.PCIBusID = cString(p.BusId[:])
		}
		if m, ret := d.GetMinorNumber(); ret == nvml.SUCCESS {
			g.Device = "nvidia" + strconv.Itoa(m)
		}
		n.devices = append(n.devices, d)
		n.gpus = append(n.gpus, g)
		n.noV2 = append(n.noV2, false)
	}
	return n, nil
}

// GPUs implements Source.
func (n *NVML) GPUs() ([]storage.GPU, error) { return n.gpus, nil }

// Driver implements Source.
func (n *NVML) Driver() string { return n.driver }

// notAvailable is NVML's NVML_VALUE_NOT_AVAILABLE for 64-bit values.
const notAvailable = ^uint64(0)

// Read implements Source: GetMemoryInfo_v2 (used, reserved), falling back to
// GetMemoryInfo where v2 is not supported.
func (n *NVML) Read(gpu int, _ time.Time, r *Reading) error {
	if gpu < 0 || gpu >= len(n.devices) {
		return fmt.Errorf("GPU %d: no such device", gpu)
	}
	d := n.devices[gpu]
	r.Invalid = 0
	var used, reserved uint64
	if !n.noV2[gpu] {
		m, ret := d.GetMemoryInfo_v2()
		switch ret {
		case nvml.SUCCESS:
			used, reserved = m.Used, m.Reserved
		case nvml.ERROR_NOT_SUPPORTED, nvml.ERROR_FUNCTION_NOT_FOUND, nvml.ERROR_ARGUMENT_VERSION_MISMATCH:
			n.noV2[gpu] = true
		default:
			return fmt.Errorf("GPU %d memory: %w", gpu, ret)
		}
	}
	if n.noV2[gpu] {
		m, ret := d.GetMemoryInfo()
		if ret != nvml.SUCCESS {
			return fmt.Errorf("GPU %d memory: %w", gpu, ret)
		}
		used = m.Used
	}
	if !n.sane(gpu, used) || !n.sane(gpu, reserved) {
		r.Invalid++
		return errInvalid
	}
	r.Used, r.Reserved = int64(used), int64(reserved)
	return nil
}

// ReadProcs implements Source with GetComputeRunningProcesses. A GPU that
// does not support it lists no processes.
func (n *NVML) ReadProcs(gpu int, _ time.Time, r *Reading) error {
	if gpu < 0 || gpu >= len(n.devices) {
		return fmt.Errorf("GPU %d: no such device", gpu)
	}
	r.Procs, r.Invalid = r.Procs[:0], 0
	ps, ret := n.devices[gpu].GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		if ret == nvml.ERROR_NOT_SUPPORTED {
			return nil
		}
		return fmt.Errorf("GPU %d processes: %w", gpu, ret)
	}
	for _, p := range ps {
		if !n.saneProc(gpu, p.Pid, p.UsedGpuMemory) {
			r.Invalid++
			continue
		}
		r.Procs = append(r.Procs, Proc{PID: int(p.Pid), Used: int64(p.UsedGpuMemory)})
	}
	return nil
}

// sane says whether a byte count can be true of the GPU: no more than it
// holds.
func (n *NVML) sane(gpu int, bytes uint64) bool {
	total := uint64(n.gpus[gpu].TotalBytes)
	return total == 0 || bytes <= total
}

// saneProc says whether a process entry can be true. go-nvml can return
// garbage entries when several processes share a GPU (struct version
// mismatches): pid 0, "not available", or more than the GPU holds.
func (n *NVML) saneProc(gpu int, pid uint32, used uint64) bool {
	return pid != 0 && used != notAvailable && n.sane(gpu, used)
}

// startLoop implements loopSource: a native loop over the library's own
// symbols, which checks readings as Read and ReadProcs do.
func (n *NVML) startLoop(gpus []int, interval time.Duration, procs bool, procsEvery time.Duration) (sampleLoop, error) {
	if n.path == "" {
		return nil, errNoLoop
	}
	for _, g := range gpus {
		if g < 0 || g >= len(n.devices) {
			return nil, fmt.Errorf("GPU %d: no such device", g)
		}
	}
	l, err := startNativeLoop(n.path, gpus, interval, procs, procsEvery)
	if err != nil {
		return nil, err
	}
	return &nvmlLoop{n: n, l: l}, nil
}

// nvmlLoop turns the native loop's raw records into checked readings.
type nvmlLoop struct {
	n *NVML
	l *nativeLoop
}

func (l *nvmlLoop) drain(f func(loopRecord)) int64 { return l.l.drain(l.check(f)) }

func (l *nvmlLoop) stop(f func(loopRecord)) int64 { return l.l.stop(l.check(f)) }

// check returns a function that checks a native record and hands it to f.
func (l *nvmlLoop) check(f func(loopRecord)) func(nativeRecord) {
	return func(r nativeRecord) {
		g := r.GPU
		switch r.Kind {
		case nativeTick:
			f(loopRecord{Kind: loopTick, T: r.T, Late: time.Duration(r.A)})
		case nativeMissed:
			f(loopRecord{Kind: loopMissed, T: r.T, Count: r.A})
		case nativeDevice:
			if !l.n.sane(g, uint64(r.A)) || !l.n.sane(g, uint64(r.B)) {
				f(loopRecord{Kind: loopInvalid, GPU: g, T: r.T})
				return
			}
			f(loopRecord{Kind: loopDevice, GPU: g, T: r.T, Used: r.A, Reserved: r.B})
		case nativeProc:
			if !l.n.saneProc(g, uint32(r.A), uint64(r.B)) {
				f(loopRecord{Kind: loopInvalid, GPU: g, T: r.T})
				return
			}
			f(loopRecord{Kind: loopProc, GPU: g, T: r.T, PID: int(r.A), Used: r.B})
		case nativeMemErr:
			f(loopRecord{Kind: loopFailed, GPU: g, T: r.T, Err: fmt.Errorf("GPU %d memory: %w", g, nvml.Return(r.A))})
		case nativeProcErr:
			f(loopRecord{Kind: loopFailed, GPU: g, T: r.T, Err: fmt.Errorf("GPU %d processes: %w", g, nvml.Return(r.A))})
		}
	}
}

// errInvalid is returned by Read for a reading dropped as nonsense.
var errInvalid = errors.New("reading makes no sense; dropped")

// Close implements Source.
func (n *NVML) Close() error {
	if ret := n.lib.Shutdown(); ret != nvml.SUCCESS {
		return fmt.Errorf("NVML shutdown: %w", ret)
	}
	return nil
}

// cString is a NUL-terminated C char array as a string.
func cString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}

// ProcName implements ProcNamer: the command name of process pid
// (/proc/PID/comm, as ps and nvidia-smi show it), "" where it cannot be
// read. NVML lists processes by their pid in the host's namespace: inside a
// container with a PID namespace of its own the recorder must run beside
// the job (memrec record -- CMD) for the names to be the job's.
func (n *NVML) ProcName(pid int) string {
	if pid <= 0 {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(string(b), "\n")
}
