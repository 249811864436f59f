// Package torchsnap reads the memory snapshots PyTorch writes
// (torch.cuda.memory._snapshot() pickled, or torch.cuda.memory._dump_snapshot)
// and turns them into memrec's allocation-site snapshots.
//
// A snapshot holds the allocator's segments with their blocks (size,
// state, and the Python stack that allocated each one when the history was
// on) and, when the history recorded events, a trace per device of allocs
// and frees with their times in Unix microseconds. The live bytes by site
// at the end come from the blocks; the live bytes by site earlier come from
// walking the trace backwards from that end (at moments spread over the
// trace's events, not its time): an alloc undone removes its
// bytes from its site, a free undone gives them back. So blocks allocated
// before the trace began are counted too, from the moment the walk starts.
//
// A block's site is the innermost frame in the user's code, by the rule
// the probe applies (docs/format.md): FrameKind. Entries that make no sense
// (a block without a size, a frame without a file) are dropped and counted
// in Snapshot.Bad. Reading is not safe to share between goroutines; a read
// Snapshot is immutable.
package torchsnap

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"math/big"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// ErrNotSnapshot is returned for input that is not a pickled PyTorch
// memory snapshot.
var ErrNotSnapshot = errors.New("not a PyTorch memory snapshot")

// MaxStack is the number of callers kept with a site, for display.
const MaxStack = 4

// Frame is one Python frame of an allocation's stack.
type Frame struct {
	File string
	Line int
	Func string
}

// Block is one block of a segment.
type Block struct {
	Addr   int64
	Size   int64
	State  string // active_allocated, active_pending_free (or active_awaiting_free), inactive
	Frames []Frame
}

// Live reports whether the block is allocated (or freed but still in use
// by a stream).
func (b Block) Live() bool {
	switch b.State {
	case "active_allocated", "active_pending_free", "active_awaiting_free":
		return true
	}
	return false
}

// Event is one trace entry.
type Event struct {
	Action string // alloc, free_requested, free_completed, segment_alloc, segment_free, oom, snapshot, ...
	Addr   int64
	Size   int64
	TimeUS int64 // Unix microseconds
	Frames []Frame
}

// Snapshot is a decoded snapshot: the blocks of each device and its trace.
type Snapshot struct {
	Blocks map[int][]Block // by device
	Traces map[int][]Event // by device, in time order
	Bad    int             // entries dropped

	sites int // Limits.Sites; 0: DefaultLimits'
}

// Is reports whether data starts like a pickle that memrec can read
// (protocol 2 to 5).
func Is(head []byte) bool {
	return len(head) >= 2 && head[0] == 0x80 && head[1] >= 2 && head[1] <= 5
}

// Read decodes one pickled snapshot within DefaultLimits.
func Read(r io.Reader) (*Snapshot, error) { return ReadLimits(r, DefaultLimits) }

// ReadLimits decodes one pickled snapshot within lim. An input past a
// limit is refused with a *LimitError (errors.Is ErrTooLarge); one that is
// not a snapshot with ErrNotSnapshot.
func ReadLimits(r io.Reader, lim Limits) (*Snapshot, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	head, _ := br.Peek(2)
	if !Is(head) {
		return nil, ErrNotSnapshot
	}
	v, err := decodePickle(br, lim)
	if errors.Is(err, ErrTooLarge) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("%w: pickle: %v", ErrNotSnapshot, err)
	}
	top, ok := v.(dict)
	if !ok {
		return nil, fmt.Errorf("%w: the pickle holds a %s, not a dict", ErrNotSnapshot, pyType(v))
	}
	segs, ok := items(top["segments"])
	if !ok {
		return nil, fmt.Errorf("%w: no \"segments\" list", ErrNotSnapshot)
	}
	rd := &reader{lim: lim, frames: map[any][]Frame{}}
	s := &Snapshot{Blocks: map[int][]Block{}, Traces: map[int][]Event{}, sites: lim.Sites}
	for _, sv := range segs {
		seg, ok := sv.(dict)
		dev, okd := toInt(seg["device"])
		blocks, okb := items(seg["blocks"])
		if !ok || !okd || !okb || dev < 0 || dev > maxDevice {
			s.Bad++
			continue
		}
		for _, bv := range blocks {
			b, ok := bv.(dict)
			size, oks := toInt(b["size"])
			state, okt := b["state"].(string)
			if !ok || !oks || !okt || size < 0 {
				s.Bad++
				continue
			}
			if rd.blocks++; rd.blocks > lim.Blocks {
				return nil, &LimitError{What: "blocks", Limit: int64(lim.Blocks)}
			}
			addr, _ := toInt(b["address"])
			fr, bad := rd.stack(b["frames"])
			s.Bad += bad
			s.Blocks[int(dev)] = append(s.Blocks[int(dev)], Block{Addr: addr, Size: size, State: state, Frames: fr})
		}
	}
	traces, _ := items(top["device_traces"])
	if len(traces) > maxDevice+1 {
		return nil, &LimitError{What: "device traces", Limit: maxDevice + 1, Got: int64(len(traces))}
	}
	for dev, tv := range traces {
		entries, ok := items(tv)
		if !ok {
			s.Bad++
			continue
		}
		for i, ev := range entries {
			e, ok := ev.(dict)
			action, oka := e["action"].(string)
			t, okt := toInt(e["time_us"])
			if !ok || !oka || !okt {
				s.Bad++
				continue
			}
			if t < 0 || t >= maxTimeUS {
				return nil, fmt.Errorf("%w: device %d, trace entry %d: time_us %d is outside 1970..2200", ErrNotSnapshot, dev, i, t)
			}
			if rd.entries++; rd.entries > lim.Entries {
				return nil, &LimitError{What: "trace entries", Limit: int64(lim.Entries)}
			}
			size, _ := toInt(e["size"])
			addr, _ := toInt(e["addr"])
			var fr []Frame
			if action == "alloc" { // a free's stack is where it was freed: not needed
				var bad int
				fr, bad = rd.stack(e["frames"])
				s.Bad += bad
			}
			s.Traces[dev] = append(s.Traces[dev], Event{Action: action, Addr: addr, Size: size, TimeUS: t, Frames: fr})
		}
		slices.SortStableFunc(s.Traces[dev], func(a, b Event) int { return cmp.Compare(a.TimeUS, b.TimeUS) })
	}
	return s, nil
}

