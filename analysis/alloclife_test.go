package analysis

import (
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// A process that died (an OOM at 1.9 s) has no allocator view after it:
// the epochs other ranks mark later show no allocated figure for its GPU,
// not its last value carried over them; the device view goes on.
func TestAllocatorViewEndsWithTheProcess(t *testing.T) {
	g := &analysistest.Gen{}
	g.Line(`{"type":"run","name":"r","start_ns":%d}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(24*GiB))
	for ep := range 5 { // epochs of 2 s
		s := t0 + int64(ep)*2e9
		g.Line(`{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":%d}`, s, ep)
		g.Line(`{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":%d}`, s+2e9-1, ep)
	}
	for i := range 100 { // device samples every 100 ms, all along
		used := int64(20 * GiB)
		if i >= 20 {
			used = 3 << 20 // the process is gone
		}
		g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`, t0+int64(i)*1e8+5, used)
	}
	for i := range 20 { // allocator samples until the process dies
		g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d}`, t0+int64(i)*1e8+7, int64(16*GiB)+int64(i)*(64<<20), int64(18*GiB))
	}
	rep := analyzeJSONL(t, g.String())["r"]
	ep := rep.GPUs[0].Epochs
	if len(ep) != 5 {
		t.Fatalf("%d epochs", len(ep))
	}
	// Epoch 0 ends at a floor of its last slices: one of the process's
	// samples, not a value from after it died.
	if e := ep[0].AllocatedEndBytes; e == nil || *e < int64(16*GiB) || *e > int64(16*GiB)+19*(64<<20) || (*e-int64(16*GiB))%(64<<20) != 0 {
		t.Errorf("epoch 0 ends with allocated %v, want one of the process's samples", deref64(ep[0].AllocatedEndBytes))
	}
	for _, e := range ep[1:] {
		if e.AllocatedStartBytes != nil && e.Epoch > 1 || e.AllocatedEndBytes != nil || e.DeltaAllocatedBytes != nil {
			t.Errorf("epoch %d: allocated %v to %v after the process died", e.Epoch, deref64(e.AllocatedStartBytes), deref64(e.AllocatedEndBytes))
		}
		if e.UsedEndBytes == nil || *e.UsedEndBytes != 3<<20 {
			t.Errorf("epoch %d: device used at the end %v, want 3 MiB", e.Epoch, deref64(e.UsedEndBytes))
		}
	}
}

// Two processes on one GPU: once one has sent nothing for allocatorLife,
// the GPU's sums are the other's alone.
func TestAllocatorSumsRetireAGoneProcess(t *testing.T) {
	s := &allocSum{last: map[int]*storage.TorchSample{}, firstRetries: -1}
	s.add(torchAt(0, 1, 10, 20))
	s.add(torchAt(0, 2, 5, 6))
	if s.cur.allocated != 15 || s.cur.reserved != 26 {
		t.Fatalf("sums %+v", s.cur)
	}
	s.add(torchAt(allocatorLife+1, 2, 7, 8)) // pid 1 silent since 0
	if s.cur.allocated != 7 || s.cur.reserved != 8 {
		t.Errorf("sums %+v after pid 1 went quiet, want pid 2's alone", s.cur)
	}
	s.add(torchAt(allocatorLife+2, 1, 3, 4)) // pid 1 back: counted anew
	if s.cur.allocated != 10 || s.cur.reserved != 12 {
		t.Errorf("sums %+v after pid 1 came back", s.cur)
	}
}

func torchAt(t int64, pid int, allocated, reserved int64) *storage.TorchSample {
	return &storage.TorchSample{T: t, PID: pid, Allocated: allocated, Reserved: reserved}
}

// Two ranks of a data-parallel job share one GPU: the GPU's step peak, the
// basis of compare --by's and fit's projections, is the sum of the two
// processes' step peaks, not the larger of them, and so is each step's.
func TestStepPeakSumsTheProcesses(t *testing.T) {
	g := &analysistest.Gen{}
	g.Line(`{"type":"run","name":"r","start_ns":%d}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"total_bytes":%d}`, int64(140*GiB))
	for step := range 20 { // a step every 100 ms; each rank reports its peak at the step's end
		end := t0 + int64(step+1)*1e8
		for r, pid := range []int{7, 8} {
			peak := int64(30*GiB) + int64(r)*int64(4*GiB)
			g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":%d,"rank":%d,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d}`,
				end+int64(r), pid, r, int64(2*GiB), int64(36*GiB), peak)
		}
		g.Line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d,"rank":0}`, end+5, step)
	}
	rep := analyzeJSONL(t, g.String())["r"]
	gr := rep.GPUs[0]
	if want := int64(64 * GiB); gr.PeakStepBytes == nil || *gr.PeakStepBytes != want {
		t.Errorf("step peak %v, want the two ranks' %d", deref64(gr.PeakStepBytes), want)
	}
	if gr.SharedBy != 2 {
		t.Errorf("shared by %d processes, want 2", gr.SharedBy)
	}
	for _, p := range gr.StepPeaks[1:] {
		if p.Bytes != int64(64*GiB) {
			t.Errorf("step %v: peak %d, want 64 GiB", p.X, p.Bytes)
		}
	}
}
