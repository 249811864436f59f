package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memrec/memrec/testsupport/analysistest"
)

// oomRun writes a run of one GPU sampled every 10 ms (so two views pair
// within 20 ms) with one fatal OOM at t0 + 5 s: device samples and
// allocator samples at the given offsets from the OOM (ms) with their
// values, then an exit with code 1.
func oomRun(name string, dev map[float64]int64, alloc map[float64][2]int64) string {
	var b strings.Builder
	oom := t0 + 5e9
	fmt.Fprintf(&b, `{"type":"run","name":%q,"start_ns":%d,"end_ns":%d,"interval_ns":10000000}`+"\n", name, t0, oom+2e9)
	fmt.Fprintf(&b, `{"type":"gpu","gpu":0,"total_bytes":%d}`+"\n", int64(80*GiB))
	for off, used := range dev {
		fmt.Fprintf(&b, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", oom+int64(off*1e6), used)
	}
	for off, ar := range alloc {
		fmt.Fprintf(&b, `{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d,"active_bytes":%d}`+"\n",
			oom+int64(off*1e6), ar[0], ar[1], ar[0])
	}
	fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"oom","gpu":0,"pid":7,"text":"CUDA out of memory. Tried to allocate 4.00 GiB on GPU 0 (1.00 GiB free of 80.00 GiB)"}`+"\n", oom)
	fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"exit","code":1}`+"\n", oom+1e9)
	return b.String()
}

