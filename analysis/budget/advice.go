package budget

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// This file is "What would help": the remedies for a peak that does not
// fit, each with what it frees at the peak, from the budget (budget.go) and
// how memory works. Where the saving is arithmetic it is one figure; where
// it depends on the model's structure (autocast, checkpointing) it is a
// range, and the range's ends are named constants below with their reason.
//
//   - Gradient accumulation over k micro-batches of batch/k: the same
//     effective batch, and activations are per sample, so they fall to 1/k.
//     Gradients are then held across the micro-batches (they are, at the
//     peak, already: see budget.go). What is still allocated at the step's
//     end beyond the model's tensors (the data, cuBLAS's workspaces) is not
//     made by the step and stays; counting it as halved puts the prediction
//     below the measured peak (bench/README.md, the budget check). The same
//     part is left out of what autocast and checkpointing act on.
//   - bf16 autocast, where the parameters are float32 and autocast was off:
//     the outputs of matmuls and convolutions, most of the saved
//     activations, become 2 bytes instead of 4; the ops autocast keeps in
//     float32 (softmax, layer and group norm, losses) do not. So between
//     AutocastLow and AutocastHigh of the activations, less the bf16 copies
//     of the weights autocast keeps for the forward and backward (up to
//     half the trainable parameters' float32 bytes).
//   - Activation checkpointing of every block: a block keeps its input and
//     recomputes the rest in backward, so what stays is one tensor per block
//     plus one block's intermediates while it is recomputed, plus what lies
//     outside the blocks (embeddings, the loss and its logits). For L
//     blocks of k saved tensors that frees 1 − (L + k)/(L·k) of the blocks'
//     activations: 61 % for 4 blocks of 7, 79 % for 12 of 8. What lies
//     outside the blocks can be most of the rest: a CNN's stem runs at the
//     input's full resolution (a ResNet's first convolution, its batch
//     norm and pooling before the first block), so a CNN frees far less
//     than the formula says (bench/README.md, "Budget checks: what
//     checkpointing freed"). The range is CheckpointLow to CheckpointHigh
//     of the activations.
//   - A lighter optimizer: Adam and AdamW keep two moments per parameter in
//     the parameter's dtype (8 bytes a float32 parameter); SGD with
//     momentum one (4 bytes); 8-bit Adam two of one byte (2 bytes, plus
//     scales of well under 1 %).
//   - Sharding over the run's N ranks: ZeRO-1 splits the optimizer state,
//     ZeRO-2 also the gradients, ZeRO-3 (FSDP's full shard) also the
//     parameters; each rank then holds 1/N of what it splits.
//   - expandable_segments:True: the allocator grows segments in place
//     instead of keeping blocks it cannot reuse, so at the peak it holds
//     little beyond the tensors: it frees at most all of the cache at the
//     peak, and may free none of it (split blocks of the small pool and the
//     rounding of segments stay).
//   - torch.cuda.empty_cache(): returns the cache to the driver between
//     steps, where other processes can use it; the next step takes it back,
//     so the peak stays.

// The ranges of the remedies whose saving depends on the model.
const (
	// AutocastLow and AutocastHigh: the share of the activations bf16
	// autocast frees, from all of them staying float32 outputs of norms and
	// softmaxes but half (a transformer's) to none (a CNN of convolutions
	// and batch norms, which autocast runs in bf16).
	AutocastLow, AutocastHigh = 0.25, 0.5
	// CheckpointLow and CheckpointHigh: the share of the activations that
	// checkpointing every block frees (see above: from a few blocks with
	// large logits or a full-resolution stem outside them, to many blocks).
	// Typical values, not bounds: a model of two or three blocks whose
	// logits lie outside them frees less than the low end (bench/README.md,
	// "Budget checks: what checkpointing freed").
	CheckpointLow, CheckpointHigh = 0.25, 0.85
)

// RemedyKind names one remedy.
type RemedyKind uint8

const (
	RemedyAccumulation RemedyKind = iota + 1
	RemedyAutocast
	RemedyCheckpointing
	RemedySGDMomentum
	RemedyAdam8bit
	RemedyZeRO1
	RemedyZeRO2
	RemedyZeRO3
	RemedyExpandableSegments
	RemedyEmptyCache
)

