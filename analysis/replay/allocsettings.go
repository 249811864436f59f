package replay

import (
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	"github.com/memrec/memrec/storage"
)

// The settings of PYTORCH_CUDA_ALLOC_CONF that change how the caching
// allocator packs, each as a rule of the replay (allocreplay.go), as
// c10/cuda/CUDACachingAllocator.cpp and its configuration parser state them:
//
//   - roundup_power2_divisions:N (or [MB:N,...,>:N] per power-of-two size
//     range from 1 MiB up): a request above 512·N bytes is rounded up to
//     the next of N equal steps between two powers of two, instead of to
//     512 bytes;
//   - max_split_size_mb:N: a block of at least N MiB is never split; a
//     request below N MiB never takes such a block, and one of N MiB or
//     more takes one only if it is less than 20 MiB larger (the rounding
//     of an unsplit block); short of room, the allocator first gives back
//     such cached blocks (the smallest that holds the request, else the
//     largest ones until enough), and only then the whole cache;
//   - garbage_collection_threshold:F: when a request finds no free block
//     and the segments held exceed F of the memory allowed, the cached
//     segments that are one free block (of the large pool) are given back,
//     the least recently used first (those searched past at least as
//     often as the average, again until enough), before a new segment is
//     taken; PyTorch does this only where a memory fraction is set, which
//     the replay takes to be the device's room;
//   - expandable_segments:True: each pool is one range of addresses backed
//     by pages (20 MiB for the large pool, 2 MiB for the small) mapped as
//     blocks need them, so a new request extends the range instead of
//     taking a segment, and short of room every page no live block touches
//     is unmapped: only the pages live blocks share strand room. A block is
//     split when at least 512 bytes are left.
type AllocSettings struct {
	ExpandableSegments bool
	// MaxSplitSize is in bytes; 0 is no limit.
	MaxSplitSize int64
	// GarbageCollectionThreshold is a share of the room; 0 is off.
	GarbageCollectionThreshold float64
	// RoundupDivisions is, per size range (1 MiB and below, then each
	// power of two up to 32 GiB and above), the divisions; 0 or 1 is none.
	RoundupDivisions [roundupIntervals]int
	conf             string
}

// roundupIntervals is how many size ranges roundup_power2_divisions
// configures (kRoundUpPowerOfTwoIntervals).
const roundupIntervals = 16

// Pages of an expandable segment, and the rounding an unsplit block may
// take (max_non_split_rounding_size's default, kLargeBuffer).
const (
	expPageLarge      = replayLargeSeg
	expPageSmall      = replaySmallSeg
	maxNonSplitRounds = replayLargeSeg
	expAddressSpace   = 1 << 46 // a pool's range of addresses: beyond any device
)

// ErrAllocConf is ParseAllocSettings's error for a setting it cannot read
// or does not model.
var ErrAllocConf = errors.New("allocator setting")

// ParseAllocSettings reads PYTORCH_CUDA_ALLOC_CONF's form ("" or
// "default" is the default): key:value pairs separated by commas.
func ParseAllocSettings(conf string) (AllocSettings, error) {
	var s AllocSettings
	conf = strings.TrimSpace(conf)
	if conf == "" || conf == "default" {
		return s, nil
	}
	s.conf = conf
	for _, kv := range splitConf(conf) {
		k, v, ok := strings.Cut(kv, ":")
		if !ok {
			return s, fmt.Errorf("%w %q: want key:value", ErrAllocConf, kv)
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		switch k {
		case "expandable_segments":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return s, fmt.Errorf("%w %q: want True or False", ErrAllocConf, kv)
			}
			s.ExpandableSegments = b
		case "max_split_size_mb":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= replayLargeSeg>>20 {
				return s, fmt.Errorf("%w %q: want a whole number of MiB above %d", ErrAllocConf, kv, replayLargeSeg>>20)
			}
			s.MaxSplitSize = n << 20
		case "garbage_collection_threshold":
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 || f >= 1 {
				return s, fmt.Errorf("%w %q: want a share between 0 and 1", ErrAllocConf, kv)
			}
			s.GarbageCollectionThreshold = f
		case "roundup_power2_divisions":
			if err := s.parseDivisions(v); err != nil {
				return s, fmt.Errorf("%w %q: %v", ErrAllocConf, kv, err)
			}
		default:
			return s, fmt.Errorf("%w %q: not one the replay models (expandable_segments, max_split_size_mb, garbage_collection_threshold, roundup_power2_divisions)", ErrAllocConf, k)
		}
	}
	return s, nil
}