// maxDevice is the highest CUDA device index read (storage keeps GPU
// indices up to 65 535).
const maxDevice = 1 << 16

// reader holds what Read has expanded so far.
type reader struct {
	lim             Limits
	blocks, entries int
	// frames keeps each frame list converted, by its identity: torch
	// shares one list between every block and entry with the same stack,
	// and a memo bomb shares one among millions.
	frames map[any][]Frame
}

// stack decodes a list of frame dicts, once per list; it returns the
// number of frames that made no sense, dropped. Past lim.Frames the outer
// frames are left out.
func (rd *reader) stack(v any) ([]Frame, int) {
	var key any
	switch l := v.(type) {
	case *list:
		key = l
	case tuple:
		if len(l) > 0 {
			key = &l[0]
		}
	}
	if key != nil {
		if f, ok := rd.frames[key]; ok {
			return f, 0 // its bad frames were counted once
		}
	}
	f, bad := frames(v, rd.lim.Frames)
	if key != nil {
		rd.frames[key] = f
	}
	return f, bad
}

// frames decodes a list of up to max frame dicts; it returns the number of
// frames that made no sense, dropped.
func frames(v any, max int) ([]Frame, int) {
	list, ok := items(v)
	if !ok || len(list) == 0 {
		return nil, 0
	}
	if len(list) > max {
		list = list[:max]
	}
	out := make([]Frame, 0, len(list))
	bad := 0
	for _, fv := range list {
		f, ok := fv.(dict)
		file, okf := f["filename"].(string)
		line, okl := toInt(f["line"])
		if !ok || !okf || !okl {
			bad++
			continue
		}
		name, _ := f["name"].(string)
		out = append(out, Frame{File: file, Line: int(line), Func: name})
	}
	return out, bad
}

// items returns the items of a list or tuple.
func items(v any) ([]any, bool) {
	switch l := v.(type) {
	case *list:
		return l.items, true
	case tuple:
		return l, true
	}
	return nil, false
}

func toInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case *big.Int:
		if n.IsInt64() {
			return n.Int64(), true
		}
	case bool:
		if n {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// Frame kinds: the user's code, an installed package other than torch, and
// what a site never is (torch, the standard library, not Python).
const (
	KindUser = iota
	KindPackage
	KindInternal
)

// FrameKind classifies a frame's file by its path alone, as the probe does
// (docs/format.md).
func FrameKind(file string) int {
	if file == "" || file[0] == '<' || !strings.HasSuffix(file, ".py") {
		return KindInternal
	}
	parts := strings.Split(strings.ReplaceAll(file, "\\", "/"), "/")
	for i, p := range parts[:len(parts)-1] {
		if p == "site-packages" || p == "dist-packages" {
			if parts[i+1] == "torch" {
				return KindInternal
			}
			return KindPackage
		}
	}
	for i, p := range parts[:len(parts)-1] {
		if strings.HasPrefix(p, "python3") && i > 0 && (parts[i-1] == "lib" || parts[i-1] == "lib64") {
			return KindInternal
		}
	}
	return KindUser
}

// SiteOf returns the index of the site's frame among frames (innermost
// first): the innermost user frame, else the innermost installed package's,
// else the innermost; -1 without frames.
func SiteOf(frames []Frame) int {
	fallback := -1
	for i, f := range frames {
		switch FrameKind(f.File) {
		case KindUser:
			return i
		case KindPackage:
			if fallback < 0 {
				fallback = i
			}
		}
	}
	if fallback < 0 && len(frames) > 0 {
		return 0
	}
	return fallback
}

// site is one site's figures while a snapshot is built.
type site struct {
	row  storage.SiteSample
	live int64 // bytes, during the backward walk
	n    int64 // blocks, during the backward walk
}

// sites keys sites by file and line; nil stands for the untracked entry.
type sites struct {
	byKey     map[string]*site
	order     []*site
	untracked site
}

func newSites() *sites {
	s := &sites{byKey: map[string]*site{}}
	s.untracked.row.File = wire.SiteUntracked
	return s
}

func (ss *sites) of(frames []Frame) *site {
	i := SiteOf(frames)
	if i < 0 {
		return &ss.untracked
	}
	f := frames[i]
	key := f.File + ":" + strconv.Itoa(f.Line)
	if s, ok := ss.byKey[key]; ok {
		return s
	}
	var stack []string
	for _, up := range frames[i+1:] {
		if len(stack) == MaxStack {
			break
		}
		if FrameKind(up.File) != KindInternal {
			stack = append(stack, fmt.Sprintf("%s:%d %s", path.Base(strings.ReplaceAll(up.File, "\\", "/")), up.Line, up.Func))
		}
	}
	s := &site{row: storage.SiteSample{File: f.File, Line: f.Line, Func: f.Func, Stack: strings.Join(stack, "\n")}}
	ss.byKey[key] = s
	ss.order = append(ss.order, s)
	return s
}

// maxSitesLine bounds a site snapshot's encoded line: half of what an
// import reads as one line (4 MiB), so a snapshot of many sites imports.
const maxSitesLine = 2 << 20

// siteLineBytes is at most how many bytes a row takes in a sites line:
// its strings escaped at worst (6 bytes a byte, \u00XX) and its numbers.
func siteLineBytes(r storage.SiteSample) int {
	return 6*(len(r.File)+len(r.Func)+len(r.Stack)) + 200
}

// rows returns the snapshot's rows with head's fields: the untracked entry,
// then the sites with live bytes or events, by live bytes. Past max sites,
// or past maxSitesLine bytes, the rest are added up as one SiteOther row
// (their live bytes and blocks; their event counts are not kept).
func (ss *sites) rows(head storage.SiteSample, withEvents bool, max int) []storage.SiteSample {
	out := []storage.SiteSample{ss.untracked.row}
	var rest []storage.SiteSample
	for _, s := range ss.order {
		if s.row.LiveBytes > 0 || (withEvents && (s.row.Allocs > 0 || s.row.Frees > 0)) {
			rest = append(rest, s.row)
		}
	}
	slices.SortStableFunc(rest, func(a, b storage.SiteSample) int {
		if c := cmp.Compare(b.LiveBytes, a.LiveBytes); c != 0 {
			return c
		}
		return cmp.Compare(b.AllocBytes, a.AllocBytes)
	})
	if max < 1 {
		max = DefaultLimits.Sites
	}
	keep, size := 0, 0
	for keep < len(rest) && keep < max {
		if size += siteLineBytes(rest[keep]); size > maxSitesLine {
			break
		}
		keep++
	}
	var other []storage.SiteSample
	if keep < len(rest) {
		o := storage.SiteSample{File: wire.SiteOther, Sites: int64(len(rest) - keep)}
		for _, r := range rest[keep:] {
			o.LiveBytes += r.LiveBytes
			o.LiveBlocks += r.LiveBlocks
		}
		other = []storage.SiteSample{o}
	}
	out = append(out, rest[:keep]...)
	out = append(out, other...)
	for i := range out {
		r := &out[i]
		r.T, r.GPU, r.PID, r.Rank, r.Reason, r.Epoch, r.Name, r.SinceNS = head.T, head.GPU, head.PID, head.Rank, head.Reason, head.Epoch, head.Name, head.SinceNS
		if !withEvents {
			r.AllocBytes, r.Allocs, r.FreedBytes, r.Frees = 0, 0, 0, 0
		}
	}
	return out
}

// Devices lists the devices the snapshot has blocks or a trace of.
func (s *Snapshot) Devices() []int {
	var out []int
	for d := range s.Blocks {
		out = append(out, d)
	}
	for d, t := range s.Traces {
		if _, ok := s.Blocks[d]; !ok && len(t) > 0 {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// Snapshots turns one device's blocks and trace into site snapshots: with
// a trace, up to points snapshots spread evenly over it (reason "trace")
// and one at its last event with the alloc and free counts of the whole
// trace (reason "snapshot"); without one, a single snapshot at endNS.
// head gives the GPU, process, rank and name; its time and reason are set
// here. The first snapshot's untracked row carries Snapshot.Bad.
func (s *Snapshot) Snapshots(device int, head storage.SiteSample, endNS int64, points int) [][]storage.SiteSample {
	ss := newSites()
	for _, b := range s.Blocks[device] {
		if !b.Live() {
			continue
		}
		st := ss.of(b.Frames)
		st.row.LiveBytes += b.Size
		st.row.LiveBlocks++
	}
	trace := s.Traces[device]
	eventSite, first, last, n := ss.count(trace)
	var out [][]storage.SiteSample
	if n == 0 || first == last {
		head.T, head.Reason, head.SinceNS = endNS, wire.SitesSnapshot, 0
		if n > 0 {
			head.T = last * 1000
		}
		out = append(out, ss.rows(head, false, s.sites))
	} else {
		out = append(out, ss.back(trace, eventSite, head, first, last, points, s.sites)...)
		h := head
		h.T, h.Reason, h.SinceNS = last*1000+1000, wire.SitesSnapshot, first*1000
		out = append(out, ss.rows(h, true, s.sites))
	}
	out[0][0].Bad = int64(s.Bad)
	return out
}

// count adds the trace's allocs and frees to the sites that made them (a
// free of a block allocated before the trace began goes to untracked). It
// returns each event's site (nil for other actions), and the times of the
// first and last counted events and their number.
func (ss *sites) count(trace []Event) (eventSite []*site, first, last int64, n int) {
	// Which site allocated each address, to count its frees there.
	owner := map[int64]*site{}
	useRequested := !slices.ContainsFunc(trace, func(e Event) bool { return e.Action == "free_completed" })
	isFree := func(a string) bool {
		return a == "free_completed" || (useRequested && a == "free_requested")
	}
	eventSite = make([]*site, len(trace))
	for i, e := range trace {
		switch {
		case e.Action == "alloc":
			st := ss.of(e.Frames)
			owner[e.Addr] = st
			eventSite[i] = st
			st.row.AllocBytes += e.Size
			st.row.Allocs++
		case isFree(e.Action):
			st, ok := owner[e.Addr]
			if !ok {
				st = &ss.untracked // allocated before the trace began, by an unknown site
			}
			delete(owner, e.Addr)
			eventSite[i] = st
			st.row.FreedBytes += e.Size
			st.row.Frees++
		default:
			continue
		}
		if n == 0 {
			first = e.TimeUS
		}
		last = e.TimeUS
		n++
	}
	return eventSite, first, last, n
}

// back returns points snapshots (reason "trace") spread evenly over the
// trace from first to last, in time order: it walks back from the end,
// undoing each event on its site's live bytes and blocks.
func (ss *sites) back(trace []Event, eventSite []*site, head storage.SiteSample, first, last int64, points, maxSites int) [][]storage.SiteSample {
	for _, st := range append(ss.order, &ss.untracked) {
		st.live, st.n = st.row.LiveBytes, st.row.LiveBlocks
	}
	if points < 1 {
		points = 1
	}
	// The points are spread over the trace's events, not over its time: a
	// training job allocates about as much every step, so the points fall
	// about evenly in steps, and a long first step (CUDA and library
	// start-up) takes no more of them than its events. Descending, from
	// just before the end back to the start; an instant holding several
	// points is one.
	var times []int64
	for k := points; k >= 1; k-- {
		at := trace[(len(trace)-1)*(k-1)/points].TimeUS
		if n := len(times); n > 0 && times[n-1] == at {
			continue
		}
		times = append(times, at)
	}
	var back [][]storage.SiteSample
	i := len(trace) - 1
	for _, at := range times {
		for ; i >= 0 && trace[i].TimeUS > at; i-- {
			st := eventSite[i]
			if st == nil {
				continue
			}
			if trace[i].Action == "alloc" {
				st.live -= trace[i].Size
				st.n--
			} else {
				st.live += trace[i].Size
				st.n++
			}
		}
		h := head
		h.T, h.Reason, h.SinceNS = at*1000, wire.SitesTrace, 0
		snap := newSites()
		snap.untracked.row.LiveBytes, snap.untracked.row.LiveBlocks = max(ss.untracked.live, 0), max(ss.untracked.n, 0)
		for _, st := range ss.order {
			c := &site{row: st.row}
			c.row.LiveBytes, c.row.LiveBlocks = max(st.live, 0), max(st.n, 0)
			snap.order = append(snap.order, c)
		}
		back = append(back, snap.rows(h, false, maxSites))
	}
	slices.Reverse(back)
	return back
}
