package analysis

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// The OOM explained: where the GPU's memory was at the fatal OOM, part by
// part, and the one change that would have made the failing step fit.
//
// The parts come from the job's own count where it called memrec.watch
// (the budget sample before the OOM: parameters, gradients, optimizer
// state, buffers; allocated less those is activations and temporaries),
// else allocated is one part. Beyond allocated: what the allocator held in
// split blocks (the replay of the trace to the failed request, where the
// GPU has one; else all of reserved less allocated, for PyTorch gives back
// every cached segment without a live block before it raises the error,
// so what it still holds free lies in segments that hold tensors), the
// rest of its cache, and what PyTorch does not see.
//
// The change is the first of these that applies, the least intrusive
// first: an allocator setting the what-ifs' replay serves the request
// with (nothing in the job changes); a micro-batch, from the activations'
// share of the batch and the bytes missing; activation checkpointing,
// where not even one sample's activations leave room; else none that a
// step's shape can give (the model's own tensors fill the GPU).

// wholeTraceWhatIfOps is the most ops a trace may have for AllocTraceWhatIf:
// each of its five replays holds a block per live allocation, and an
// inflated trace's five would pass the analysis's heap bound
// (TestAnalyzeOfHostileTracesStaysUnderTheHeapBound); a probe's traces are
// far shorter.
const wholeTraceWhatIfOps = storage.MaxTraceOps / 4

// oomCauses explains each fatal OOM of the GPU; it runs after the trace is
// attached, and replays the what-ifs where the post-mortem could not yet,
// and the whole trace under each setting (AllocTraceWhatIf).
func (a *gpuAnalysis) oomCauses() {
	if t := a.gr.AllocTrace; t != nil && len(t.Ops) <= wholeTraceWhatIfOps {
		if w, err := replay.WhatIfs(t.Ops, 0); err == nil {
			a.gr.AllocTraceWhatIf = w
			a.gr.AllocTraceMissedBytes = a.traceMissed(w[0].PeakReservedBytes)
		}
	}
	batch, _ := strconv.ParseFloat(a.run.Tags["batch_size"], 64)
	for i := range a.gr.OOMs {
		o := &a.gr.OOMs[i]
		if o.Outcome != OOMFatal {
			continue
		}
		if o.WhatIf == nil {
			a.gr.oomWhatIfs(o)
		}
		o.Cause = explainOOM(*o, batch, budget.FirstStepState(a.gr.Budget))
	}
}

// traceMissed is how much more the run's allocator reserved than the
// trace's replay under the default allocator, where that is beyond the
// replay's own tolerance; else 0. The trace covers the job's first steps
// only (the probe turns it off after the third): a job whose later steps
// make larger requests (variable lengths, an evaluation, a bigger batch)
// reserves more than any replay of the trace shows, and each what-if
// figure is then for the traced steps alone. With several processes on the
// GPU the recorded peak is theirs together and says nothing of one trace.
func (a *gpuAnalysis) traceMissed(replayed int64) int64 {
	if a.gr.PeakReservedBytes == nil || len(a.torchPIDs) != 1 {
		return 0
	}
	recorded := *a.gr.PeakReservedBytes
	if float64(recorded-replayed) <= replay.Tolerance*float64(recorded) {
		return 0
	}
	return recorded - replayed
}