// splitConf splits at the commas outside brackets.
func splitConf(conf string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range conf {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, conf[start:i])
				start = i + 1
			}
		}
	}
	return append(out, conf[start:])
}

func (s *AllocSettings) parseDivisions(v string) error {
	if !strings.HasPrefix(v, "[") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 1 && n&(n-1) != 0 {
			return errors.New("want a power of two")
		}
		for i := range s.RoundupDivisions {
			s.RoundupDivisions[i] = n
		}
		return nil
	}
	if !strings.HasSuffix(v, "]") {
		return errors.New("an unclosed [")
	}
	first, last := true, 0
	for _, kv := range strings.Split(v[1:len(v)-1], ",") {
		k, d, ok := strings.Cut(kv, ":")
		n, err := strconv.Atoi(strings.TrimSpace(d))
		if !ok || err != nil || n < 0 || n > 1 && n&(n-1) != 0 {
			return fmt.Errorf("%q: want MiB:divisions, a power of two", kv)
		}
		if k = strings.TrimSpace(k); k == ">" {
			// As PyTorch: from the last range named on, that one included.
			for i := last; i < roundupIntervals; i++ {
				s.RoundupDivisions[i] = n
			}
			continue
		}
		mb, err := strconv.ParseUint(k, 10, 64)
		if err != nil || mb == 0 || mb&(mb-1) != 0 {
			return fmt.Errorf("%q: want a power of two of MiB", kv)
		}
		i := min(bits.Len64(mb)-1, roundupIntervals-1)
		if first {
			for j := range i {
				s.RoundupDivisions[j] = n
			}
			first = false
		}
		s.RoundupDivisions[i], last = n, i
	}
	return nil
}

// String is the setting as PYTORCH_CUDA_ALLOC_CONF spells it, "default"
// for the zero value.
func (s AllocSettings) String() string {
	if s.conf == "" {
		return "default"
	}
	return s.conf
}

// divisions is roundup_power2_divisions for a request of size bytes.
func (s AllocSettings) divisions(size int64) int {
	i := bits.Len64(uint64(size)) - 1 - 20
	return s.RoundupDivisions[max(0, min(i, roundupIntervals-1))]
}

func newReplayAllocator(capacity int64, cfg AllocSettings) *replayAllocator {
	return &replayAllocator{capacity: capacity, segs: map[*replaySeg]struct{}{}, cfg: cfg}
}

// round is the allocator's round_size.
func (a *replayAllocator) round(size int64) int64 {
	if size < replayMinBlock {
		return replayMinBlock
	}
	if d := int64(a.cfg.divisions(size)); d > 1 && size > replayMinBlock*d {
		return roundupPower2Division(size, d)
	}
	return replayRound(size)
}

// roundupPower2Division rounds size up to the next of d (a power of two)
// equal steps between the powers of two around it.
func roundupPower2Division(size, d int64) int64 {
	if size&(size-1) == 0 {
		return size
	}
	floor := int64(1) << (bits.Len64(uint64(size)) - 1)
	step := floor >> (bits.Len64(uint64(d)) - 1)
	if step == 0 {
		return floor << 1
	}
	if r := size &^ (step - 1); r != size {
		return r + step
	}
	return size
}

// freeBlock is the free block of pool p a request of size bytes takes,
// or nil: the smallest that holds it, unless max_split_size rules it out.
func (a *replayAllocator) freeBlock(p *replayPool, size int64, small bool) *replayBlock {
	if !small && a.cfg.GarbageCollectionThreshold > 0 && a.capacity > 0 {
		a.searches++
	}
	i := p.search(size, 0)
	if i >= len(*p) {
		return nil
	}
	b := (*p)[i]
	if ms := a.cfg.MaxSplitSize; ms > 0 && !a.cfg.ExpandableSegments {
		if size < ms && b.size >= ms || size >= ms && b.size >= size+maxNonSplitRounds {
			return nil
		}
	}
	return b
}

// shouldSplit says whether a block that serves a request of size bytes
// with rest bytes left over is split.
func (a *replayAllocator) shouldSplit(small bool, size, rest int64) bool {
	if small || a.cfg.ExpandableSegments {
		return rest >= replayMinBlock
	}
	if ms := a.cfg.MaxSplitSize; ms > 0 && size >= ms {
		return false
	}
	return rest > replaySmallSize
}

