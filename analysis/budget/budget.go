package budget

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// This file is "Budget at the peak": what one GPU's memory was made of at
// the allocator sample that reports the run's highest per-step peak.
//
// How memory works at that moment, from the outside in. NVML's device used
// is everything on the GPU: the memory PyTorch does not see (the CUDA
// context, NCCL's buffers, cuBLAS and cuDNN workspaces outside the caching
// allocator, other programs) and what each PyTorch process's caching
// allocator reserved from the driver. Reserved is allocated (tensors alive)
// plus blocks the cache holds free: inactive split blocks (the free part of
// a segment still partly in use, which the allocator cannot give back) and
// the rest of the cache. Allocated at the peak is the step's peak; the
// watched model's own tensors (memrec.watch: parameters, gradients,
// optimizer state, buffers) are part of it, and what is left, the peak
// minus those, is activations and temporaries.
//
// Where this is not exact, it says so. The probe reads the budget and the
// allocator's counters at the end of the step, not at the peak inside it:
// the parameters, the optimizer state and the buffers do not change within
// a step; the gradients do (zero_grad(set_to_none=True) frees them and
// backward allocates them again), so the split counts them as held at the
// peak, and says so. Reserved and the inactive split are also the end of
// the step's; the caching allocator keeps what it reserved, so reserved at
// the end is reserved at the peak unless it freed its cache to retry an
// allocation (then AllocRetries rises, and a note says so).

// Part is one slice of the budget.
type Part uint8

// The parts, in the order they stack (the allocator's inside out).
const (
	PartParams Part = iota
	PartGrads
	PartOptimizer
	PartBuffers
	PartActivations
	PartAllocated // allocated, not split: the run has no memrec.watch
	PartInactiveSplit
	PartCachedFree
	PartOtherProcesses
	PartUnseen
)

var partNames = [...]string{PartParams: "parameters", PartGrads: "gradients", PartOptimizer: "optimizer_state",
	PartBuffers: "buffers", PartActivations: "activations", PartAllocated: "allocated", PartInactiveSplit: "inactive_split",
	PartCachedFree: "cached_free", PartOtherProcesses: "other_processes", PartUnseen: "not_seen_by_pytorch"}

var partWords = [...]string{PartParams: "parameters", PartGrads: "gradients", PartOptimizer: "optimizer state",
	PartBuffers: "buffers", PartActivations: "activations and temporaries", PartAllocated: "allocated (not split: no memrec.watch)",
	PartInactiveSplit: "inactive split blocks", PartCachedFree: "cached free", PartOtherProcesses: "other PyTorch processes",
	PartUnseen: "not seen by PyTorch"}

// String is the part's name in JSON.
func (p Part) String() string {
	if int(p) < len(partNames) {
		return partNames[p]
	}
	return "part(" + strconv.Itoa(int(p)) + ")"
}

// Words is the part's name for people.
func (p Part) Words() string {
	if int(p) < len(partWords) {
		return partWords[p]
	}
	return p.String()
}

// MarshalText writes the part's name into JSON.
func (p Part) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads a part's name.
func (p *Part) UnmarshalText(b []byte) error {
	for i, n := range partNames {
		if n == string(b) {
			*p = Part(i)
			return nil
		}
	}
	return fmt.Errorf("unknown budget part %q", b)
}

// Slice is one part's bytes and its share of the whole (device used
// at that moment, or reserved where there is no device sample).
type Slice struct {
	Part  Part    `json:"part"`
	Bytes int64   `json:"bytes"`
	Share float64 `json:"share"`
	// Detail names what the part holds where memrec knows: the
	// optimizer's state tensors ("AdamW exp_avg, exp_avg_sq").
	Detail string `json:"detail,omitempty"`
}

