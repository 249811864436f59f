package analysis

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/memrec/memrec/analysis/replay"
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

// BudgetPart is one slice of the budget.
type BudgetPart uint8

// The parts, in the order they stack (the allocator's inside out).
const (
	PartParams BudgetPart = iota
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
func (p BudgetPart) String() string {
	if int(p) < len(partNames) {
		return partNames[p]
	}
	return "part(" + strconv.Itoa(int(p)) + ")"
}

// Words is the part's name for people.
func (p BudgetPart) Words() string {
	if int(p) < len(partWords) {
		return partWords[p]
	}
	return p.String()
}

// MarshalText writes the part's name into JSON.
func (p BudgetPart) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads a part's name.
func (p *BudgetPart) UnmarshalText(b []byte) error {
	for i, n := range partNames {
		if n == string(b) {
			*p = BudgetPart(i)
			return nil
		}
	}
	return fmt.Errorf("unknown budget part %q", b)
}

// BudgetSlice is one part's bytes and its share of the whole (device used
// at that moment, or reserved where there is no device sample).
type BudgetSlice struct {
	Part  BudgetPart `json:"part"`
	Bytes int64      `json:"bytes"`
	Share float64    `json:"share"`
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
	TotalBytes int64         `json:"total_bytes"`
	Parts      []BudgetSlice `json:"parts"`
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
func (b *Budget) Part(p BudgetPart) (int64, bool) {
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
	for _, p := range []BudgetPart{PartParams, PartGrads, PartOptimizer, PartBuffers} {
		v, _ := b.Part(p)
		n += v
	}
	return n
}

// budgetInput is what makeBudget needs: the peak's allocator sample, the
// sums of the GPU's other PyTorch processes at that moment, the budget the
// probe sent with it and device used.
type budgetInput struct {
	peak           storage.TorchSample
	othersReserved int64
	budget         *storage.BudgetSample // nil: no memrec.watch
	used           *int64
	// Without used: not seen by PyTorch from a pair of samples near the
	// peak (unseenAt its time), or why it is not known.
	unseen    *int64
	unseenAt  int64
	unseenWhy string
	// held is allocated at the end of the peak's step beyond the model's
	// tensors then; nil where there is no sample at the step's end.
	held        *int64
	epoch, step *int
	ranks       int
}

// makeBudget splits the peak into parts that add up to device used.
func makeBudget(in budgetInput) *Budget {
	p := in.peak
	b := &Budget{TNS: p.T, Epoch: in.epoch, Step: in.step, PID: p.PID, PeakAllocatedBytes: p.PeakAllocated,
		ReservedBytes: p.Reserved, UsedBytes: in.used, Ranks: in.ranks, Help: []Remedy{}}
	if p.Rank >= 0 {
		b.Rank = intp(p.Rank)
	}
	var parts []BudgetSlice
	add := func(part BudgetPart, v int64, detail string) {
		parts = append(parts, BudgetSlice{Part: part, Bytes: v, Detail: detail})
	}
	alloc := p.PeakAllocated
	if bs := in.budget; bs != nil {
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
		case in.held == nil:
			b.Notes = append(b.Notes, "what of the activations outlives the step is not known (no allocator sample at the step's end): the remedies that act within a step count all of them")
		case *in.held > 0:
			b.HeldBytes = min(*in.held, act)
			actWords = fmt.Sprintf("%s of them still allocated at the step's end (the data, library workspaces, tensors kept across steps)", units.FormatBytes(b.HeldBytes))
		}
		add(PartActivations, act, actWords)
		b.Basis = "the step's peak allocated, less the watched model's parameters, gradients (where held at the peak), optimizer state and buffers (each storage once, this GPU only, read at the end of the same step), is activations and temporaries; what of it is still allocated at the step's end outlives the step"
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
	if in.othersReserved > 0 {
		add(PartOtherProcesses, in.othersReserved, "")
	}
	torchTotal := alloc + cached + in.othersReserved
	b.TotalBytes = torchTotal
	if in.used != nil {
		b.TotalBytes = *in.used
		unseen := *in.used - torchTotal
		if unseen < 0 {
			b.Notes = append(b.Notes, fmt.Sprintf("device used (%s) is below what PyTorch reserved (%s): the device sample and the allocator's are of different moments; not seen by PyTorch is counted as 0",
				units.FormatBytes(*in.used), units.FormatBytes(torchTotal)))
			unseen = 0
		}
		add(PartUnseen, unseen, "")
	} else if in.unseen != nil {
		// What PyTorch does not see (the CUDA context, NCCL's and the
		// libraries' own memory) changes rarely, so a pair of samples of
		// one moment near the peak stands in for the peak's own.
		b.UnseenFromNS = i64(in.unseenAt)
		b.TotalBytes = torchTotal + *in.unseen
		add(PartUnseen, *in.unseen, fmt.Sprintf("device used less reserved %s from the peak: no device sample at the peak itself", units.FormatDuration(float64(abs64(in.unseenAt-p.T))/1e9)))
	} else {
		b.UnseenWhy = in.unseenWhy
		b.Missing = append(b.Missing, "device used at the peak ("+in.unseenWhy+"): the memory PyTorch does not see is left out, and the parts add up to reserved")
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

// budgetPass reads what the budget needs beyond the allocator pass: the
// budget sample of the peak's process at or before the peak, and device
// used near it; then the advice, and the budget at each fatal OOM.
func (a *gpuAnalysis) budgetPass() error {
	if !a.hasTorch || a.peakS.PeakAllocated <= 0 {
		return nil
	}
	p := a.peakS
	bs, err := a.budgetBefore(p.PID, p.T)
	if err != nil {
		return err
	}
	in := budgetInput{peak: p, othersReserved: max(0, a.peakSum.reserved-p.Reserved), budget: bs,
		epoch: a.mi.epochAt(p.T), step: stepAt(a.steps, p.T), ranks: a.ranks()}
	if err := a.budgetUsed(&in); err != nil {
		return err
	}
	if bs != nil {
		if in.held, err = a.heldAtStepEnd(p); err != nil {
			return err
		}
	}
	b := makeBudget(in)
	if a.gr.AllocRetries != nil && *a.gr.AllocRetries > 0 {
		b.Notes = append(b.Notes, "the allocator retried allocations (it freed its cache to make room): reserved at the end of a step may be below what it was at the peak")
	}
	batch, _ := strconv.ParseFloat(a.run.Tags["batch_size"], 64)
	seg, rounding := a.gr.strandable()
	advise(b, adviceContext{batch: batch, total: a.g.TotalBytes, driverReserved: orZero(a.gr.DriverReservedBytes),
		sampleAllocated: p.Allocated, segment: seg, rounding: rounding})
	a.gr.Budget = b
	for i := range a.gr.OOMs {
		o := &a.gr.OOMs[i]
		if o.Outcome != OOMFatal || o.AllocatedBytes == nil {
			continue
		}
		ob, err := a.budgetBefore(p.PID, o.TNS+1)
		if err != nil {
			return err
		}
		o.Budget = oomBudget(o, ob, batch)
	}
	return nil
}

// strandable is what the segment bound of compare --by's rule counts for
// the GPU's allocator at the limit: its largest segment and 2 MiB for
// each of the most segments it held; 0, 0 where the probe did not measure
// them.
func (g *GPUReport) strandable() (segment, rounding int64) {
	return orZero(g.LargestSegmentBytes), orZero(g.MostSegments) * replay.SegmentRounding
}

func orZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// ranks is how many ranks the run has: its GPUs, when the probe reports
// ranks (a distributed job), else 1.
func (a *gpuAnalysis) ranks() int {
	if a.peakS.Rank >= 0 && len(a.run.GPUs) > 1 {
		return len(a.run.GPUs)
	}
	return 1
}

// budgetBefore is the process's last budget sample at or before t; nil if
// it has none.
// heldAtStepEnd is what the peak's process had allocated at the end of
// the peak's step beyond the watched model's tensors then (the gradients
// as they are then): the sample at the step's mark, which the probe takes
// with it, less its budget. The peak's own sample may be one the probe's
// timer took inside a step that never ended (the run's last): then the
// step before's end. nil without a sample at that mark.
func (a *gpuAnalysis) heldAtStepEnd(p storage.TorchSample) (*int64, error) {
	i := a.steps.Search(p.T)
	if i == a.steps.Len() {
		i--
	}
	if i < 0 {
		return nil, nil
	}
	end := a.steps.T(i)
	it := a.db.TorchSamples(a.run, a.g.Index, p.PID, end, end+1)
	var at *storage.TorchSample
	for it.Next() {
		s := it.At()
		at = &s
	}
	if err := it.Err(); err != nil || at == nil {
		return nil, err
	}
	bs, err := a.budgetBefore(p.PID, end)
	if err != nil || bs == nil {
		return nil, err
	}
	held := max(0, at.Allocated-(bs.Params+bs.Grads+bs.OptimizerState+bs.Buffers))
	return &held, nil
}

// budgetBefore is process pid's last budget sample at or before t. A
// watched process sends one with each allocator sample, so the minute
// before t is read first, and the run from its start only where that
// holds none: the peak, its step's end and each OOM ask, and a day's run
// has a budget sample every few steps.
func (a *gpuAnalysis) budgetBefore(pid int, t int64) (*storage.BudgetSample, error) {
	for _, from := range []int64{max(t, storage.MinTime+windowLookBack) - windowLookBack, storage.MinTime} {
		it := a.db.BudgetSamples(a.run, a.g.Index, pid, from, t+1)
		var last *storage.BudgetSample
		for it.Next() {
			s := it.At()
			last = &s
		}
		if err := it.Err(); err != nil || last != nil {
			return last, err
		}
	}
	return nil, nil
}

// budgetUsed sets device used at the peak; without a device sample of
// that moment, not seen by PyTorch from the pair of device and allocator
// samples nearest the peak within windowLookBack, or why it is not known.
func (a *gpuAnalysis) budgetUsed(in *budgetInput) error {
	if !a.hasDevice {
		in.unseenWhy = "the run has no device samples on this GPU (NVML)"
		return nil
	}
	t, tol := in.peak.T, pairTolerance(a.run)
	if u, ok, err := a.deviceNear(t, tol); err != nil || ok {
		if ok {
			in.used = i64(u)
		}
		return err
	}
	var dev []storage.DeviceSample
	it := a.db.DeviceSamples(a.run, a.g.Index, t-windowLookBack, t+windowLookBack+1)
	for it.Next() {
		dev = append(dev, it.At())
	}
	if err := it.Err(); err != nil {
		return err
	}
	slices.SortStableFunc(dev, func(x, y storage.DeviceSample) int { return cmp.Compare(abs64(x.T-t), abs64(y.T-t)) })
	for _, d := range dev {
		res, ok, err := a.reservedNear(d.T, tol)
		if err != nil {
			return err
		}
		if ok && d.Used >= res {
			in.unseen, in.unseenAt = i64(d.Used-res), d.T
			return nil
		}
	}
	in.unseenWhy = fmt.Sprintf("no device sample within %s of the peak, nor one within %s of it with allocator samples of the same moment", units.FormatDuration(float64(tol)/1e9), units.FormatDuration(windowLookBack/1e9))
	return nil
}

// reservedNear is what the GPU's PyTorch processes reserved at t: each
// one's sample nearest t within tol, summed; false when one of them that
// was running then has none that near.
func (a *gpuAnalysis) reservedNear(t, tol int64) (int64, bool, error) {
	var sum int64
	for _, pid := range a.torchPIDs {
		it := a.db.TorchSamples(a.run, a.g.Index, pid, t-tol, t+tol+1)
		best, v := tol+1, int64(0)
		for it.Next() {
			if s := it.At(); abs64(s.T-t) < best {
				best, v = abs64(s.T-t), s.Reserved
			}
		}
		if err := it.Err(); err != nil {
			return 0, false, err
		}
		if best > tol {
			if len(a.torchPIDs) == 1 {
				return 0, false, nil
			}
			continue // a process not running then reserves nothing
		}
		sum += v
	}
	return sum, sum > 0, nil
}

// deviceNear is the device sample nearest to t within tol.
func (a *gpuAnalysis) deviceNear(t, tol int64) (used int64, ok bool, err error) {
	it := a.db.DeviceSamples(a.run, a.g.Index, t-tol, t+tol+1)
	best := tol + 1
	for it.Next() {
		s := it.At()
		if d := abs64(s.T - t); d < best {
			best, used, ok = d, s.Used, true
		}
	}
	return used, ok, it.Err()
}

// OOMBudget splits what the step that ran out of memory had and asked for:
// allocated at the OOM plus the request, less the watched model's own
// tensors at the OOM, is activations and temporaries. That need is a lower
// bound (the step would have gone on to allocate more), so the
// accumulation that would have fitted is a lower bound too.
type OOMBudget struct {
	NeedBytes int64         `json:"need_bytes"` // allocated + requested
	HaveBytes int64         `json:"have_bytes"` // allocated + free on the device
	Parts     []BudgetSlice `json:"parts"`      // shares of NeedBytes
	// Accumulation is the fewest micro-batches that would have fitted the
	// need (at least this many: the need is a lower bound); 0 when even
	// the model's own tensors do not fit.
	Accumulation int    `json:"accumulation_at_least,omitempty"`
	Words        string `json:"words"`
}

// oomBudget is the budget of a fatal OOM, or nil without memrec.watch or
// the OOM's request.
func oomBudget(o *OOM, bs *storage.BudgetSample, batch float64) *OOMBudget {
	if bs == nil || o.AllocatedBytes == nil || o.RequestedBytes == nil || o.FreeBytes == nil {
		return nil
	}
	need := *o.AllocatedBytes + *o.RequestedBytes
	have := *o.AllocatedBytes + *o.FreeBytes
	fx := bs.Fixed()
	act := max(0, need-fx)
	ob := &OOMBudget{NeedBytes: need, HaveBytes: have}
	for _, p := range []struct {
		part BudgetPart
		v    int64
	}{{PartActivations, act}, {PartOptimizer, bs.OptimizerState}, {PartParams, bs.Params}, {PartGrads, bs.Grads}, {PartBuffers, bs.Buffers}} {
		ob.Parts = append(ob.Parts, BudgetSlice{Part: p.part, Bytes: p.v, Share: float64(p.v) / float64(max(need, 1))})
	}
	slices.SortStableFunc(ob.Parts, func(x, y BudgetSlice) int { return cmp.Compare(y.Bytes, x.Bytes) })
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
		if o.FitKind == FitUpperBound {
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
