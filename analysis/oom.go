package analysis

import (
	"fmt"
	"math"
	"regexp"
	"strconv"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// classifyOOMs tells the OOMs of one GPU apart (ooms in time order). An
// OOM is survived when something shows the job went on after it: a later
// OOM of the same process (it caught the error and tried again, smaller) or
// a later step mark of its rank. The last OOM with neither after it is
// fatal when the run's exit mark has a non-zero code; survived when the
// exit code is 0 (the script caught it and finished); unknown without an
// exit mark. why says what decided each.
func classifyOOMs(ooms []storage.Mark, steps *growth.Steps, exit *storage.Mark) (out []OOMOutcome, why []string) {
	out, why = make([]OOMOutcome, len(ooms)), make([]string, len(ooms))
	for i, m := range ooms {
		if j := nextOOMOfProcess(ooms, i); j >= 0 {
			out[i], why[i] = OOMSurvived, fmt.Sprintf("the process went on to another allocation %.0f ms later (a fallback, such as cuDNN choosing a smaller workspace, or the script catching it)", float64(ooms[j].T-m.T)/1e6)
			continue
		}
		if k := firstStepAfter(steps, m.T); k >= 0 {
			out[i], why[i] = OOMSurvived, fmt.Sprintf("the job went on: step %d ended %.2f s later", steps.Step(k), float64(steps.T(k)-m.T)/1e9)
			continue
		}
		switch {
		case exit == nil:
			out[i], why[i] = OOMUnknown, "no step and no exit mark after it: the run does not say how the job ended"
		case exit.Code != 0:
			out[i], why[i] = OOMFatal, fmt.Sprintf("the process exited with code %d %.2f s later, with no step after it", exit.Code, float64(exit.T-m.T)/1e9)
		default:
			out[i], why[i] = OOMSurvived, "the process exited normally afterwards: the script caught it"
		}
	}
	return out, why
}

func nextOOMOfProcess(ooms []storage.Mark, i int) int {
	for j := i + 1; j < len(ooms); j++ {
		if ooms[j].PID == ooms[i].PID {
			return j
		}
	}
	return -1
}

func firstStepAfter(steps *growth.Steps, t int64) int {
	for k := range steps.Len() {
		if steps.T(k) > t {
			return k
		}
	}
	return -1
}

// The sizes in an OOM message, as the probe and PyTorch write them:
// "Tried to allocate 2.89 GiB on GPU 0 (1.04 GiB free of 139.80 GiB)" and
// "Tried to allocate 2.89 GiB. GPU 0 has a total capacity of 139.80 GiB of
// which 1.04 GiB is free. … 12.10 GiB allowed; Of the allocated memory".
// The probe's "of" size is what PyTorch's OOM observer passes as the total:
// the device's memory, or under torch.cuda.set_per_process_memory_fraction
// the most the process may hold, as PyTorch's own "allowed" is.
var (
	oomRequest = regexp.MustCompile(`Tried to allocate ([0-9.]+) ?(B|KiB|MiB|GiB|TiB)`)
	oomFree    = regexp.MustCompile(`\(([0-9.]+) ?(B|KiB|MiB|GiB|TiB) free of ([0-9.]+) ?(B|KiB|MiB|GiB|TiB)\)|of which ([0-9.]+) ?(B|KiB|MiB|GiB|TiB) is free`)
	oomAllowed = regexp.MustCompile(`([0-9.]+) ?(B|KiB|MiB|GiB|TiB) allowed;`)
)

// oomSizes are the sizes an OOM message gives; one it does not give is -1.
type oomSizes struct {
	requested, free int64
	limit           int64 // the most the process may hold: the device's memory or a fraction of it
}

// parseOOMSizes reads the request, the free memory and the process's limit
// from an OOM message.
func parseOOMSizes(text string) oomSizes {
	z := oomSizes{-1, -1, -1}
	if m := oomRequest.FindStringSubmatch(text); m != nil {
		z.requested = parseSize(m[1], m[2])
	}
	if m := oomFree.FindStringSubmatch(text); m != nil {
		if m[1] != "" {
			z.free, z.limit = parseSize(m[1], m[2]), parseSize(m[3], m[4])
		} else {
			z.free = parseSize(m[5], m[6])
		}
	}
	if m := oomAllowed.FindStringSubmatch(text); m != nil {
		z.limit = parseSize(m[1], m[2])
	}
	return z
}

func parseSize(num, unit string) int64 {
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return -1
	}
	shift := map[string]uint{"B": 0, "KiB": 10, "MiB": 20, "GiB": 30, "TiB": 40}[unit]
	return int64(math.Round(v * float64(uint64(1)<<shift)))
}