// releaseSegment gives back the cached segment that is the free block b.
func (a *replayAllocator) releaseSegment(b *replayBlock) {
	a.pool(b.small).remove(b)
	a.reserved -= b.size
	delete(a.segs, b.seg)
}

// collectGarbage is garbage_collection_threshold's collection.
func (a *replayAllocator) collectGarbage() {
	t := a.cfg.GarbageCollectionThreshold
	if t <= 0 || a.capacity <= 0 {
		return
	}
	limit := int64(t * float64(a.capacity))
	if a.reserved <= limit {
		return
	}
	target := a.reserved - limit
	var freeable []*replayBlock
	var age float64
	for _, b := range a.pools[1] {
		if b.prev == nil && b.next == nil {
			freeable = append(freeable, b)
			age += float64(a.searches - b.freedAt)
		}
	}
	var reclaimed int64
	for freed := true; reclaimed < target && freed && len(freeable) > 0; {
		threshold := age / float64(len(freeable))
		freed = false
		kept := freeable[:0]
		for _, b := range freeable {
			if g := float64(a.searches - b.freedAt); g >= threshold {
				freed = true
				reclaimed += b.size
				age -= g
				a.releaseSegment(b)
				continue
			}
			kept = append(kept, b)
		}
		freeable = kept
	}
}

// releaseOversize is max_split_size's first resort short of room: the
// smallest cached unsplit block of at least the larger of size and
// max_split_size, else the largest such blocks until that much is given
// back. It reports whether it gave back enough.
func (a *replayAllocator) releaseOversize(size int64, small bool) bool {
	ms := a.cfg.MaxSplitSize
	if ms <= 0 {
		return false
	}
	p := a.pool(small)
	key := max(size, ms)
	if i := p.search(key, 0); i < len(*p) {
		if b := (*p)[i]; b.prev == nil && b.next == nil {
			a.releaseSegment(b)
			return true
		}
		return false
	}
	var released int64
	for i := len(*p) - 1; i >= 0 && released < key; i-- {
		b := (*p)[i]
		if b.size < ms {
			break
		}
		if b.prev == nil && b.next == nil {
			released += b.size
			a.releaseSegment(b)
		}
	}
	return released >= key
}

// expSegment is a pool's expandable segment: its range of addresses, one
// free block at first, and the pages mapped under it.
type expSegment struct {
	base, page int64
	refs       map[int64]int32 // per page: the live blocks on it
	mapped     map[int64]bool
}

func (a *replayAllocator) expandable(small bool) *expSegment {
	i, page, base := 1, int64(expPageLarge), int64(expAddressSpace)
	if small {
		i, page, base = 0, expPageSmall, 0
	}
	if a.exp[i] == nil {
		e := &expSegment{base: base, page: page, refs: map[int64]int32{}, mapped: map[int64]bool{}}
		s := &replaySeg{size: expAddressSpace}
		a.segs[s] = struct{}{}
		a.pool(small).insert(&replayBlock{ptr: base, size: expAddressSpace, seg: s, small: small})
		a.exp[i] = e
		a.segments++
	}
	return a.exp[i]
}

func (e *expSegment) pages(ptr, size int64) (first, last int64) {
	return (ptr - e.base) / e.page, (ptr + size - 1 - e.base) / e.page
}

// unmapped is how many pages under [ptr, ptr+size) are not mapped.
func (e *expSegment) unmapped(ptr, size int64) int64 {
	first, last := e.pages(ptr, size)
	var n int64
	for i := first; i <= last; i++ {
		if !e.mapped[i] {
			n++
		}
	}
	return n
}

// mallocExpandable serves a request from the pool's expandable segment,
// or returns nil where the device is full.
func (a *replayAllocator) mallocExpandable(req int64) *replayBlock {
	size := a.round(req)
	small := size <= replaySmallSize
	e := a.expandable(small)
	b := a.freeBlock(a.pool(small), size, small)
	if b == nil {
		return nil
	}
	need := e.unmapped(b.ptr, size) * e.page
	if a.capacity > 0 && a.reserved+need > a.capacity {
		a.releaseCached()
		a.retries++
		if need = e.unmapped(b.ptr, size) * e.page; a.reserved+need > a.capacity {
			return nil
		}
	}
	a.pool(small).remove(b)
	first, last := e.pages(b.ptr, size)
	for i := first; i <= last; i++ {
		if !e.mapped[i] {
			e.mapped[i] = true
			a.reserved += e.page
		}
		e.refs[i]++
	}
	a.peakReserved = max(a.peakReserved, a.reserved)
	return a.take(b, size, small)
}