// Budget is one GPU's memory at its highest step peak, split into parts
// that add up to device used at that moment, and what would lower it.
type Budget struct {
	TNS   int64 `json:"t_ns"`
	Epoch *int  `json:"epoch"`
	Step  *int  `json:"step"`
	PID   int   `json:"pid"`
	Rank  *int  `json:"rank,omitempty"`
	// PeakAllocatedBytes is the step's peak allocated; ReservedBytes and
	// the inactive split are the same sample's (the end of that step).
	PeakAllocatedBytes int64  `json:"peak_allocated_bytes"`
	ReservedBytes      int64  `json:"reserved_bytes"`
	UsedBytes          *int64 `json:"used_bytes"` // device used, nil without a device sample near
	// UnseenFromNS is the time of the device and allocator samples that
	// not seen by PyTorch is read from where no device sample pairs with
	// the peak itself (nil: from the peak's own); UnseenWhy says why that
	// part is not known where neither exists.
	UnseenFromNS *int64 `json:"unseen_from_t_ns,omitempty"`
	UnseenWhy    string `json:"unseen_unknown_why,omitempty"`
	// TotalBytes is what the parts add up to: UsedBytes; without it
	// reserved (all PyTorch processes) plus not seen by PyTorch near the
	// peak (UnseenFromNS), or reserved alone.
	TotalBytes int64   `json:"total_bytes"`
	Parts      []Slice `json:"parts"`
	// LeftOverBytes is TotalBytes less the parts: 0 unless a part could not
	// be measured consistently (then Notes says which).
	LeftOverBytes int64 `json:"left_over_bytes"`
	// What the probe reported about the model (memrec.watch); zero without.
	Watched    bool             `json:"watched"`
	ParamCount int64            `json:"params,omitempty"`
	Trainable  int64            `json:"trainable_params,omitempty"`
	DType      string           `json:"dtype,omitempty"`
	Optimizer  string           `json:"optimizer,omitempty"`
	StateKeys  string           `json:"optimizer_state,omitempty"`
	Autocast   storage.Autocast `json:"autocast"`
	// GradsAtPeak says whether the gradients are held at the peak: no when
	// the probe saw none as the forward pass started (zero_grad with
	// set_to_none before it), so the forward's peak has none; yes when it
	// saw them; unknown before it saw a forward after a backward (counted
	// as held). GradBytes is the gradients after backward either way.
	GradsAtPeak storage.Flag `json:"grads_at_peak"`
	GradBytes   int64        `json:"grads_after_backward_bytes,omitempty"`
	// HeldBytes is the part of the activations and temporaries that is
	// still allocated at the end of the step, beyond the model's tensors:
	// the data batch, library workspaces (cuBLAS keeps its own in the
	// caching allocator), tensors kept across steps. What a step makes and
	// frees within itself is the rest; only that part shrinks with
	// micro-batches, autocast or checkpointing.
	HeldBytes int64 `json:"held_between_steps_bytes,omitempty"`
	Ranks     int   `json:"ranks"`
	// Batch is the run's batch_size tag (0 if absent); FitsBatch the
	// largest batch that would fit this GPU as it runs (see fitBatch).
	Batch     float64  `json:"batch_size,omitempty"`
	FitsBatch *float64 `json:"batch_that_fits,omitempty"`
	Basis     string   `json:"basis"`
	Notes     []string `json:"notes,omitempty"`
	// Help is what would help, ranked by the bytes it frees at the peak;
	// Skipped the remedies considered and why none applies; Missing what
	// memrec would need to say more.
	Help    []Remedy `json:"what_would_help"`
	Skipped []string `json:"not_applicable,omitempty"`
	Missing []string `json:"missing,omitempty"`
}

// Part returns the bytes of one part, and false if the budget has none.
func (b *Budget) Part(p Part) (int64, bool) {
	for _, s := range b.Parts {
		if s.Part == p {
			return s.Bytes, true
		}
	}
	return 0, false
}

// TotalWords names what the parts add up to.
func (b *Budget) TotalWords() string {
	switch {
	case b.UsedBytes != nil:
		return "device used"
	case b.UnseenFromNS != nil:
		return "device used, estimated"
	}
	return "reserved"
}

// fixed is the bytes of the watched model's own tensors.
func (b *Budget) fixed() int64 {
	var n int64
	for _, p := range []Part{PartParams, PartGrads, PartOptimizer, PartBuffers} {
		v, _ := b.Part(p)
		n += v
	}
	return n
}

// Input is what New needs of one GPU: the allocator sample with the
// run's highest step peak, what the GPU's other PyTorch processes had
// reserved at that moment, the budget the probe sent with the sample and
// device used near it.
type Input struct {
	Peak           storage.TorchSample
	OthersReserved int64
	Budget         *storage.BudgetSample // nil: no memrec.watch
	Used           *int64                // nil: no device sample near the peak
	// Without Used: not seen by PyTorch from a pair of samples near the
	// peak (UnseenAt their time), or why it is not known.
	Unseen    *int64
	UnseenAt  int64
	UnseenWhy string
	// Held is allocated at the end of the peak's step beyond the model's
	// tensors then; nil where there is no sample at the step's end.
	Held        *int64
	Epoch, Step *int // where the peak falls; nil: no such marks
	Ranks       int
}