// TestOOMViewsPairedAtTheMoment checks that the figures at an OOM come from
// each view's sample nearest to it, within the tolerance (two device
// intervals, 20 ms), and that what combines the views (device used −
// reserved) is left out, with the reason, when the samples are of other
// moments, and is never negative.
func TestOOMViewsPairedAtTheMoment(t *testing.T) {
	// The probe's sample in the OOM observer, just after the mark:
	// 18 GiB allocated, 19 GiB reserved.
	atOOM := map[float64][2]int64{-2000: {2 * GiB, 3 * GiB}, 0.02: {18 * GiB, 19 * GiB}}
	reps := analyzeJSONL(t,
		// close: the device sample before the OOM (9 ms) is from before
		// the job's last allocations (10 GiB); the one 1 ms after it sees
		// them (20 GiB) and is the nearest: 1 GiB not seen by PyTorch.
		oomRun("close", map[float64]int64{-1000: 10 * GiB, -9: 10 * GiB, 1: 20 * GiB, 11: 20 * GiB}, atOOM)+
			// far: no device sample within 500 ms of the OOM (the recorder
			// missed ticks); the last one before it, at 10 GiB, would give
			// 10 − 19 = −9 GiB not seen by PyTorch.
			oomRun("far", map[float64]int64{-1000: 10 * GiB, -500: 10 * GiB, 500: 20 * GiB}, atOOM)+
			// stale allocator: its last sample 2 s before the OOM, nothing
			// after: allocated, reserved and the cache advice are left out.
			oomRun("stale", map[float64]int64{-9: 10 * GiB, 1: 20 * GiB}, map[float64][2]int64{-2000: {2 * GiB, 3 * GiB}}))

	o := reps["close"].GPUs[0].OOMs[0]
	if o.Outcome != OOMFatal || o.UsedBytes == nil || *o.UsedBytes != 20*GiB || o.UsedTNS == nil || *o.UsedTNS != o.TNS+1e6 {
		t.Fatalf("close: used %v at %v, want 20 GiB from the sample 1 ms after the OOM (%s)", analysistest.Deref(o.UsedBytes), analysistest.Deref(o.UsedTNS), o.Outcome)
	}
	if o.AllocatedBytes == nil || *o.AllocatedBytes != 18*GiB || *o.ReservedBytes != 19*GiB || o.UnseenBytes == nil || *o.UnseenBytes != GiB {
		t.Fatalf("close: allocated %v, reserved %v, unseen %v; want 18, 19 and 1 GiB", analysistest.Deref(o.AllocatedBytes), analysistest.Deref(o.ReservedBytes), analysistest.Deref(o.UnseenBytes))
	}
	if o.CachedFreeBytes == nil || *o.CachedFreeBytes != GiB || o.PairToleranceNS != 20e6 || len(o.LeftOut) != 0 {
		t.Fatalf("close: cached free %v, tolerance %d, left out %q", analysistest.Deref(o.CachedFreeBytes), o.PairToleranceNS, o.LeftOut)
	}

	o = reps["far"].GPUs[0].OOMs[0]
	if o.UsedBytes != nil || o.UnseenBytes != nil {
		t.Fatalf("far: used %v, unseen %v from a device sample 500 ms away", analysistest.Deref(o.UsedBytes), analysistest.Deref(o.UnseenBytes))
	}
	if len(o.LeftOut) != 1 || !strings.Contains(o.LeftOut[0], "500.0 ms from the OOM") {
		t.Fatalf("far: left out %q, want the device sample 500 ms away named", o.LeftOut)
	}
	if o.AllocatedBytes == nil || *o.AllocatedBytes != 18*GiB || o.CacheWouldHelp == nil {
		t.Fatalf("far: the allocator's figures (%v) and the advice made of them and the message (%v) need no device sample",
			analysistest.Deref(o.AllocatedBytes), o.CacheWouldHelp)
	}

	o = reps["stale"].GPUs[0].OOMs[0]
	if o.AllocatedBytes != nil || o.ReservedBytes != nil || o.CachedFreeBytes != nil || o.CacheWouldHelp != nil || o.UnseenBytes != nil {
		t.Fatalf("stale: allocated %v, reserved %v, cached free %v, unseen %v from an allocator sample 2 s before the OOM",
			analysistest.Deref(o.AllocatedBytes), analysistest.Deref(o.ReservedBytes), analysistest.Deref(o.CachedFreeBytes), analysistest.Deref(o.UnseenBytes))
	}
	if o.UsedBytes == nil || *o.UsedBytes != 20*GiB || len(o.LeftOut) != 1 || !strings.Contains(o.LeftOut[0], "2000.0 ms from the OOM") {
		t.Fatalf("stale: used %v, left out %q", analysistest.Deref(o.UsedBytes), o.LeftOut)
	}
	// Whatever was paired, nothing made of two views is negative.
	for name, r := range reps {
		for _, o := range r.GPUs[0].OOMs {
			if o.UnseenBytes != nil && *o.UnseenBytes < 0 || o.CachedFreeBytes != nil && *o.CachedFreeBytes < 0 {
				t.Errorf("%s: unseen %v, cached free %v", name, analysistest.Deref(o.UnseenBytes), analysistest.Deref(o.CachedFreeBytes))
			}
		}
	}
}

// TestOOMUnseenNeverNegative pairs a device sample below the allocator's
// reserved, within the tolerance (a device reading from before the
// allocator's segment was counted): left out, with the reason, not printed
// as a negative amount.
func TestOOMUnseenNeverNegative(t *testing.T) {
	reps := analyzeJSONL(t, oomRun("below", map[float64]int64{-3: 10 * GiB, 30: 20 * GiB}, map[float64][2]int64{0.02: {18 * GiB, 19 * GiB}}))
	o := reps["below"].GPUs[0].OOMs[0]
	if o.UsedBytes == nil || *o.UsedBytes != 10*GiB || o.UnseenBytes != nil {
		t.Fatalf("used %v, unseen %v; want 10 GiB and nothing", analysistest.Deref(o.UsedBytes), analysistest.Deref(o.UnseenBytes))
	}
	if len(o.LeftOut) != 1 || !strings.Contains(o.LeftOut[0], "9.00 GiB below reserved") {
		t.Fatalf("left out %q", o.LeftOut)
	}
}