// unref takes a live block of an expandable segment off its pages.
func (a *replayAllocator) unref(b *replayBlock) {
	e := a.exp[1]
	if b.small {
		e = a.exp[0]
	}
	first, last := e.pages(b.ptr, b.size)
	for i := first; i <= last; i++ {
		if e.refs[i]--; e.refs[i] == 0 {
			delete(e.refs, i)
		}
	}
}

// unmapUnused unmaps every page no live block touches.
func (a *replayAllocator) unmapUnused() {
	for _, e := range a.exp {
		if e == nil {
			continue
		}
		for i := range e.mapped {
			if e.refs[i] == 0 {
				delete(e.mapped, i)
				a.reserved -= e.page
			}
		}
	}
}

// touched is the bytes of the pages live blocks touch.
func (a *replayAllocator) touched() int64 {
	var n int64
	for _, e := range a.exp {
		if e != nil {
			n += int64(len(e.refs)) * e.page
		}
	}
	return n
}

// atPeak keeps what the replay reports of the moment of the most live
// bytes.
func (a *replayAllocator) atPeak() {
	if a.cfg.ExpandableSegments {
		a.strandedAtPeak = a.touched() - a.allocated
	}
	if a.onPeak != nil {
		a.onPeak()
	}
}

// strandedNow is the room the allocator cannot give back now: free room
// in segments that hold live blocks, or with expandable segments the
// unused part of the pages live blocks touch.
func (a *replayAllocator) strandedNow() int64 {
	if a.cfg.ExpandableSegments {
		return a.touched() - a.allocated
	}
	return a.stranded()
}

// largestServable is the largest request of the large pool the allocator
// could serve now on a device of its capacity, after giving back what it
// can.
func (a *replayAllocator) largestServable() int64 {
	if a.capacity <= 0 {
		return 0
	}
	if a.cfg.ExpandableSegments {
		return max(0, (a.capacity-a.touched())/expPageLarge*expPageLarge)
	}
	var largest, cached int64
	for _, p := range a.pools {
		for _, b := range p {
			if b.prev == nil && b.next == nil {
				cached += b.size
			} else if !b.small {
				largest = max(largest, b.size)
			}
		}
	}
	room := (a.capacity - a.reserved + cached) / replayRoundLarge * replayRoundLarge
	return max(largest, room)
}

// WhatIf is one allocator setting replayed over a run's requests on its
// device: the most segments held, whether every request was served, and
// at the moment that decided it (the request that failed, else the most
// live bytes) the room the allocator could not give back (Stranded) and
// the largest request it could have served there.
type WhatIf struct {
	Setting           string `json:"setting"`
	PeakReservedBytes int64  `json:"peak_reserved_bytes"`
	Fits              bool   `json:"fits"`
	StrandedBytes     int64  `json:"stranded_bytes"`
	LargestBytes      int64  `json:"largest_request_bytes"`
}

// WhatIfSettings are the settings tried after the default: those users
// try first when an OOM says memory is reserved but unallocated.
var WhatIfSettings = []string{
	"expandable_segments:True",
	"max_split_size_mb:512",
	"garbage_collection_threshold:0.6",
	"roundup_power2_divisions:4",
}

// WhatIfs replays ops on a device of capacity bytes of segments under the
// default allocator and each of WhatIfSettings, the default first.
func WhatIfs(ops []storage.AllocOp, capacity int64) ([]WhatIf, error) {
	out := make([]WhatIf, 0, 1+len(WhatIfSettings))
	for _, conf := range append([]string{"default"}, WhatIfSettings...) {
		cfg, err := ParseAllocSettings(conf)
		if err != nil {
			return nil, err
		}
		w, err := whatIf(ops, capacity, cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func whatIf(ops []storage.AllocOp, capacity int64, cfg AllocSettings) (WhatIf, error) {
	a := newReplayAllocator(capacity, cfg)
	var largestAtPeak, strandedAtPeak int64
	a.onPeak = func() {
		strandedAtPeak, largestAtPeak = a.strandedNow(), a.largestServable()
	}
	r, err := a.replay(ops)
	if err != nil {
		return WhatIf{}, err
	}
	w := WhatIf{Setting: cfg.String(), PeakReservedBytes: r.PeakReserved, Fits: r.OK, StrandedBytes: strandedAtPeak, LargestBytes: largestAtPeak}
	if !r.OK {
		w.StrandedBytes, w.LargestBytes = a.strandedNow(), a.largestServable()
	}
	return w, nil
}
