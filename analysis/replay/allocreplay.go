package replay

import (
	"fmt"
	"sort"

	"github.com/memrec/memrec/storage"
)

// The allocator replay: PyTorch's CUDA caching allocator (c10/cuda's
// CUDACachingAllocator, with its default configuration) played over a
// job's requests in their order, so that what it holds beyond the live
// tensors at the GPU's limit is computed rather than bounded. The rules it
// follows, as the allocator's source states them:
//
//   - a request is rounded up to 512 bytes; one of at most 1 MiB comes from
//     the small pool, larger ones from the large pool;
//   - a request takes the smallest free block of its pool that holds it (the
//     lowest address among equals); a block is split when what is left is
//     at least 512 bytes (small pool) or more than 1 MiB (large pool), the
//     request taking the lower part;
//   - with no free block, a segment is taken from the device: 2 MiB for a
//     small request, 20 MiB for one below 10 MiB, else the request rounded
//     up to 2 MiB;
//   - when the device has no room for it, the allocator releases every
//     cached segment that holds no live block and tries once more; if that
//     fails the job is out of memory;
//   - a freed block merges with the free blocks beside it in its segment.
//
// A request the job made and caught the out-of-memory error of (cuDNN
// trying a smaller workspace next) is tried the same way; where the replay
// serves it, it is given back at once (a workspace used and freed), and
// where not, the cache has been released and the replay goes on.
//
// The replay knows one stream (a block is free when torch's trace says its
// free completed). The settings of PYTORCH_CUDA_ALLOC_CONF that change
// these rules are in allocsettings.go.
const (
	replayMinBlock   = 512
	replaySmallSize  = 1 << 20
	replaySmallSeg   = 2 << 20
	replayMinLarge   = 10 << 20
	replayLargeSeg   = 20 << 20
	replayRoundLarge = 2 << 20
)

// ReplayResult is what the replay of a job's requests on a device of some
// capacity ended with.
type ReplayResult struct {
	OK bool // every request was served
	// FailedAt is the op that could not be served (with OK false).
	FailedAt int
	// PeakAllocated is the most bytes of live blocks (rounded) at once;
	// PeakReserved the most bytes of segments held at once.
	PeakAllocated, PeakReserved int64
	// Segments is how many segments were taken from the device in all;
	// Retries how often the allocator released its cache and tried again.
	Segments, Retries int
	// StrandedAtPeak is the free room inside segments that held a live
	// block at the moment of the most live bytes: what the allocator could
	// not have given back there.
	StrandedAtPeak int64
}

type replayBlock struct {
	ptr, size  int64
	seg        *replaySeg
	prev, next *replayBlock
	allocated  bool
	small      bool
	freedAt    int64 // the allocator's count of large-pool searches when it was last put in its pool
}

type replaySeg struct {
	size int64
	live int // allocated blocks in it
}

// replayPool is a pool's free blocks ordered by size, then address: the
// allocator's best fit is the first at or above a size.
type replayPool []*replayBlock

func (p replayPool) search(size, ptr int64) int {
	return sort.Search(len(p), func(i int) bool {
		b := p[i]
		return b.size > size || b.size == size && b.ptr >= ptr
	})
}

func (p *replayPool) insert(b *replayBlock) {
	i := p.search(b.size, b.ptr)
	*p = append(*p, nil)
	copy((*p)[i+1:], (*p)[i:])
	(*p)[i] = b
}

func (p *replayPool) remove(b *replayBlock) {
	i := p.search(b.size, b.ptr)
	if i >= len(*p) || (*p)[i] != b {
		panic("allocator replay: free block not in its pool")
	}
	*p = append((*p)[:i], (*p)[i+1:]...)
}

type replayAllocator struct {
	capacity       int64 // bytes of segments the device can hold; <= 0 is unlimited
	reserved       int64
	allocated      int64
	pools          [2]replayPool // small, large
	segs           map[*replaySeg]struct{}
	nextPtr        int64
	segments       int
	retries        int
	peakAllocated  int64
	peakReserved   int64
	strandedAtPeak int64
	cfg            AllocSettings
	searches       int64          // large-pool searches, the garbage collector's clock
	exp            [2]*expSegment // with expandable segments: small, large
	onPeak         func()         // called at each new most live bytes, where set
}

func replayRound(size int64) int64 {
	if size < replayMinBlock {
		return replayMinBlock
	}
	return (size + replayMinBlock - 1) / replayMinBlock * replayMinBlock
}

func replaySegmentSize(size int64) int64 {
	switch {
	case size <= replaySmallSize:
		return replaySmallSeg
	case size < replayMinLarge:
		return replayLargeSeg
	}
	return (size + replayRoundLarge - 1) / replayRoundLarge * replayRoundLarge
}

func (a *replayAllocator) pool(small bool) *replayPool {
	if small {
		return &a.pools[0]
	}
	return &a.pools[1]
}

