package analysistest

import (
	"encoding/json"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/storage"
)

// FragmentingTrace is the allocator trace of a job at batch b whose
// allocator strands room by default: per step a block of 6b MiB freed, then 2b, 3b and 4.5b MiB
// taken and freed. By default step 1 takes a segment A of 6b and, for the
// 4.5b, B of 4.5b; step 2's 2b goes to B (the smallest free block that
// holds it), its 3b to A, and its 4.5b fits in neither: a third segment of
// 4.5b. So the default holds 15b MiB of segments for 9.5b MiB of live
// blocks. With expandable segments the three live blocks lie end to end
// from the start of the range each step, on 20 MiB pages.
func FragmentingTrace(b int64) storage.AllocTrace {
	var ops []storage.AllocOp
	alloc := func(n int64) int32 { ops = append(ops, storage.AllocOp{Size: n}); return int32(len(ops) - 1) }
	free := func(i int32) { ops = append(ops, storage.AllocOp{Free: true, Of: i}) }
	for range 3 {
		free(alloc(6 * b << 20))
		x, y, z := alloc(2*b<<20), alloc(3*b<<20), alloc(9*b<<19)
		free(z)
		free(y)
		free(x)
	}
	return storage.AllocTrace{Steps: 3, Ops: ops}
}

// TracedRun writes a probe run named prefix+value, tagged tag=value, on an
// 80 GiB GPU (600 MiB reserved by the driver, 700 MiB unseen), whose steps
// peak at peak bytes allocated, with the allocator trace tr.
func (g *Gen) TracedRun(prefix, tag string, value int64, tr storage.AllocTrace, peak int64) {
	r, _ := replay.ReplayAllocator(tr.Ops, 0)
	tr.PID, tr.SegmentBytes, tr.Segments = 1, r.PeakReserved, r.Segments
	g.Line(`{"type":"run","name":"%s%d","start_ns":%d,"interval_ns":10000000,"tags":{"%s":"%d"}}`, prefix, value, Start, tag, value)
	g.Line(`{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`, int64(80*GiB))
	for i := range 10 {
		at := Start + int64(i)*100e6
		g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d,"reserved_bytes":%d}`, at-5e6, r.PeakReserved+700*MiB, 600*MiB)
		g.Line(`{"type":"mark","t_ns":%d,"kind":"step","step":%d}`, at, i)
		g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":1,"allocated_bytes":%d,"reserved_bytes":%d,"peak_allocated_bytes":%d,"alloc_retries":0}`,
			at, 100*MiB, r.PeakReserved, peak)
	}
	for _, m := range tr.Marks(Start + 2e9) {
		text, _ := json.Marshal(m.Text)
		g.Line(`{"type":"mark","t_ns":%d,"kind":"alloc_trace","gpu":0,"pid":1,"text":%s}`, m.T, text)
	}
}
