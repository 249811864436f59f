package analysis

import (
	"math/rand/v2"
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// A GPU with one allocator process sums its samples as columns (addOne);
// a GPU with several, as rows (add). Given one process's samples, both
// ways leave the same sums, peaks, budget sample and counters of
// fragmentation, retries and segments. The samples are drawn to hit every
// branch: step peaks reached again and again, retries with and without an
// OOM, the largest segment changing, allocated above reserved.
func TestOneProcessColumnsSumAsRows(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	g := &analysistest.Gen{}
	g.Line(`{"type":"run","name":"cols","host":"t","start_ns":%d,"interval_ns":10000000}`, t0)
	g.Line(`{"type":"gpu","gpu":0,"uuid":"GPU-0","name":"Test GPU","total_bytes":%d}`, 80*GiB)
	var retries, ooms, largest int64
	const n = 70000 // chunks seal at 16384 samples and more: several blocks
	for i := range n {
		alloc := int64(10+r.IntN(1000)) * MiB
		res := alloc + int64(r.IntN(200)-10)*MiB // now and then below allocated
		peak := int64(900+r.IntN(4)*50) * MiB    // a few values, each reached often
		if r.IntN(50) == 0 {
			retries++
			if r.IntN(3) == 0 {
				ooms++
			}
		}
		if r.IntN(500) == 0 {
			largest = int64(r.IntN(64)) * MiB
		}
		g.Line(`{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"rank":0,"allocated_bytes":%d,"reserved_bytes":%d,"active_bytes":%d,"inactive_split_bytes":%d,"peak_allocated_bytes":%d,"segments":%d,"alloc_retries":%d,"ooms":%d,"largest_segment_bytes":%d}`,
			t0+int64(i)*1e9, alloc, res, alloc+int64(r.IntN(5)-1)*MiB, int64(r.IntN(30))*MiB, peak, r.IntN(100), retries, ooms, largest)
	}
	type sums struct {
		cur, budgetSum                  torchAtTime
		peakA, peakR, peakS, budgetPeak storage.TorchSample
		last                            storage.TorchSample
		firstRetries                    int64
		firstRetryNS, nearLimit         any
		largestSeg, mostSegs, mostSplit int64
		mostLive, lastSplit             int64
	}
	of := func(s *allocSum) sums {
		return sums{s.cur, s.budgetSum, s.peakA, s.peakR, s.peakS, s.budgetPeak, *s.last[7], s.firstRetries,
			analysistest.Deref(s.firstRetryNS), analysistest.Deref(s.nearLimit), s.largestSeg, s.mostSegs, s.mostSplit, s.mostLive, s.lastSplit}
	}
	analysistest.Analyze(t, g.String(), func(db *storage.DB, run storage.Run) (struct{}, error) {
		rows := &allocSum{last: map[int]*storage.TorchSample{}, firstRetries: -1}
		cols := &allocSum{last: map[int]*storage.TorchSample{}, firstRetries: -1}
		var c torchCols
		blocks, samples := 0, 0
		b := db.TorchBlocks(run, 0, 7, storage.MinTime, storage.MaxTime)
		for b.Next() {
			blocks++
			for i := range b.T() {
				x := b.TorchRow(i)
				rows.add(&x)
			}
			cc := c.of(b)
			cols.one(7)
			cols.budgetAt = -1
			for i := range cc.t {
				cols.addOne(cc, i)
				samples++
			}
			cols.blockDone(b, cc)
			if got, want := of(cols), of(rows); got != want {
				t.Fatalf("after block %d: columns give\n%+v\nrows give\n%+v", blocks, got, want)
			}
		}
		if err := b.Err(); err != nil {
			return struct{}{}, err
		}
		if samples != n || blocks < 2 {
			t.Fatalf("%d samples in %d blocks, want %d in several", samples, blocks, n)
		}
		if rows.nearLimit == nil || rows.firstRetryNS == nil || rows.largestSeg == 0 {
			t.Fatalf("the samples missed a branch: %+v", of(rows))
		}
		return struct{}{}, nil
	})
}