// New splits the peak into parts that add up to device used.
func New(in Input) *Budget {
	p := in.Peak
	b := &Budget{TNS: p.T, Epoch: in.Epoch, Step: in.Step, PID: p.PID, PeakAllocatedBytes: p.PeakAllocated,
		ReservedBytes: p.Reserved, UsedBytes: in.Used, Ranks: in.Ranks, Help: []Remedy{}}
	if p.Rank >= 0 {
		rank := p.Rank
		b.Rank = &rank
	}
	var parts []Slice
	add := func(part Part, v int64, detail string) {
		parts = append(parts, Slice{Part: part, Bytes: v, Detail: detail})
	}
	alloc := p.PeakAllocated
	if bs := in.Budget; bs != nil {
		b.splitWatched(bs, alloc, in.Held, add)
	} else {
		add(PartAllocated, alloc, "")
		b.Basis = "the step's peak allocated, not split: the run has no memrec.watch"
		b.Missing = append(b.Missing, "the split of allocated memory into parameters, gradients, optimizer state and activations: call memrec.watch(model, optimizer) in the training script (the Lightning and Hugging Face callbacks do)")
	}
	cached := p.Reserved - alloc
	if cached < 0 {
		b.Notes = append(b.Notes, fmt.Sprintf("reserved at the end of the step (%s) is below the step's peak allocated (%s): the allocator gave memory back after its peak (it frees its cache and retries near the limit); the cache is counted as 0",
			units.FormatBytes(p.Reserved), units.FormatBytes(alloc)))
		cached = 0
	}
	split := min(p.InactiveSplit, cached)
	add(PartInactiveSplit, split, "")
	add(PartCachedFree, cached-split, "")
	if in.OthersReserved > 0 {
		add(PartOtherProcesses, in.OthersReserved, "")
	}
	torchTotal := alloc + cached + in.OthersReserved
	b.TotalBytes = torchTotal
	if in.Used != nil {
		b.TotalBytes = *in.Used
		unseen := *in.Used - torchTotal
		if unseen < 0 {
			b.Notes = append(b.Notes, fmt.Sprintf("device used (%s) is below what PyTorch reserved (%s): the device sample and the allocator's are of different moments; not seen by PyTorch is counted as 0",
				units.FormatBytes(*in.Used), units.FormatBytes(torchTotal)))
			unseen = 0
		}
		add(PartUnseen, unseen, "")
	} else if in.Unseen != nil {
		// What PyTorch does not see (the CUDA context, NCCL's and the
		// libraries' own memory) changes rarely, so a pair of samples of
		// one moment near the peak stands in for the peak's own.
		at := in.UnseenAt
		b.UnseenFromNS = &at
		b.TotalBytes = torchTotal + *in.Unseen
		add(PartUnseen, *in.Unseen, fmt.Sprintf("device used less reserved %s from the peak: no device sample at the peak itself", units.FormatDuration(float64(max(at-p.T, p.T-at))/1e9)))
	} else {
		b.UnseenWhy = in.UnseenWhy
		b.Missing = append(b.Missing, "device used at the peak ("+in.UnseenWhy+"): the memory PyTorch does not see is left out, and the parts add up to reserved")
	}
	var sum int64
	for i := range parts {
		sum += parts[i].Bytes
		if b.TotalBytes > 0 {
			parts[i].Share = float64(parts[i].Bytes) / float64(b.TotalBytes)
		}
	}
	b.Parts, b.LeftOverBytes = parts, b.TotalBytes-sum
	return b
}

// splitWatched adds the parts a watched model names (its parameters,
// gradients where held at the peak, optimizer state and buffers) and the
// activations, the rest of the step's peak allocated alloc, of which held
// outlives the step (nil: not known).
func (b *Budget) splitWatched(bs *storage.BudgetSample, alloc int64, held *int64, add func(Part, int64, string)) {
	b.Watched = true
	b.ParamCount, b.Trainable, b.DType, b.Optimizer, b.StateKeys, b.Autocast = bs.ParamCount, bs.Trainable, bs.DType, bs.Optimizer, bs.OptimizerKeys, bs.Autocast
	detail := ""
	if bs.Optimizer != "" {
		detail = bs.Optimizer
		if bs.OptimizerKeys != "" {
			detail += " " + commaSpace(bs.OptimizerKeys)
		}
	}
	b.GradsAtPeak, b.GradBytes = bs.GradsAtForward, bs.Grads
	grads, gradWords := bs.Grads, ""
	switch bs.GradsAtForward {
	case storage.FlagNo:
		grads = 0
		gradWords = fmt.Sprintf("none at the peak: zero_grad(set_to_none=True) frees them before the forward pass; backward makes %s as it frees the activations", units.FormatBytes(bs.Grads))
	case storage.FlagUnknown:
		b.Notes = append(b.Notes, "whether the gradients are held at the peak is not known (the probe saw no forward pass after a backward): they are counted as held")
	}
	add(PartParams, bs.Params, "")
	add(PartGrads, grads, gradWords)
	add(PartOptimizer, bs.OptimizerState, detail)
	add(PartBuffers, bs.Buffers, "")
	fixed := bs.Params + grads + bs.OptimizerState + bs.Buffers
	act := alloc - fixed
	if act < 0 {
		b.Notes = append(b.Notes, fmt.Sprintf("the model's own tensors (%s) exceed the step's peak allocated (%s) by %s: not all of them were held at the peak; activations are counted as 0",
			units.FormatBytes(fixed), units.FormatBytes(alloc), units.FormatBytes(-act)))
		act = 0
	}
	actWords := ""
	switch {
	case held == nil:
		b.Notes = append(b.Notes, "what of the activations outlives the step is not known (no allocator sample at the step's end): the remedies that act within a step count all of them")
	case *held > 0:
		b.HeldBytes = min(*held, act)
		actWords = fmt.Sprintf("%s of them still allocated at the step's end (the data, library workspaces, tensors kept across steps)", units.FormatBytes(b.HeldBytes))
	}
	add(PartActivations, act, actWords)
	b.Basis = "the step's peak allocated, less the watched model's parameters, gradients (where held at the peak), optimizer state and buffers (each storage once, this GPU only, read at the end of the same step), is activations and temporaries; what of it is still allocated at the step's end outlives the step"
}