// malloc serves one request, or returns nil where the device is full.
func (a *replayAllocator) malloc(req int64) *replayBlock {
	if a.cfg.ExpandableSegments {
		return a.mallocExpandable(req)
	}
	size := a.round(req)
	small := size <= replaySmallSize
	p := a.pool(small)
	var b *replayBlock
	if b = a.freeBlock(p, size, small); b != nil {
		p.remove(b)
	} else {
		seg := replaySegmentSize(size)
		a.collectGarbage()
		if a.capacity > 0 && a.reserved+seg > a.capacity && (!a.releaseOversize(size, small) || a.reserved+seg > a.capacity) {
			a.releaseCached()
			a.retries++
			if a.reserved+seg > a.capacity {
				return nil
			}
		}
		s := &replaySeg{size: seg}
		a.segs[s] = struct{}{}
		b = &replayBlock{ptr: a.nextPtr, size: seg, seg: s, small: small}
		a.nextPtr += seg
		a.reserved += seg
		a.segments++
		a.peakReserved = max(a.peakReserved, a.reserved)
	}
	return a.take(b, size, small)
}

// take serves a request of size bytes from the free block b, split where
// the rules say.
func (a *replayAllocator) take(b *replayBlock, size int64, small bool) *replayBlock {
	p := a.pool(small)
	rest := b.size - size
	if a.shouldSplit(small, size, rest) {
		r := &replayBlock{ptr: b.ptr + size, size: rest, seg: b.seg, prev: b, next: b.next, small: small, freedAt: a.searches}
		if b.next != nil {
			b.next.prev = r
		}
		b.next = r
		b.size = size
		p.insert(r)
	}
	b.allocated = true
	b.seg.live++
	a.allocated += b.size
	if a.allocated > a.peakAllocated {
		a.peakAllocated = a.allocated
		a.strandedAtPeak = a.stranded()
		a.atPeak()
	}
	return b
}

// stranded is the free room in segments that hold a live block.
func (a *replayAllocator) stranded() int64 {
	var n int64
	for _, p := range a.pools {
		for _, b := range p {
			if b.seg.live > 0 {
				n += b.size
			}
		}
	}
	return n
}

func (a *replayAllocator) free(b *replayBlock) {
	if a.cfg.ExpandableSegments {
		a.unref(b)
	}
	b.allocated = false
	b.seg.live--
	a.allocated -= b.size
	p := a.pool(b.small)
	if n := b.prev; n != nil && !n.allocated {
		p.remove(n)
		n.size += b.size
		n.next = b.next
		if b.next != nil {
			b.next.prev = n
		}
		b = n
	}
	if n := b.next; n != nil && !n.allocated {
		p.remove(n)
		b.size += n.size
		b.next = n.next
		if n.next != nil {
			n.next.prev = b
		}
	}
	b.freedAt = a.searches
	p.insert(b)
}

// releaseCached gives back every segment that is one free block.
func (a *replayAllocator) releaseCached() {
	if a.cfg.ExpandableSegments {
		a.unmapUnused()
		return
	}
	for i := range a.pools {
		kept := a.pools[i][:0]
		for _, b := range a.pools[i] {
			if b.prev == nil && b.next == nil {
				a.reserved -= b.size
				delete(a.segs, b.seg)
				continue
			}
			kept = append(kept, b)
		}
		a.pools[i] = kept
	}
}

// ReplayAllocator plays ops through the caching allocator on a device whose
// segments may total capacity bytes (<= 0: unlimited). It stops at the
// first request that does not fit. An op that frees what was never
// allocated is an error.
func ReplayAllocator(ops []storage.AllocOp, capacity int64) (ReplayResult, error) {
	return ReplayAllocatorWith(ops, capacity, AllocSettings{})
}

// ReplayAllocatorWith is ReplayAllocator with the allocator configured by
// cfg (the zero value is PyTorch's default).
func ReplayAllocatorWith(ops []storage.AllocOp, capacity int64, cfg AllocSettings) (ReplayResult, error) {
	return newReplayAllocator(capacity, cfg).replay(ops)
}

// replay plays ops through a, leaving a as the last op left it.
func (a *replayAllocator) replay(ops []storage.AllocOp) (ReplayResult, error) {
	live := make([]*replayBlock, len(ops))
	for i, op := range ops {
		if op.Free {
			if op.Of < 0 || int(op.Of) >= i || live[op.Of] == nil {
				return ReplayResult{}, fmt.Errorf("allocator replay: op %d frees op %d, which holds nothing", i, op.Of)
			}
			a.free(live[op.Of])
			live[op.Of] = nil
			continue
		}
		b := a.malloc(op.Size)
		switch {
		case op.Failed && b != nil:
			a.free(b) // served here: a workspace used and given back
		case op.Failed:
		case b == nil:
			return a.result(false, i), nil
		default:
			live[i] = b
		}
	}
	return a.result(true, 0), nil
}

func (a *replayAllocator) result(ok bool, failed int) ReplayResult {
	return ReplayResult{OK: ok, FailedAt: failed, PeakAllocated: a.peakAllocated, PeakReserved: a.peakReserved,
		Segments: a.segments, Retries: a.retries, StrandedAtPeak: a.strandedAtPeak}
}

// LastFailed is the index of the last failed request of ops (the one that
// ended a run that ran out of memory), or -1.
func LastFailed(ops []storage.AllocOp) int {
	for i := len(ops) - 1; i >= 0; i-- {
		if ops[i].Failed {
			return i
		}
	}
	return -1
}