var remedyNames = [...]string{RemedyAccumulation: "gradient_accumulation", RemedyAutocast: "bf16_autocast",
	RemedyCheckpointing: "activation_checkpointing", RemedySGDMomentum: "sgd_momentum", RemedyAdam8bit: "adam_8bit",
	RemedyZeRO1: "zero1", RemedyZeRO2: "zero2", RemedyZeRO3: "zero3", RemedyExpandableSegments: "expandable_segments",
	RemedyEmptyCache: "empty_cache"}

// String is the remedy's name in JSON.
func (k RemedyKind) String() string {
	if int(k) < len(remedyNames) && remedyNames[k] != "" {
		return remedyNames[k]
	}
	return "remedy(" + strconv.Itoa(int(k)) + ")"
}

// MarshalText writes the remedy's name into JSON.
func (k RemedyKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a remedy's name.
func (k *RemedyKind) UnmarshalText(b []byte) error {
	for i, n := range remedyNames {
		if n != "" && n == string(b) {
			*k = RemedyKind(i)
			return nil
		}
	}
	return fmt.Errorf("unknown remedy %q", b)
}

// Remedy is one thing that would lower the peak (or, for empty_cache, that
// people expect to and does not), with what it frees there.
type Remedy struct {
	Kind  RemedyKind `json:"remedy"`
	Title string     `json:"title"`
	// N is the accumulation steps or the ranks sharded over; 0 otherwise.
	N int `json:"n,omitempty"`
	// SavedBytes is what it frees at the peak: the middle of
	// [SavedLowBytes, SavedHighBytes], which are equal where the saving is
	// arithmetic. A negative low end means it may cost more than it saves.
	SavedBytes     int64 `json:"saved_bytes"`
	SavedLowBytes  int64 `json:"saved_low_bytes"`
	SavedHighBytes int64 `json:"saved_high_bytes"`
	// PeakAllocatedAfterBytes is the step's peak allocated after it;
	// PeakAfterBytes the device used (or reserved) at the peak after it.
	PeakAllocatedAfterBytes int64 `json:"peak_allocated_after_bytes"`
	PeakAfterBytes          int64 `json:"peak_after_bytes"`
	LowersPeak              bool  `json:"lowers_peak"`
	// FitsBatch is the largest batch that would then fit (the effective
	// batch, for accumulation); nil where memrec cannot say (FitsWhy).
	FitsBatch   *float64 `json:"batch_that_fits,omitempty"`
	FitsWhy     string   `json:"batch_basis,omitempty"`
	Basis       string   `json:"basis"`
	Assumptions []string `json:"assumptions,omitempty"`
}

// AdviceInput is what Advise needs beyond the budget.
type AdviceInput struct {
	Batch          float64 // the run's batch_size tag; 0: unknown
	Total          int64   // the GPU's memory
	DriverReserved int64
	// SampleAllocated is allocated at the end of the peak's step (what
	// empty_cache() would leave reserved).
	SampleAllocated int64
	// Curve, when runs at several batch sizes were compared (compare
	// --by), is what a sample costs by their need curve; nil: the
	// activations at the peak divided by the batch.
	Curve *SampleCost
	// Segment is the allocator's largest segment at the run's batch (the
	// GPU's LargestSegmentBytes), Rounding 2 MiB for each of the most
	// segments it held; 0 when the probe did not measure them. With a
	// segment the allowance is StrandedSegments of it, grown with the
	// batch, with the rounding (compare --by's rule).
	Segment, Rounding int64
}

// SampleCost is what one more sample costs by the need curve of runs at
// several batch sizes, and the allowance the curve's fit used.
type SampleCost struct {
	Bytes     float64 // per sample: the curve's marginal cost at its largest values
	Allowance float64
	// Segment is the allocator's largest segment per sample, Rounding the
	// segments' rounding, where the runs measured it (ByTag.SegmentLine).
	Segment, Rounding float64
	Runs              int
	// Fits, where the runs' allocator was replayed (compare --by's basis
	// allocator_replay), is the largest batch at the pessimistic end on a
	// GPU with plus(v) more bytes at batch v.
	Fits func(plus func(v float64) float64) (float64, bool)
}

// scaling is the part of activations act that grows with the batch: all
// of it without a curve; with one, a sample's cost times the batch (the
// rest, workspaces and the like, stays at any batch).
func (in AdviceInput) scaling(act int64) int64 {
	if in.Curve == nil || in.Batch <= 0 {
		return act
	}
	return min(act, int64(in.Curve.Bytes*in.Batch))
}

// dtypeBytes is the size of one element of a torch dtype's name; 0 if
// unknown.
func dtypeBytes(name string) int64 {
	switch name {
	case "float32", "float", "int32":
		return 4
	case "bfloat16", "float16", "half":
		return 2
	case "float64", "double":
		return 8
	case "float8_e4m3fn", "float8_e5m2", "int8", "uint8":
		return 1
	}
	return 0
}

// advice is what the remedies read of a budget, and the arithmetic they
// share; each writes to its budget.
type advice struct {
	b    *Budget
	in   AdviceInput
	calc batchArithmetic
	// act are the activations at the peak (hasAct: the budget has them);
	// fx the watched model's own tensors.
	act, params, grads, state, split, cached, fx int64
	hasAct                                       bool
	// inStep is what a step makes and frees within itself: the
	// activations less what is still allocated at its end (the data,
	// workspaces), which outlives the step and so does not shrink with
	// what happens inside it.
	inStep int64
}

// remedies are what Advise considers, in this order. Each adds what
// applies to b.Help, or says in b.Skipped or b.Missing why it does not.
var remedies = []func(*advice){
	(*advice).accumulation,
	(*advice).autocast,
	(*advice).checkpointing,
	(*advice).lighterOptimizer,
	(*advice).sharding,
	(*advice).allocatorCache,
	(*advice).emptyCache,
}

// Advise fills b.Help, ranked by what each remedy frees at the peak,
// b.Skipped and b.Missing.
func Advise(b *Budget, in AdviceInput) {
	ad := &advice{b: b, in: in, calc: batchArithmetic{b: b, in: in}}
	ad.act, ad.hasAct = b.Part(PartActivations)
	ad.params, _ = b.Part(PartParams)
	ad.grads, _ = b.Part(PartGrads)
	ad.state, _ = b.Part(PartOptimizer)
	ad.split, _ = b.Part(PartInactiveSplit)
	ad.cached, _ = b.Part(PartCachedFree)
	ad.fx = b.fixed()
	ad.inStep = ad.act - b.HeldBytes
	b.Batch = max(in.Batch, 0)
	if ad.calc.ok() {
		if v := ad.calc.batch(ad.fx, ad.act, 1); v != nil {
			b.FitsBatch = v
		}
	}
	switch {
	case in.Batch <= 0:
		b.Missing = append(b.Missing, "the batch that would fit: tag the run with its batch size (memrec record --tag batch_size=N); several runs at different sizes give a measured answer (memrec compare --by batch_size)")
	case in.Total <= 0:
		b.Missing = append(b.Missing, "the batch that would fit: the GPU's total memory is unknown")
	}
	if !b.Watched {
		b.Missing = append(b.Missing, "what accumulation, autocast, checkpointing, a lighter optimizer or sharding would free: they act on activations, gradients, optimizer state and parameters, which only memrec.watch tells apart")
	}
	for _, remedy := range remedies {
		remedy(ad)
	}
	slices.SortStableFunc(b.Help, func(x, y Remedy) int {
		if x.SavedBytes != y.SavedBytes {
			if x.SavedBytes > y.SavedBytes {
				return -1
			}
			return 1
		}
		return int(x.Kind) - int(y.Kind)
	})
}

// accumulation is gradient accumulation over 2 and 4 micro-batches.
// Gradients not held at the peak now are held from the first
// micro-batch's backward on: the later micro-batches' forward passes hold
// them.
func (ad *advice) accumulation() {
	b, f, act, inStep := ad.b, ad.calc, ad.act, ad.inStep
	if !ad.hasAct || act <= 0 {
		return
	}
	held := int64(0)
	heldWords := ""
	if b.GradsAtPeak == storage.FlagNo {
		held = b.GradBytes
		heldWords = fmt.Sprintf("; the gradients (%s), freed before the forward pass now, are then held through the later micro-batches", units.FormatBytes(held))
	}
	scale := ad.in.scaling(act)
	fixedWords := ""
	switch {
	case scale < act && scale <= inStep:
		fixedWords = fmt.Sprintf("; %s of them do not grow with the batch (the need curve of the runs compared) and stay", units.FormatBytes(act-scale))
	case b.HeldBytes > 0:
		scale = inStep
		fixedWords = fmt.Sprintf("; %s of them are still allocated at the step's end (the data, workspaces) and stay", units.FormatBytes(b.HeldBytes))
	}
	for _, k := range []int{2, 4} {
		saved := scale - scale/int64(k) - held
		r := Remedy{Kind: RemedyAccumulation, N: k, Title: fmt.Sprintf("gradient accumulation over %d micro-batches", k),
			Basis: fmt.Sprintf("activations are per sample: %d micro-batches of batch/%d hold 1/%d of the activations (%s of %s) at the same effective batch%s%s",
				k, k, k, units.FormatBytes(act-scale+scale/int64(k)), units.FormatBytes(act), fixedWords, heldWords),
			Assumptions: []string{"everything above the model's own tensors at the peak scales with the batch; what does not (workspaces, the optimizer step's temporaries) frees less",
				"the peak is in the forward or backward pass, not in optimizer.step()"}}
		f.set(&r, saved, saved)
		if f.ok() && b.Batch > 0 {
			if v := f.batch(ad.fx+held, act, 1); v != nil {
				e := *v * float64(k)
				r.FitsBatch, r.FitsWhy = &e, fmt.Sprintf("%d micro-batches of %s, %s", k, strconv.FormatFloat(*v, 'f', -1, 64), f.basis())
			}
		}
		b.Help = append(b.Help, r)
	}
}

// autocast is bf16 autocast, for a float32 run without it.
func (ad *advice) autocast() {
	b, f, inStep := ad.b, ad.calc, ad.inStep
	switch {
	case !b.Watched:
	case b.DType != "float32":
		if b.DType != "" {
			b.Skipped = append(b.Skipped, fmt.Sprintf("bf16 autocast: the parameters are %s already", b.DType))
		}
	case b.Autocast == storage.AutocastOn:
		b.Skipped = append(b.Skipped, "bf16 autocast: it was on already")
	case b.Autocast == storage.AutocastUnknown:
		b.Missing = append(b.Missing, "whether autocast was on: the probe saw no forward pass after memrec.watch")
	case ad.act > 0:
		cast := b.Trainable * 2 // bf16 copies of the float32 weights
		lo, hi := int64(AutocastLow*float64(inStep))-cast, int64(AutocastHigh*float64(inStep))
		r := Remedy{Kind: RemedyAutocast, Title: "bf16 autocast (torch.autocast(\"cuda\", dtype=torch.bfloat16))",
			Basis: fmt.Sprintf("the run is float32 without autocast: matmul and convolution outputs saved for backward become 2 bytes instead of 4, the ops autocast keeps in float32 do not; %.0f %% to %.0f %% of the activations made within the step (%s), less up to %s of bf16 weight copies",
				100*AutocastLow, 100*AutocastHigh, units.FormatBytes(inStep), units.FormatBytes(cast)),
			Assumptions: []string{"the model's compute is matmuls and convolutions (autocast's bf16 list); a model of mostly elementwise or float32-listed ops frees less"}}
		f.set(&r, lo, hi)
		f.scaled(&r, ad.fx+cast/2, ad.act, 1-(AutocastLow+AutocastHigh)/2)
		b.Help = append(b.Help, r)
	}
}

// checkpointing is activation checkpointing of every block.
func (ad *advice) checkpointing() {
	b, f, inStep := ad.b, ad.calc, ad.inStep
	if !ad.hasAct || ad.act <= 0 {
		return
	}
	r := Remedy{Kind: RemedyCheckpointing, Title: "activation checkpointing of every block (torch.utils.checkpoint)",
		Basis: fmt.Sprintf("a checkpointed block keeps its input and recomputes the rest in backward: %.0f %% to %.0f %% of the activations made within the step (%s), from a few blocks to many",
			100*CheckpointLow, 100*CheckpointHigh, units.FormatBytes(inStep)),
		Assumptions: []string{"every block (residual or transformer block) is checkpointed; what lies outside them (embeddings, the loss and its logits) stays; with two or three blocks and large logits it can free less than the low end",
			"backward recomputes each block's forward: about a third more compute"}}
	f.set(&r, int64(CheckpointLow*float64(inStep)), int64(CheckpointHigh*float64(inStep)))
	f.scaled(&r, ad.fx, ad.act, 1-(CheckpointLow+CheckpointHigh)/2)
	b.Help = append(b.Help, r)
}

// lighterOptimizer is SGD with momentum or 8-bit Adam, where the
// optimizer keeps more state a parameter than they would.
func (ad *advice) lighterOptimizer() {
	b, f, state := ad.b, ad.calc, ad.state
	if !b.Watched || state <= 0 || b.Trainable <= 0 {
		return
	}
	per := float64(state) / float64(b.Trainable)
	elem := dtypeBytes(b.DType)
	if elem == 0 {
		elem = 4
	}
	now := fmt.Sprintf("%s keeps %.1f bytes a trainable parameter (%s for %s)", b.optimizerName(), per, units.FormatBytes(state), FormatCount(b.Trainable))
	if after := elem * b.Trainable; float64(state) > float64(after)*1.25 {
		r := Remedy{Kind: RemedySGDMomentum, Title: "SGD with momentum instead of " + b.optimizerName(),
			Basis:       fmt.Sprintf("%s; SGD with momentum keeps one buffer of the parameter's dtype, %d bytes a parameter (%s)", now, elem, units.FormatBytes(after)),
			Assumptions: []string{"a different optimizer trains differently: memrec says what it frees, not whether the model learns as well", "the optimizer step's temporaries are not counted"}}
		f.set(&r, state-after, state-after)
		f.scaled(&r, ad.fx-(state-after), ad.act, 1)
		b.Help = append(b.Help, r)
	}
	if after := 2 * b.Trainable; float64(state) > float64(after)*1.25 {
		r := Remedy{Kind: RemedyAdam8bit, Title: "8-bit Adam (bitsandbytes AdamW8bit)",
			Basis:       fmt.Sprintf("%s; 8-bit Adam keeps both moments in one byte each, 2 bytes a parameter (%s), and block scales of under 1 %%", now, units.FormatBytes(after)),
			Assumptions: []string{"parameters in small tensors (under 4096 elements) keep 32-bit state in bitsandbytes, a few % of most models", "the optimizer step's temporaries are not counted"}}
		f.set(&r, state-after, state-after)
		f.scaled(&r, ad.fx-(state-after), ad.act, 1)
		b.Help = append(b.Help, r)
	}
}

// sharding is ZeRO-1, -2 and -3 over the run's ranks.
func (ad *advice) sharding() {
	b, f, params, grads, state := ad.b, ad.calc, ad.params, ad.grads, ad.state
	switch {
	case !b.Watched:
	case b.Ranks > 1:
		n := int64(b.Ranks)
		for _, z := range []struct {
			kind  RemedyKind
			title string
			bytes int64
			what  string
		}{{RemedyZeRO1, "ZeRO-1 (shard the optimizer state)", state, "the optimizer state"},
			{RemedyZeRO2, "ZeRO-2 (shard the optimizer state and gradients)", state + grads, "the optimizer state and gradients"},
			{RemedyZeRO3, "ZeRO-3 / FSDP full shard (shard state, gradients and parameters)", state + grads + params, "the optimizer state, gradients and parameters"}} {
			if z.bytes <= 0 || z.kind == RemedyZeRO2 && grads == 0 { // no gradients at the peak: ZeRO-1's saving
				continue
			}
			saved := z.bytes - z.bytes/n
			r := Remedy{Kind: z.kind, N: b.Ranks, Title: fmt.Sprintf("%s over the run's %d ranks", z.title, b.Ranks),
				Basis: fmt.Sprintf("each of %d ranks holds 1/%d of %s (%s)", b.Ranks, b.Ranks, z.what, units.FormatBytes(z.bytes)),
				Assumptions: []string{"each rank holds a full copy now (DDP); a run already sharded reports its local shards, and frees less",
					"communication buckets, and with ZeRO-3 the parameters of the layer being gathered, are not counted"}}
			f.set(&r, saved, saved)
			f.scaled(&r, ad.fx-saved, ad.act, 1)
			b.Help = append(b.Help, r)
		}
	default:
		if state+grads > 0 {
			b.Skipped = append(b.Skipped, fmt.Sprintf("sharding (ZeRO, FSDP): the run has one rank; over N ranks ZeRO-1 would free (N−1)/N of the optimizer state (%s), ZeRO-2 also of the gradients (%s), ZeRO-3 also of the parameters (%s)",
				units.FormatBytes(state), units.FormatBytes(grads), units.FormatBytes(params)))
		}
	}
}

// allocatorCache is expandable_segments, for the cache the allocator
// holds at the peak.
func (ad *advice) allocatorCache() {
	b, split, cached := ad.b, ad.split, ad.cached
	if split+cached <= 0 {
		return
	}
	r := Remedy{Kind: RemedyExpandableSegments, Title: "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
		Basis: fmt.Sprintf("at the peak the allocator held %s beyond the tensors: %s in inactive split blocks and %s cached free; with expandable segments it grows segments instead of keeping blocks it cannot reuse",
			units.FormatBytes(split+cached), units.FormatBytes(split), units.FormatBytes(cached)),
		Assumptions: []string{"it frees at most all of the cache at the peak, and may free none of it: split blocks of the small pool (allocations under 1 MiB) and the rounding of segments stay; allocated memory does not change"}}
	r.SavedLowBytes, r.SavedHighBytes = 0, split+cached
	r.SavedBytes = (r.SavedLowBytes + r.SavedHighBytes) / 2
	r.PeakAllocatedAfterBytes = b.PeakAllocatedBytes
	r.PeakAfterBytes = b.TotalBytes - r.SavedBytes
	r.LowersPeak = r.SavedBytes > 0
	r.FitsWhy = "the batch that fits is the same: what it frees is cache, and the fit counts the step's allocated peak with an allowance for the cache"
	b.Help = append(b.Help, r)
}

// emptyCache is torch.cuda.empty_cache(), which people expect to lower
// the peak and which does not.
func (ad *advice) emptyCache() {
	b := ad.b
	if ret := b.ReservedBytes - ad.in.SampleAllocated; ret > 0 {
		b.Help = append(b.Help, Remedy{Kind: RemedyEmptyCache, Title: "torch.cuda.empty_cache()",
			Basis:                   fmt.Sprintf("between steps it returns %s of cache to the driver, for other processes; the next step allocates it again, so the peak stays", units.FormatBytes(ret)),
			PeakAllocatedAfterBytes: b.PeakAllocatedBytes, PeakAfterBytes: b.TotalBytes,
			Assumptions: []string{"it costs time: the next step's allocations go to the driver again (cudaMalloc), and it does not undo fragmentation inside segments in use"}})
	}
}

// FirstStepState is the state an optimizer of b's class creates at its
// first step, where the class says how much: the Adam family keeps two
// moments of each trainable parameter, in the parameter's dtype (8-bit
// Adam one byte each). 0 where it does not say: SGD keeps a buffer only
// with momentum, and other classes are not known here.
func FirstStepState(b *Budget) int64 {
	if b == nil || !b.Watched || b.Trainable <= 0 {
		return 0
	}
	name := strings.ToLower(b.Optimizer)
	if !strings.Contains(name, "adam") {
		return 0
	}
	if strings.Contains(name, "8bit") {
		return 2 * b.Trainable
	}
	return 2 * dtypeBytes(b.DType) * b.Trainable
}

func (b *Budget) optimizerName() string {
	if b.Optimizer == "" {
		return "the optimizer"
	}
	return b.Optimizer
}

// FormatCount writes an element count for people: 124.4M parameters.
func FormatCount(n int64) string {
	v := float64(n)
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2fG parameters", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.1fM parameters", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk parameters", v/1e3)
	}
	return fmt.Sprintf("%d parameters", n)
}