// explainOOM is o's cause; nil without allocated, reserved and the
// request and free memory the OOM's message gives. firstState is what the
// watched optimizer creates at its first step (budget.FirstStepState):
// where it held no state at the OOM, its first step was still to come and
// would have needed that too.
func explainOOM(o OOM, batch float64, firstState int64) *OOMCause {
	if o.AllocatedBytes == nil || o.ReservedBytes == nil || o.RequestedBytes == nil || o.FreeBytes == nil {
		return nil
	}
	alloc, reserved := *o.AllocatedBytes, *o.ReservedBytes
	c := &OOMCause{Basis: CauseSample, RequestBytes: *o.RequestedBytes, MissingBytes: max(0, *o.RequestedBytes-*o.FreeBytes)}
	if o.ProcessLimitBytes != nil {
		c.Notes = append(c.Notes, fmt.Sprintf("the process could hold at most %s (a per-process memory fraction): the free memory is what that left beyond reserved, %s, not the device's %s",
			units.FormatBytes(*o.ProcessLimitBytes), units.FormatBytes(*o.FreeBytes), units.FormatBytes(*o.DeviceFreeBytes)))
	}
	var parts []budget.Slice
	add := func(p budget.Part, v int64) { parts = append(parts, budget.Slice{Part: p, Bytes: v}) }
	act := int64(-1) // unknown without memrec.watch
	if b := o.Budget; b != nil {
		c.Basis = CauseWatched
		var fixed int64
		for _, p := range []budget.Part{budget.PartParams, budget.PartGrads, budget.PartOptimizer, budget.PartBuffers} {
			v := oomPart(b, p)
			add(p, v)
			fixed += v
		}
		act = max(0, alloc-fixed)
		if s := stateToCome(b, firstState); s > 0 {
			c.MissingBytes += s
			c.FirstStepStateBytes = s
			c.Notes = append(c.Notes, fmt.Sprintf("the optimizer held no state at the OOM: its first step creates %s (two moments a trainable parameter), counted with the bytes missing",
				units.FormatBytes(s)))
		}
		if fixed > alloc {
			c.Notes = append(c.Notes, fmt.Sprintf("the model's own tensors (%s) exceed allocated at the OOM (%s): not all were held then; activations are counted as 0", units.FormatBytes(fixed), units.FormatBytes(alloc)))
		}
		add(budget.PartActivations, act)
	} else {
		add(budget.PartAllocated, alloc)
	}
	cached := max(0, reserved-alloc)
	split := cached
	if len(o.WhatIf) > 0 && !o.WhatIf[0].Fits {
		split = min(cached, o.WhatIf[0].StrandedBytes)
		if c.Basis == CauseSample {
			c.Basis = CauseTrace
		}
	}
	add(budget.PartInactiveSplit, split)
	add(budget.PartCachedFree, cached-split)
	c.TotalBytes = alloc + cached
	if o.UnseenBytes != nil {
		add(budget.PartUnseen, *o.UnseenBytes)
		c.TotalBytes += *o.UnseenBytes
	} else {
		c.Notes = append(c.Notes, "no device sample near the OOM: the memory PyTorch does not see is left out, and the parts add up to reserved")
	}
	for i := range parts {
		parts[i].Share = float64(parts[i].Bytes) / float64(max(1, c.TotalBytes))
	}
	c.Parts = parts
	c.Change = oomChange(o, c, act, split, batch)
	return c
}

// stateToCome is firstState, what the watched optimizer creates at its
// first step, where the budget at the OOM b shows it held no state yet;
// else 0.
func stateToCome(b *budget.OOM, firstState int64) int64 {
	if b == nil || oomPart(b, budget.PartOptimizer) != 0 {
		return 0
	}
	return firstState
}

// oomPart is the bytes of one part of an OOM's budget (0 if none).
func oomPart(b *budget.OOM, p budget.Part) int64 {
	for _, s := range b.Parts {
		if s.Part == p {
			return s.Bytes
		}
	}
	return 0
}