// oomAdvice says, for the fatal OOM, what would have fitted: whether the
// allocator's cache could have served the request (reserved − allocated
// plus the free memory covers it: expandable_segments or empty_cache()
// would have helped), and the largest batch that could fit, from the batch
// at the OOM and its need. The need is the step's peak when the run
// completed steps at this batch (need = peak + request beyond the free
// memory is not known then, so the peak + the shortfall), else only its
// lower bound, allocated + requested; the batch scales the need in
// proportion. With the step's peak it is an estimate, with compare --by's
// allowance for the allocator at the limit: AllocatorAllowance, or where
// the probe measured them StrandedSegments largest segments (segment, at
// the OOM's batch, which grows with it) with the segments' rounding; with
// only the lower
// bound of the need it is an upper bound (FitKind), with no allowance
// taken off (the allocator holds at least what it allocates). The batch
// that fits is then smaller, by as much as the step would have gone on to
// allocate: nothing in a run that completed no step says how much that is.
// first is state the step would still have created beyond its peak (an
// optimizer's first step, budget.FirstStepState), counted with the need.
func oomAdvice(o *OOM, batch float64, stepPeak *int64, segment, rounding, first int64) {
	if o.RequestedBytes == nil || o.FreeBytes == nil {
		return
	}
	req, free := *o.RequestedBytes, *o.FreeBytes
	short := req - free
	o.ShortBytes = i64(max(short, 0))
	if o.AllocatedBytes != nil && o.ReservedBytes != nil {
		if cached := *o.ReservedBytes - *o.AllocatedBytes; cached >= 0 {
			o.CachedFreeBytes = i64(cached)
			help := cached+free >= req
			o.CacheWouldHelp = &help
		} else {
			o.LeftOut = append(o.LeftOut, fmt.Sprintf("cached and free: allocated is %s above reserved, which PyTorch cannot report (an inconsistent allocator sample)", units.FormatBytes(-cached)))
		}
	}
	oomBatch(o, batch, stepPeak, segment, rounding, first)
}

// oomBatch is oomAdvice's largest batch that could fit, alone: the
// budget's pass asks it again once it knows the optimizer's first step.
func oomBatch(o *OOM, batch float64, stepPeak *int64, segment, rounding, first int64) {
	if batch <= 0 || o.AllocatedBytes == nil || o.RequestedBytes == nil || o.FreeBytes == nil {
		return
	}
	req, free := *o.RequestedBytes, *o.FreeBytes
	short := req - free
	have := float64(*o.AllocatedBytes + free)
	need, basis, kind := float64(*o.AllocatedBytes+req+first), "lower_bound", FitUpperBound
	if stepPeak != nil && float64(*stepPeak+max(short, 0)+first) > need {
		need, basis, kind = float64(*stepPeak+max(short, 0)+first), "step_peak", FitEstimate
	}
	if need <= 0 {
		return
	}
	share := have / need // an upper bound takes no allowance
	if kind == FitEstimate {
		if segment > 0 {
			share = (have - float64(rounding)) / (need + replay.StrandedSegments*float64(segment))
		} else {
			share /= 1 + replay.AllocatorAllowance
		}
	}
	v := math.Floor(batch * share)
	o.FittingBatch, o.FitBasis, o.FitKind = &v, basis, kind
}

func oomsFor(mi *markIndex, gpu, rank, ngpus int) []storage.Mark {
	var out []storage.Mark
	for _, m := range mi.ooms {
		switch {
		case m.GPU == gpu:
		case m.GPU == storage.None && (m.Rank == rank || ngpus == 1 || m.Rank == storage.None):
		default:
			continue
		}
		out = append(out, m)
	}
	return out
}
