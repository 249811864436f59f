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
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	st := s.Run(ctx)
	if !st.Native || len(errs) > 0 || st.Errors > 0 {
		t.Fatalf("native %v, errors %v (%+v)", st.Native, errs, st)
	}
	// A loaded test machine may miss ticks; what matters is that the
	// accounting adds up.
	if st.Ticks < 100 || st.Samples != 2*st.Ticks || int64(len(sink.dev)) != st.Samples {
		t.Fatalf("%d ticks, %d samples, %d stored", st.Ticks, st.Samples, len(sink.dev))
	}
	if d := st.Elapsed - 300*time.Millisecond; d < 0 || d > 150*time.Millisecond {
		t.Errorf("elapsed %v", st.Elapsed)
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
	if l := int64(len(lists)); l < 2*st.Ticks/60 || l > 2*st.Ticks/20 {
		t.Errorf("%d process lists in %d ticks of 2 GPUs", l, st.Ticks)
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