// commaSpace writes "a,b" as "a, b".
func commaSpace(s string) string {
	out := make([]byte, 0, len(s)+4)
	for i := 0; i < len(s); i++ {
		out = append(out, s[i])
		if s[i] == ',' {
			out = append(out, ' ')
		}
	}
	return string(out)
}

// OOM splits what the step that ran out of memory had and asked for:
// allocated at the OOM plus the request, less the watched model's own
// tensors at the OOM, is activations and temporaries. That need is a lower
// bound (the step would have gone on to allocate more), so the
// accumulation that would have fitted is a lower bound too.
type OOM struct {
	NeedBytes int64   `json:"need_bytes"` // allocated + requested
	HaveBytes int64   `json:"have_bytes"` // allocated + free on the device
	Parts     []Slice `json:"parts"`      // shares of NeedBytes
	// Accumulation is the fewest micro-batches that would have fitted the
	// need (at least this many: the need is a lower bound); 0 when even
	// the model's own tensors do not fit.
	Accumulation int    `json:"accumulation_at_least,omitempty"`
	Words        string `json:"words"`
}

// OOMInput is what NewOOM needs of a fatal OOM: allocated at it, the
// request that failed and the device's free memory (nil where the OOM did
// not say), and the largest batch that would have fitted (nil: unknown),
// at most that where UpperBound.
type OOMInput struct {
	Allocated, Requested, Free *int64
	FittingBatch               *float64
	UpperBound                 bool
}

// NewOOM is the budget of a fatal OOM, or nil without memrec.watch (bs)
// or the OOM's request.
func NewOOM(o OOMInput, bs *storage.BudgetSample, batch float64) *OOM {
	if bs == nil || o.Allocated == nil || o.Requested == nil || o.Free == nil {
		return nil
	}
	need := *o.Allocated + *o.Requested
	have := *o.Allocated + *o.Free
	fx := bs.Fixed()
	act := max(0, need-fx)
	ob := &OOM{NeedBytes: need, HaveBytes: have}
	for _, p := range []struct {
		part Part
		v    int64
	}{{PartActivations, act}, {PartOptimizer, bs.OptimizerState}, {PartParams, bs.Params}, {PartGrads, bs.Grads}, {PartBuffers, bs.Buffers}} {
		ob.Parts = append(ob.Parts, Slice{Part: p.part, Bytes: p.v, Share: float64(p.v) / float64(max(need, 1))})
	}
	slices.SortStableFunc(ob.Parts, func(x, y Slice) int { return cmp.Compare(y.Bytes, x.Bytes) })
	var words []string
	for _, p := range ob.Parts {
		if p.Bytes > 0 {
			words = append(words, fmt.Sprintf("%s %.0f %%", p.Part.Words(), 100*p.Share))
		}
	}
	s := fmt.Sprintf("at the OOM the step had and asked for at least %s: %s", units.FormatBytes(need), strings.Join(words, ", "))
	if room := have - fx; room > 0 && act > 0 {
		ob.Accumulation = int(max(2, (act+room-1)/room))
	}
	var fits []string
	if o.FittingBatch != nil && batch > 0 {
		b := strconv.FormatFloat(*o.FittingBatch, 'f', -1, 64)
		if o.UpperBound {
			fits = append(fits, "a batch of at most "+b)
		} else {
			fits = append(fits, "a batch of "+b)
		}
	}
	if ob.Accumulation > 0 {
		fits = append(fits, fmt.Sprintf("accumulation over at least %d micro-batches", ob.Accumulation))
	}
	switch {
	case len(fits) > 0:
		s += "; " + strings.Join(fits, ", or ") + ", would have fitted"
	case have <= fx:
		s += fmt.Sprintf("; the model's own tensors (%s) alone fill what the step had: a lighter optimizer or sharding, not a smaller batch, is what would help", units.FormatBytes(fx))
	}
	ob.Words = s
	return ob
}
