//go:build linux && cgo

package recorder

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/memrec/memrec/storage"
)

// fakeNVML compiles testdata/fakenvml.c into a shared library.
func fakeNVML(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build the fake NVML library")
	}
	lib := filepath.Join(t.TempDir(), "libnvidia-ml-fake.so")
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", lib, "testdata/fakenvml.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	return lib
}

// TestNativeLoop samples the fake library's two GPUs at 1 ms on the native
// thread for 300 ms, and checks every reading against what it reports.
func TestNativeLoop(t *testing.T) {
	n, err := OpenNVML(fakeNVML(t))
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if gpus, _ := n.GPUs(); len(gpus) != 2 || gpus[1].UUID != "GPU-fake-1" || gpus[0].TotalBytes != 80<<30 || n.Driver() != "fake-1.0" {
		t.Fatalf("identity: %+v %q", gpus, n.Driver())
	}
	sink := &memSink{}
	var errs []error
	s := &Sampler{Source: n, GPUs: []int{0, 1}, Interval: time.Millisecond, Procs: true, ProcsEvery: 50 * time.Millisecond,
		Clock: RealClock{}, Sink: sink, OnError: func(err error) { errs = append(errs, err) }}
	// It runs until 100 ticks reached the sink (a drain a second), however
	// slow a loaded machine makes that; the deadline only ends a hang.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		defer cancel()
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			sink.mu.Lock()
			n := len(sink.dev)
			sink.mu.Unlock()
			if n >= 200 {
				return
			}
		}
	}()
	start := time.Now()
	st := s.Run(ctx)
	wall := time.Since(start)
	if !st.Native || len(errs) > 0 || st.Errors > 0 {
		t.Fatalf("native %v, errors %v (%+v)", st.Native, errs, st)
	}
	// A loaded test machine may miss ticks; what matters is that the
	// accounting adds up.
	if st.Ticks < 100 || st.Samples != 2*st.Ticks || int64(len(sink.dev)) != st.Samples {
		t.Fatalf("%d ticks, %d samples, %d stored (in %v)", st.Ticks, st.Samples, len(sink.dev), wall)
	}
	// Tick k is due k intervals after the loop's start, so the ticks taken
	// and missed fit in the time Run took.
	if st.Elapsed <= 0 || st.Elapsed > wall || time.Duration(st.Ticks+st.Missed-1)*s.Interval > wall {
		t.Errorf("elapsed %v, %d ticks and %d missed of %v, in %v", st.Elapsed, st.Ticks, st.Missed, s.Interval, wall)
	}
	// Each GPU's used memory is 2 MiB more every 100 queries. Where the
	// series starts within its first 100 depends on the queries made before
	// (go-nvml's calls bind to the first fake library loaded in the process).
	used := map[[2]int64]int64{} // (gpu, t) → used
	byGPU := [2][]storage.DeviceSample{}
	var lastT int64
	for _, d := range sink.dev {
		if d.T < lastT {
			t.Fatal("time went back")
		}
		lastT = d.T
		byGPU[d.GPU] = append(byGPU[d.GPU], d)
		used[[2]int64{int64(d.GPU), d.T}] = d.Used
	}
	for g, ds := range byGPU {
		first := 0
		for first < len(ds) && ds[first].Used == ds[0].Used {
			first++
		}
		for i, d := range ds {
			want := ds[0].Used + int64((i+100-first)/100)*(2<<20)
			if d.Used != want || (d.Used-1<<30)%(2<<20) != 0 {
				t.Fatalf("GPU %d sample %d: used %d, want %d", g, i, d.Used, want)
			}
			if (g == 0 && d.Reserved != 512<<20) || (g == 1 && d.Reserved != 0) { // GPU 1 has no Memory_v2
				t.Fatalf("GPU %d sample %d: reserved %d", g, i, d.Reserved)
			}
		}
	}
	// Process lists: at the first tick, when used memory moved (every 100
	// ticks) and every 50 ms between: a few percent of the ticks.
	lists := map[[2]int64]bool{}
	for _, p := range sink.procs {
		u, ok := used[[2]int64{int64(p.GPU), p.T}]
		if !ok || p.PID != 4000+p.GPU || p.Used != u-256<<20 {
			t.Fatalf("process sample %+v, device used %d", p, u)
		}
		lists[[2]int64{int64(p.GPU), p.T}] = true
	}
	// At most: the first, one each 50 ms and one per move (every 100
	// queries; twice that allowed for the process queries) per GPU.
	if l := int64(len(lists)); l < 2*st.Ticks/60 || l > 2*(2+int64(wall/(50*time.Millisecond))+st.Ticks/50) {
		t.Errorf("%d process lists in %d ticks of 2 GPUs in %v", l, st.Ticks, wall)
	}
	// GPU 1's garbage entry (pid 0) is dropped and counted at each list.
	if st.Invalid != int64(len(lists))/2 && st.Invalid != int64(len(lists)+1)/2 {
		t.Errorf("invalid %d, lists %d", st.Invalid, len(lists))
	}
}

// TestNativeLoopOnlyForOpenedLibrary: a source made from an nvml.Interface
// (a mock) samples from Go; so does GoLoop.
func TestNativeLoopOnlyForOpenedLibrary(t *testing.T) {
	n, err := NewNVML(newDGX(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.startLoop([]int{0}, time.Millisecond, false, 0); err != errNoLoop {
		t.Fatalf("mock: %v", err)
	}
	o, err := OpenNVML(fakeNVML(t))
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	if _, err := o.startLoop([]int{5}, time.Millisecond, false, 0); err == nil {
		t.Fatal("GPU 5 accepted")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	st := (&Sampler{Source: o, GPUs: []int{0}, Interval: time.Millisecond, Clock: RealClock{}, Sink: &memSink{}, GoLoop: true}).Run(ctx)
	if st.Native || st.Samples == 0 {
		t.Fatalf("GoLoop: %+v", st)
	}
}
