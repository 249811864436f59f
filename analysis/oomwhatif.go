package analysis

import (
	"fmt"
	"slices"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// oomWhatIfs replays the GPU's allocator trace up to the request that
// ran out of memory under the default allocator and each of
// WhatIfSettings, on the room the allocator had at the OOM (what it
// reserved and what the device had free), and keeps them on o.
func (gr *GPUReport) oomWhatIfs(o *OOM) {
	if gr.AllocTrace == nil || o.ReservedBytes == nil || o.FreeBytes == nil {
		return
	}
	tr := gr.AllocTrace.Ops
	k := replay.LastFailed(tr)
	if k < 0 {
		return
	}
	ops := append(slices.Clone(tr[:k]), storage.AllocOp{Size: tr[k].Size})
	w, err := replay.WhatIfs(ops, *o.ReservedBytes+*o.FreeBytes)
	if err != nil {
		o.LeftOut = append(o.LeftOut, fmt.Sprintf("allocator what-ifs: %v", err))
		return
	}
	o.WhatIf = w
}

// WhatIfLines says what o's what-ifs found, a line each: which setting
// would have served the request and why, or that none would have.
func WhatIfLines(o OOM) []string {
	if len(o.WhatIf) < 2 {
		return nil
	}
	def := o.WhatIf[0]
	var out []string
	if def.Fits {
		out = append(out, "the replay of the allocator trace serves this request with the default allocator, which the job's did not: the what-ifs below are the replay's, not the job's")
	}
	helped := false
	for _, w := range o.WhatIf[1:] {
		switch {
		case w.Fits && !def.Fits:
			helped = true
			out = append(out, fmt.Sprintf("with PYTORCH_CUDA_ALLOC_CONF=%s this request would have fitted: the allocator held %s in split blocks, and %s its largest request there (peak reserved %s)",
				w.Setting, units.FormatBytes(def.StrandedBytes), units.FormatBytes(w.LargestBytes), units.FormatBytes(w.PeakReservedBytes)))
		case !w.Fits:
			out = append(out, fmt.Sprintf("with %s it would not have fitted either: %s stranded, %s the largest request it could serve there", w.Setting, units.FormatBytes(w.StrandedBytes), units.FormatBytes(w.LargestBytes)))
		}
	}
	if !helped && !def.Fits {
		out = append(out, "no allocator setting replayed here would have made room: the step needs less memory (a smaller batch, activation checkpointing)")
	}
	return out
}
