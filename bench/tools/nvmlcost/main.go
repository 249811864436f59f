// Command nvmlcost measures the CPU cost of each NVML query memrec makes,
// called back to back on GPU 0: wall time and CPU time per call.
package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

func main() {
	n := flag.Int("n", 50000, "calls per query")
	flag.Parse()
	lib := nvml.New()
	if ret := lib.Init(); ret != nvml.SUCCESS {
		fmt.Fprintln(os.Stderr, "NVML:", ret)
		os.Exit(1)
	}
	d, _ := lib.DeviceGetHandleByIndex(0)
	for _, q := range []struct {
		name string
		f    func()
	}{
		{"GetMemoryInfo_v2", func() { d.GetMemoryInfo_v2() }},
		{"GetMemoryInfo", func() { d.GetMemoryInfo() }},
		{"GetComputeRunningProcesses", func() { d.GetComputeRunningProcesses() }},
	} {
		var r0, r1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
		t0 := time.Now()
		for i := 0; i < *n; i++ {
			q.f()
		}
		wall := time.Since(t0)
		syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		cpu := time.Duration(r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano())
		sys := time.Duration(r1.Stime.Nano() - r0.Stime.Nano())
		fmt.Printf("%-28s %6.2f µs wall, %6.2f µs CPU (%5.2f in the kernel) per call\n", q.name,
			float64(wall.Nanoseconds())/float64(*n)/1e3, float64(cpu.Nanoseconds())/float64(*n)/1e3, float64(sys.Nanoseconds())/float64(*n)/1e3)
	}
}
