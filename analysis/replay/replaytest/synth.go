// Package replaytest makes allocator traces of toy jobs whose need is known
// by construction, for tests of the replay and of what compare projects
// from it.
package replaytest

import (
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/storage"
)

// SynthAttention is the trace of a toy transformer at sequence length s:
// its weights, then 3 steps of a forward pass that keeps each layer's
// activations (linear in s) and eager attention's scores (quadratic in
// s), and a backward pass that frees them, with a temporary the size of
// the scores (and from 1536 on a workspace of that size too).
func SynthAttention(s int64) storage.AllocTrace {
	var ops []storage.AllocOp
	alloc := func(n int64) int32 { ops = append(ops, storage.AllocOp{Size: n}); return int32(len(ops) - 1) }
	free := func(i int32) { ops = append(ops, storage.AllocOp{Free: true, Of: i}) }
	for range 24 {
		alloc(48 << 20)
	}
	const layers, batch, heads, width = 12, 8, 16, 1024
	for range 3 {
		var acts, scores []int32
		for range layers {
			acts = append(acts, alloc(batch*s*width*2*4))
			scores = append(scores, alloc(batch*heads*s*s*2))
		}
		for l := layers - 1; l >= 0; l-- {
			free(alloc(batch * heads * s * s * 2))
			if s >= 1536 {
				// a workspace a library takes from this length on, the
				// size of the scores
				free(alloc(batch * heads * s * s * 2))
			}
			free(scores[l])
			free(acts[l])
		}
		for range 24 {
			free(alloc(48 << 20)) // the optimizer's temporaries
		}
	}
	return storage.AllocTrace{Steps: 3, Ops: ops}
}

// SynthBatch is a toy network at batch b: its weights, then steps of a
// forward pass that keeps 12 activations of 4 MiB a sample and a backward
// pass that frees them; EvalMiB a sample more is held through the forward
// pass of one step after the three (an evaluation's), when eval is set.
func SynthBatch(b int64, eval bool) storage.AllocTrace {
	var ops []storage.AllocOp
	alloc := func(n int64) int32 { ops = append(ops, storage.AllocOp{Size: n}); return int32(len(ops) - 1) }
	free := func(i int32) { ops = append(ops, storage.AllocOp{Free: true, Of: i}) }
	for range 24 {
		alloc(48 << 20)
	}
	steps := 3
	if eval {
		steps = 4
	}
	for k := range steps {
		var extra int32 = -1
		if k == 3 {
			extra = alloc(b * EvalMiB << 20)
		}
		var acts []int32
		for range 12 {
			acts = append(acts, alloc(b*4<<20))
		}
		for l := len(acts) - 1; l >= 0; l-- {
			free(acts[l])
		}
		if extra >= 0 {
			free(extra)
		}
	}
	return storage.AllocTrace{Steps: 3, Ops: ops}
}

const EvalMiB = 6

// LimitOf is the largest value between lo, whose trace replays on capacity
// bytes, and hi, whose trace does not: the synthetic job's own limit.
func LimitOf(trace func(v int64) storage.AllocTrace, lo, hi, capacity int64) int64 {
	for hi-lo > 1 {
		m := (lo + hi) / 2
		if r, _ := replay.ReplayAllocator(trace(m).Ops, capacity); r.OK {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}