// batchArithmetic turns a saving into the peak after it and the batch
// that would then fit.
//
// The batch that fits follows the rule of compare --by (ByTag): a step
// needs its peak allocated plus what the allocator may hold beyond it at
// the limit, plus the memory PyTorch does not see, within the GPU's memory
// less the driver's reservation. The peak is the model's own tensors F
// plus the activations, which are per sample: A/batch each. The allocator
// may hold AllocatorAllowance of the peak beyond it:
// ((total − driver − unseen)/(1 + allowance) − F) / (A/batch). With its
// largest segment S measured (and R, its segments' rounding) it holds at
// most StrandedSegments segments instead, which grow with the batch too:
// (total − driver − unseen − R − F) / ((A + 2S)/batch).
type batchArithmetic struct {
	b  *Budget
	in AdviceInput
}

func (f batchArithmetic) ok() bool {
	return f.in.Batch > 0 && f.in.Total > 0 && f.b.Watched
}

// batch is the largest batch for fixed bytes fx and activations act at the
// run's batch, with act scaled by factor; nil where it makes no sense.
func (f batchArithmetic) batch(fx, act int64, factor float64) *float64 {
	if !f.ok() || act <= 0 || factor <= 0 {
		return nil
	}
	unseen, _ := f.b.Part(PartUnseen)
	others, _ := f.b.Part(PartOtherProcesses)
	if c := f.in.Curve; c != nil && c.Fits != nil {
		// What the remedy frees at batch v: its change to the fixed bytes,
		// and the share of a sample's cost it takes away.
		saved, perSample := float64(f.b.fixed()-fx), c.Bytes*(1-factor)
		v, ok := c.Fits(func(v float64) float64 { return saved + perSample*v })
		if !ok {
			return nil
		}
		v = max(math.Floor(v), 0)
		return &v
	}
	share, perSample := replay.AllocatorAllowance, float64(act)*factor/f.in.Batch
	var segment, rounding float64 // the largest segment a sample, the segments' rounding
	if c := f.in.Curve; c != nil {
		// What does not grow with the batch stays whole; the rest costs
		// the curve's bytes a sample.
		share, perSample, segment, rounding = c.Allowance, c.Bytes*factor, c.Segment, c.Rounding
		fx += act - f.in.scaling(act)
	} else if s := f.in.Segment; s > 0 {
		segment, rounding = float64(s)/f.in.Batch, float64(f.in.Rounding)
	}
	avail := float64(f.in.Total - f.in.DriverReserved - unseen - others)
	var v float64
	if segment > 0 { // the segments bound it, not the share
		v = (avail - rounding - float64(fx)) / (perSample + replay.StrandedSegments*segment)
	} else {
		v = (avail/(1+share) - float64(fx)) / perSample
	}
	v = max(math.Floor(v), 0)
	return &v
}