// oomChange picks the one change (see the top of the file). act is the
// activations at the OOM (-1: unknown), split the split blocks.
func oomChange(o OOM, c *OOMCause, act, split int64, batch float64) OOMChange {
	B := units.FormatBytes
	missing := c.MissingBytes
	if w, ok := bestSetting(o.WhatIf); ok {
		return OOMChange{Kind: ChangeSetting, Setting: w.Setting, Words: fmt.Sprintf(
			"PYTORCH_CUDA_ALLOC_CONF=%s: the allocator trace replayed under it serves the %s request (peak reserved %s), where the default held %s in split blocks and %s was missing",
			w.Setting, B(c.RequestBytes), B(w.PeakReservedBytes), B(o.WhatIf[0].StrandedBytes), B(missing))}
	}
	if len(o.WhatIf) == 0 && missing > 0 && split >= missing+replay.SegmentRounding {
		// No trace to replay: with expandable segments only the pages
		// live blocks share strand room, so split blocks well beyond the
		// bytes missing would have served it.
		return OOMChange{Kind: ChangeSetting, Setting: "expandable_segments:True", Words: fmt.Sprintf(
			"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True: the allocator held %s in split blocks, more than the %s missing (from the allocator sample; no trace to replay)",
			B(split), B(missing))}
	}
	if missing <= 0 {
		return OOMChange{Kind: ChangeNone, Words: "the device had the bytes free but not in one piece the allocator could take: no change can be read from the figures at the OOM"}
	}
	if act < 0 {
		if o.FittingBatch != nil && batch > 0 {
			n := *o.FittingBatch
			words := fmt.Sprintf("a micro-batch of %s (of the batch of %s, accumulated over %d): the whole step's need scaled to the room, for without memrec.watch its activations are not told from the model's tensors",
				fmtNum(n), fmtNum(batch), int(math.Ceil(batch/max(n, 1))))
			if o.FitKind == FitUpperBound {
				words += "; at most that: no step completed, so the need is known only from below"
			}
			return OOMChange{Kind: ChangeMicroBatch, MicroBatch: n, Accumulation: int(math.Ceil(batch / max(n, 1))), Words: words}
		}
		return OOMChange{Kind: ChangeNone, FreeBytes: missing, Words: fmt.Sprintf(
			"the step must use %s less; which part can give it is not known: call memrec.watch(model, optimizer) for the parts, and tag the run's batch_size for a micro-batch", B(missing))}
	}
	room := act - missing // the activations that would have fitted
	if room <= 0 {
		return OOMChange{Kind: ChangeNone, FreeBytes: missing, Words: fmt.Sprintf(
			"the model's own tensors leave no room: %s missing is more than all the activations (%s); a lighter optimizer, lower precision or sharding (FSDP, ZeRO) must free it", B(missing), B(act))}
	}
	if batch > 0 {
		if n := math.Floor(batch * float64(room) / float64(act)); n >= 1 {
			k := int(math.Ceil(batch / n))
			words := fmt.Sprintf("a micro-batch of %s (gradient accumulation over %d keeps the batch of %s): the activations, %s at the OOM, are %s a sample, and %s samples leave the %s missing",
				fmtNum(n), k, fmtNum(batch), B(act), B(act/int64(batch)), fmtNum(n), B(missing))
			if o.FitKind == FitUpperBound {
				words += "; at most that: no step completed, so what the rest of the step would have allocated is not known"
			}
			return OOMChange{Kind: ChangeMicroBatch, MicroBatch: n, Accumulation: k, Words: words}
		}
		return OOMChange{Kind: ChangeCheckpointing, FreeBytes: missing, Words: fmt.Sprintf(
			"activation checkpointing that frees at least %s of the %s of activations (%.0f %%): not even one sample's activations leave the room",
			B(missing), B(act), 100*float64(missing)/float64(act))}
	}
	k := int(math.Ceil(float64(act) / float64(room)))
	return OOMChange{Kind: ChangeMicroBatch, Accumulation: k, Words: fmt.Sprintf(
		"micro-batches of 1/%d of the batch (accumulated over %d): the activations, %s at the OOM, shrink with the batch, and %s is missing (tag the run's batch_size for the number)",
		k, k, B(act), B(missing))}
}

// bestSetting is the setting among the what-ifs (after the default) that
// serves the request where the default does not, holding the least at its
// peak; false where none does or the default's replay serves it too.
func bestSetting(ws []replay.WhatIf) (replay.WhatIf, bool) {
	if len(ws) < 2 || ws[0].Fits {
		return replay.WhatIf{}, false
	}
	var fit []replay.WhatIf
	for _, w := range ws[1:] {
		if w.Fits {
			fit = append(fit, w)
		}
	}
	if len(fit) == 0 {
		return replay.WhatIf{}, false
	}
	return slices.MinFunc(fit, func(a, b replay.WhatIf) int { return int(min(max(a.PeakReservedBytes-b.PeakReservedBytes, -1), 1)) }), true
}

// CauseLines says o's cause in words: where the memory was, on what
// basis, and the change; nil without one.
func CauseLines(o OOM) []string {
	c := o.Cause
	if c == nil {
		return nil
	}
	var parts []string
	for _, p := range c.Parts {
		if p.Bytes > 0 {
			parts = append(parts, fmt.Sprintf("%s %s (%.0f %%)", p.Part.Words(), units.FormatBytes(p.Bytes), 100*p.Share))
		}
	}
	basis := map[CauseBasis]string{CauseWatched: "the job's memrec.watch count", CauseTrace: "the allocator sample, the split blocks from the trace replayed",
		CauseSample: "the allocator sample at the OOM (no memrec.watch, no trace)"}[c.Basis]
	out := []string{
		fmt.Sprintf("where the memory was at the OOM (from %s): %s", basis, strings.Join(parts, ", ")),
		fmt.Sprintf("what would have made this step fit: %s", c.Change.Words),
	}
	for _, n := range c.Notes {
		out = append(out, "note: "+n)
	}
	return out
}

func fmtNum(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
