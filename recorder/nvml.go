package recorder

import (
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/memrec/memrec/storage"
)

// ErrNoDriver means NVML could not be loaded: no NVIDIA driver here.
var ErrNoDriver = errors.New("no NVIDIA driver found (NVML could not be loaded); on a machine without a GPU use --source sim")

// NVML reads GPU memory through NVML. It is safe for concurrent use by one
// sampler; Close it when done.
type NVML struct {
	lib     nvml.Interface
	devices []nvml.Device
	gpus    []storage.GPU
	noV2    []bool // GetMemoryInfo_v2 unsupported: use GetMemoryInfo
	driver  string
	procBuf []nvml.ProcessInfo
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
// GetMemoryInfo where v2 is not supported, and GetComputeRunningProcesses.
func (n *NVML) Read(gpu int, _ time.Time, procs bool, r *Reading) error {
	if gpu < 0 || gpu >= len(n.devices) {
		return fmt.Errorf("GPU %d: no such device", gpu)
	}
	d := n.devices[gpu]
	total := uint64(n.gpus[gpu].TotalBytes)
	r.Procs, r.Invalid = r.Procs[:0], 0
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
	if used > total && total > 0 || reserved > total && total > 0 {
		r.Invalid++
		return errInvalid
	}
	r.Used, r.Reserved = int64(used), int64(reserved)
	if !procs {
		return nil
	}
	ps, ret := d.GetComputeRunningProcesses()
	if ret != nvml.SUCCESS {
		if ret == nvml.ERROR_NOT_SUPPORTED {
			return nil
		}
		return fmt.Errorf("GPU %d processes: %w", gpu, ret)
	}
	for _, p := range ps {
		// go-nvml can return garbage entries when several processes share a
		// GPU (struct version mismatches): pid 0, "not available", or more
		// than the GPU holds. Drop and count them.
		if p.Pid == 0 || p.UsedGpuMemory == notAvailable || (total > 0 && p.UsedGpuMemory > total) {
			r.Invalid++
			continue
		}
		r.Procs = append(r.Procs, Proc{PID: int(p.Pid), Used: int64(p.UsedGpuMemory)})
	}
	return nil
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