// set writes a saving range and the peaks after it.
func (f batchArithmetic) set(r *Remedy, lo, hi int64) {
	r.SavedLowBytes, r.SavedHighBytes = lo, hi
	r.SavedBytes = lo + (hi-lo)/2
	r.PeakAllocatedAfterBytes = f.b.PeakAllocatedBytes - r.SavedBytes
	r.PeakAfterBytes = f.b.TotalBytes - r.SavedBytes
	r.LowersPeak = r.SavedBytes > 0
}

// HelpAssumes is what every saving of allocated memory assumes of the rest.
const HelpAssumes = "the cache and the memory PyTorch does not see stay as they are, so device used falls by what allocated does"

// scaled sets the batch that would fit with fixed bytes fx and the
// activations scaled by factor.
func (f batchArithmetic) scaled(r *Remedy, fx, act int64, factor float64) {
	if !f.ok() {
		return
	}
	if v := f.batch(fx, act, factor); v != nil {
		r.FitsBatch, r.FitsWhy = v, f.basis()+", the middle of the range"
		if r.SavedLowBytes == r.SavedHighBytes {
			r.FitsWhy = f.basis()
		}
	}
}

// basis says where a batch that would fit comes from.
func (f batchArithmetic) basis() string {
	if c := f.in.Curve; c != nil && c.Fits != nil {
		return fmt.Sprintf("from the allocator replayed over the requests of %d runs at several batch sizes, with what it frees at each batch (%s a sample) added to the GPU", c.Runs, units.FormatBytes(int64(c.Bytes)))
	}
	if c := f.in.Curve; c != nil {
		return fmt.Sprintf("from the need curve of %d runs at several batch sizes (%s a sample)", c.Runs, units.FormatBytes(int64(c.Bytes)))
	}
	return "from this run's activations per sample (batch_size tag)"
}

// HelpWords writes the remedies as short lines for a summary.
func (b *Budget) HelpWords(n int) []string {
	var out []string
	for i, r := range b.Help {
		if i >= n {
			break
		}
		s := r.Title + ": frees " + r.SavedWords()
		if r.FitsBatch != nil {
			s += ", batch " + strconv.FormatFloat(*r.FitsBatch, 'f', -1, 64) + " would fit"
		}
		out = append(out, s)
	}
	return out
}

// SavedWords writes the saving: one figure, or a range.
func (r Remedy) SavedWords() string {
	if !r.LowersPeak {
		return "nothing at the peak"
	}
	if r.SavedLowBytes == r.SavedHighBytes {
		return units.FormatBytes(r.SavedBytes)
	}
	lo := units.FormatBytes(r.SavedLowBytes)
	if r.SavedLowBytes < 0 {
		lo = "−" + strings.TrimPrefix(lo, "-") + " (may cost more)"
	}
	return lo + " to " + units.FormatBytes(r.SavedHighBytes)
}
