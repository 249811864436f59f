package jsonl

import (
	"bytes"
	"encoding/json"
	"io"
	"slices"
	"sort"
	"strconv"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// This file is the export of a run: its run and gpu lines, then every
// series merged by time into lines of package wire's format.

// exportRun is the run line memrec writes (docs/format.md).
type exportRun struct {
	Type       string             `json:"type"`
	Name       string             `json:"name"`
	Host       string             `json:"host,omitempty"`
	Job        string             `json:"job,omitempty"`
	Hosts      []storage.HostInfo `json:"hosts,omitempty"`
	StartNS    int64              `json:"start_ns"`
	EndNS      int64              `json:"end_ns,omitempty"`
	IntervalNS int64              `json:"interval_ns,omitempty"`
	Tags       map[string]string  `json:"tags,omitempty"`
	Complete   bool               `json:"complete"`
	Recorder   *storage.Recorder  `json:"recorder,omitempty"`
}

type exportGPU struct {
	Type string `json:"type"`
	storage.GPU
}

// Export writes a run of db as JSON Lines: the run and gpu lines, then every
// sample, process sample, allocator sample (with the budget of the same
// sample, if any), mark and site snapshot merged in time order.
// It streams: memory does not grow with the run's length. The text holds
// no control character but newlines: JSON escapes the rest, DEL and the C1
// controls included (wire.EscapeControls).
func Export(out io.Writer, db *storage.DB, r storage.Run) error {
	head := exportRun{Type: "run", Name: r.Name, Host: r.Host, Job: r.Job, Hosts: r.Hosts, StartNS: r.StartNS, EndNS: r.EndNS,
		IntervalNS: r.IntervalNS, Tags: r.Tags, Complete: r.Complete}
	if r.Recorder != (storage.Recorder{}) {
		head.Recorder = &r.Recorder
	}
	b, err := appendJSONLine(make([]byte, 0, 1<<20), head)
	if err != nil {
		return err
	}
	gpus := append([]storage.GPU(nil), r.GPUs...)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	for _, g := range gpus {
		if b, err = appendJSONLine(b, exportGPU{"gpu", g}); err != nil {
			return err
		}
	}
	series, err := db.Series(r)
	if err != nil {
		return err
	}
	budgets := map[[2]int]bool{}
	for _, s := range series {
		if s.Kind == storage.SeriesBudget {
			budgets[[2]int{s.GPU, s.PID}] = true
		}
	}
	srcs := make([]source, 0, len(series)+1)
	for _, s := range series {
		switch s.Kind {
		case storage.SeriesDevice:
			srcs = append(srcs, source{&rowLines[storage.DeviceSample]{it: db.DeviceSamples(r, s.GPU, storage.MinTime, storage.MaxTime),
				format: wire.NewSeriesFormat(wire.TypeSample, s.GPU, wire.DeviceFields, storage.DeviceSample{})}, true})
		case storage.SeriesProc:
			srcs = append(srcs, source{&rowLines[storage.ProcSample]{it: db.ProcSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime),
				format: wire.NewSeriesFormat(wire.TypeProc, s.GPU, wire.ProcFields, storage.ProcSample{PID: s.PID})}, true})
		case storage.SeriesTorch:
			srcs = append(srcs, source{newTorchLines(db, r, s.GPU, s.PID, budgets[[2]int{s.GPU, s.PID}]), false})
		case storage.SeriesSites:
			srcs = append(srcs, source{&oneLine{it: &siteLines{it: db.SiteSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime)}}, false})
		}
	}
	srcs = append(srcs, source{&markLines{it: db.Marks(r, storage.MinTime, storage.MaxTime)}, false})
	return writeLines(out, b, srcs, db.ReleasePages)
}

// appendJSONLine appends v as encoding/json writes it, DEL and the C1
// controls escaped too (wire.EscapeControls), and a newline.
func appendJSONLine(b []byte, v any) ([]byte, error) {
	j, err := json.Marshal(v)
	return append(wire.EscapeControls(b, j), '\n'), err
}

// lineBlocks is one series' lines for the export, a block (a decoded
// chunk) at a time: writeLines then reads the times of a block's lines
// from a slice and asks for each line's text, without a call a line to
// learn its time.
type lineBlocks interface {
	// next moves to the next block; it returns the times of its lines
	// (µs, as stored), empty at the end or on error.
	next() []int64
	// appendLine appends line i of the block; tNS is its time in ns as
	// strconv.AppendInt writes it.
	appendLine(b []byte, i int, tNS []byte) []byte
	err() error
}

// tickLines are the lines of a tick series (rowLines).
type tickLines interface {
	lineBlocks
	// repeatsUntil is the first line of the block, past the last one
	// appendLine wrote, that may differ from that one but for its time:
	// the lines before it are that line again.
	repeatsUntil() int
}

// source is one series' lines for writeLines; ticks says the series has a
// line at (nearly) every tick of the run: the device and process samples.
// The rest (allocator samples, marks, site snapshots) mostly fall between
// the ticks, a line at a time.
type source struct {
	lineBlocks
	ticks bool
}

// writeLines writes the lines of srcs in time order, equal times in the
// order of srcs, lines of one source in its order: what merge.ByTime
// gives, more cheaply for a run's series. The tick series share their
// times: a tick pass writes every line of the tick's time, source by
// source, and finds the next tick on the way, a comparison or two a line,
// where a heap would cost two a level of its depth for every line. The
// other sources wait in a heap ordered by time and place in srcs, so a
// line that falls between the ticks costs a few comparisons, not a visit
// to every series. The time is formatted once a pass. Device and process
// memory mostly stay put from one tick to the next: a pass whose tick
// series all repeat the lines of the pass before is that pass's lines
// copied, the new time written over theirs (tickBlock). Lines are appended
// to b (the run's head lines already in it) and written a block of about
// its capacity at a time: through a bufio.Writer, each byte would be
// copied once more.
//
// Every releaseEvery bytes written it calls release: the file's pages read
// so far need not stay in the process's memory (a week's export would
// otherwise end holding the whole file).
func writeLines(w io.Writer, b []byte, srcs []source, release func()) error {
	var (
		ticks  []cursor // in the order of srcs
		others cursorHeap
		due    []*cursor // the others at a tick's time, in the order of srcs
		times  nsText
		last   tickBlock // the tick pass before, if it can be copied
		ahead  lockstep  // the passes after it that are known to copy it
	)
	tick := storage.MaxTime // the earliest time of the tick series
	for k, s := range srcs {
		c := cursor{src: s.lineBlocks, order: k}
		if !c.refill() {
			if err := s.err(); err != nil {
				return err
			}
			continue
		}
		if s.ticks {
			c.tl = s.lineBlocks.(tickLines)
			ticks = append(ticks, c)
			tick = min(tick, c.t)
		} else {
			others.push(&c)
		}
	}
	written := 0
	for len(ticks) > 0 || len(others) > 0 {
		if len(others) > 0 && (others[0].t < tick || len(ticks) == 0) {
			// A line between the ticks: the earliest other source's
			// lines at its time, then it waits for its next one.
			c := others[0]
			b = c.appendAt(b, c.t, times.set(c.t))
			if c.ts != nil {
				others.down(0)
			} else if err := c.src.err(); err != nil {
				return err
			} else {
				others.pop()
			}
		} else {
			t := tick
			due = due[:0]
			for len(others) > 0 && others[0].t == t {
				due = append(due, others.pop())
			}
			tNS := times.set(t)
			if len(due) == 0 && ahead.span > 0 && len(tNS) == last.tLen {
				b = last.appendAt(b, tNS)
				tick = ahead.step(ticks)
			} else if ahead.catchUp(ticks); len(due) == 0 && last.fits(ticks, t, len(tNS)) {
				b = last.appendAt(b, tNS)
				next := storage.MaxTime
				for k := range ticks {
					c := &ticks[k]
					c.i++ // within the block: fits
					c.t = c.ts[c.i]
					next = min(next, c.t)
				}
				tick = next
				ahead.measure(ticks)
			} else {
				start, one := len(b), len(due) == 0 // one: each tick series writes one line, no other series any
				next, ended, j := storage.MaxTime, false, 0
				for k := range ticks {
					c := &ticks[k]
					for ; j < len(due) && due[j].order < c.order; j++ {
						b = due[j].appendAt(b, t, tNS)
					}
					n := 0
					for c.t == t { // appendAt, inline: most lines are written here
						b = c.src.appendLine(b, c.i, tNS)
						n++
						if c.i++; c.i < len(c.ts) {
							c.t = c.ts[c.i]
						} else if !c.refill() {
							break
						}
					}
					one = one && n == 1
					c.same = c.tl.repeatsUntil()
					if c.ts == nil {
						if err := c.src.err(); err != nil {
							return err
						}
						ended = true
						continue
					}
					next = min(next, c.t)
				}
				for ; j < len(due); j++ {
					b = due[j].appendAt(b, t, tNS)
				}
				for _, c := range due {
					if c.ts != nil {
						others.push(c)
					} else if err := c.src.err(); err != nil {
						return err
					}
				}
				if ended {
					ticks = slices.DeleteFunc(ticks, func(c cursor) bool { return c.ts == nil })
				}
				last.n = 0
				if one && !ended {
					last.record(b[start:], len(tNS), len(ticks))
				}
				tick = next
			}
		}
		if len(b) > cap(b)-64<<10 {
			if _, err := w.Write(b); err != nil {
				return err
			}
			if written += len(b); written >= releaseEvery {
				release()
				written = 0
			}
			b = b[:0]
		}
	}
	_, err := w.Write(b)
	return err
}

// nsText is the decimal text of a time in ns, t*1000 for a stored time t
// µs, as strconv.AppendInt writes it. writeLines' times only grow, mostly
// by a tick, and a hundred ticks or more share their second: set writes
// the six digits of the µs within the second, two at a time, and all
// nineteen only when the second changes.
type nsText struct {
	t   int64 // µs
	sec int64 // t / 1e6; 0 when b is to be written whole
	b   []byte
}

func (x *nsText) set(t int64) []byte {
	if x.sec == 0 || t/1e6 != x.sec {
		return x.format(t)
	}
	// The last three digits are 000.
	wire.PutDigits(x.b[len(x.b)-9:len(x.b)-3], uint64(t-x.sec*1e6))
	x.t = t
	return x.b
}

func (x *nsText) format(t int64) []byte {
	x.t, x.b = t, strconv.AppendInt(x.b[:0], t*1000, 10)
	x.sec = 0
	if t >= 1e6 { // ten digits or more: the µs within the second have their six
		x.sec = t / 1e6
	}
	return x.b
}

// releaseEvery is how many bytes of lines Export writes between releases
// of the file's pages: a byte of the file is about 100 bytes of lines, so
// about 2.5 MB of the file is read between them.
const releaseEvery = 256 << 20

// cursor is a source's place in writeLines.
type cursor struct {
	src   lineBlocks
	ts    []int64 // times of the current block; nil at the source's end
	i     int     // its next line
	t     int64   // ts[i], beside the cursor: most of a pass only compares it
	order int     // the source's place in writeLines' srcs: equal times go in this order
	// tl is src of a tick series, nil for the others; same is its
	// repeatsUntil after the last pass that wrote its lines.
	tl   tickLines
	same int
}

// tickBlock is the lines of a tick pass in which each tick series wrote
// one line and no other series any, kept for the passes after it.
type tickBlock struct {
	b    []byte
	at   []int // where each line's time begins in b
	tLen int   // the length of that time
	n    int   // the tick series it holds; 0: none kept
}

// lockstep is how many of the tick passes after the cursors' places are
// known to be the kept block again (tickBlock.fits, but for the other
// series' lines and the time's length, which writeLines checks a pass):
// the device and process series of a run share their times, and their
// lines mostly stay put for a chunk's length, so fits would find the same
// pass after pass, each time at every cursor. The passes
// written that way are counted (lag), and the cursors moved by as many
// before anything else reads them (catchUp).
type lockstep struct {
	span int // passes known to fit, from the cursors' places plus lag
	lag  int // passes written since the cursors were moved
}

// measure sets span for cursors that have just written the kept block:
// the passes from their places on that fit it, each cursor at a line
// that repeats the one before and has a later one in its block, all of
// them at the same times. Zero where any differ in their times.
func (s *lockstep) measure(ticks []cursor) {
	s.span, s.lag = 0, 0
	if len(ticks) == 0 {
		return
	}
	n := len(ticks[0].ts) // passes p fit while c.i+p < c.same and c.i+p+1 < len(c.ts)
	for k := range ticks {
		c := &ticks[k]
		n = min(n, c.same-c.i, len(c.ts)-1-c.i)
	}
	if n <= 0 {
		return
	}
	lead := &ticks[0]
	ts := lead.ts[lead.i : lead.i+n+1]
	for k := range ticks[1:] {
		c := &ticks[k+1]
		if !slices.Equal(c.ts[c.i:c.i+n+1], ts) {
			return
		}
	}
	for p := range n { // one line a tick
		if ts[p+1] == ts[p] {
			n = p
			break
		}
	}
	s.span = n
}

// step counts a pass written from the kept block and returns the time of
// the next.
func (s *lockstep) step(ticks []cursor) int64 {
	s.lag++
	s.span--
	lead := &ticks[0]
	return lead.ts[lead.i+s.lag]
}

// catchUp moves the cursors past the passes step counted, and forgets
// the passes known to fit.
func (s *lockstep) catchUp(ticks []cursor) {
	if s.lag > 0 {
		for k := range ticks {
			c := &ticks[k]
			c.i += s.lag
			c.t = c.ts[c.i]
		}
	}
	s.span, s.lag = 0, 0
}

// tNSKey precedes a line's time.
var tNSKey = []byte(`"t_ns":`)

// record keeps lines p of a pass of n tick series at a time of tLen
// digits.
func (k *tickBlock) record(p []byte, tLen, n int) {
	k.b, k.at, k.tLen = append(k.b[:0], p...), k.at[:0], tLen
	for i := 0; i < len(p); {
		t := bytes.Index(p[i:], tNSKey)
		if t < 0 {
			return
		}
		i += t + len(tNSKey)
		k.at = append(k.at, i)
		i += bytes.IndexByte(p[i:], '\n') + 1
	}
	k.n = n
}

// fits says the pass at t, whose time has tLen digits, is the kept one
// again: the same tick series, each with one line at t, which repeats the
// last it wrote and has a later line after it in its block.
func (k *tickBlock) fits(ticks []cursor, t int64, tLen int) bool {
	if k.n != len(ticks) || k.tLen != tLen {
		return false
	}
	for i := range ticks {
		c := &ticks[i]
		if c.t != t || c.i >= c.same || c.i+1 >= len(c.ts) || c.ts[c.i+1] == t {
			return false
		}
	}
	return true
}

// appendAt appends the kept lines at time tNS. A time of 19 digits (the
// years 2001 to 2286) is written as an array, a move or two where copy
// would be a call, once a line.
func (k *tickBlock) appendAt(b, tNS []byte) []byte {
	start := len(b)
	b = append(b, k.b...)
	if len(tNS) == 19 {
		t := [19]byte(tNS)
		for _, at := range k.at {
			*(*[19]byte)(b[start+at:]) = t
		}
		return b
	}
	for _, at := range k.at {
		copy(b[start+at:], tNS)
	}
	return b
}

// refill moves to the source's next block; false at its end.
func (c *cursor) refill() bool {
	if c.ts, c.i = c.src.next(), 0; len(c.ts) == 0 {
		c.ts, c.t = nil, storage.MaxTime
		return false
	}
	c.t = c.ts[0]
	return true
}

// appendAt appends the source's lines at time t, if it is at t; c.ts is
// nil afterwards if the source ended.
func (c *cursor) appendAt(b []byte, t int64, tNS []byte) []byte {
	for c.t == t {
		b = c.src.appendLine(b, c.i, tNS)
		if c.i++; c.i < len(c.ts) {
			c.t = c.ts[c.i]
		} else if !c.refill() {
			break
		}
	}
	return b
}

// cursorHeap is a binary min-heap of cursors by time, then by place in
// srcs.
type cursorHeap []*cursor

func (h cursorHeap) less(i, j int) bool {
	return h[i].t < h[j].t || h[i].t == h[j].t && h[i].order < h[j].order
}

func (h *cursorHeap) push(c *cursor) {
	*h = append(*h, c)
	for i := len(*h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		(*h)[i], (*h)[p] = (*h)[p], (*h)[i]
		i = p
	}
}

func (h *cursorHeap) pop() *cursor {
	old := *h
	c, n := old[0], len(old)-1
	old[0], old[n] = old[n], nil
	*h = old[:n]
	h.down(0)
	return c
}

// down moves the cursor at i down to its place after its time grew.
func (h cursorHeap) down(i int) {
	for {
		l := 2*i + 1
		if l >= len(h) {
			return
		}
		m := l
		if r := l + 1; r < len(h) && h.less(r, l) {
			m = r
		}
		if !h.less(m, i) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}

// rowLines writes the samples of one series, a line each.
type rowLines[T any] struct {
	it     *storage.Iter[T]
	format *wire.SeriesFormat[T]
	vals   []int64 // the fields of the sample being written
	// until: the samples of the block before it repeat the last one
	// written from its fields (Iter.RepeatsUntil).
	until int
}

func (l *rowLines[T]) next() []int64 {
	l.until = 0
	return l.it.NextBlock()
}

func (l *rowLines[T]) appendLine(b []byte, i int, tNS []byte) []byte {
	if i < l.until {
		return l.format.AppendAgain(b, tNS)
	}
	l.until = l.it.RepeatsUntil(i)
	l.vals = l.it.BlockFields(l.vals[:0], i)
	return l.format.AppendFields(b, tNS, l.vals)
}

func (l *rowLines[T]) repeatsUntil() int { return l.until }

func (l *rowLines[T]) err() error { return l.it.Err() }

// markLines writes the marks of a run, a line each.
type markLines struct {
	it  *storage.Iter[storage.Mark]
	cur storage.Mark // the mark being written: a local would escape through AppendMarkAt
}

func (l *markLines) next() []int64 { return l.it.NextBlock() }

func (l *markLines) appendLine(b []byte, i int, tNS []byte) []byte {
	l.cur = l.it.BlockAt(i)
	return wire.AppendMarkAt(b, tNS, &l.cur)
}

func (l *markLines) err() error { return l.it.Err() }

// oneLine makes blocks of one line of a series formatted line by line.
type oneLine struct {
	it interface {
		Next() bool
		At() line
		Err() error
	}
	t [1]int64
}

func (l *oneLine) next() []int64 {
	if !l.it.Next() {
		return nil
	}
	l.t[0] = l.it.At().t / 1000 // a stored time is whole µs
	return l.t[:]
}

func (l *oneLine) appendLine(b []byte, _ int, _ []byte) []byte { return append(b, l.it.At().b...) }
func (l *oneLine) err() error                                  { return l.it.Err() }

// line is one exported line and the time it is sorted by.
type line struct {
	t int64
	b []byte
}

// siteLines formats the rows of a site series as one line per snapshot (a
// snapshot starts at its wire.SiteUntracked row).
type siteLines struct {
	it   *storage.Iter[storage.SiteSample]
	rows []storage.SiteSample
	next *storage.SiteSample // the first row of the next snapshot, read ahead
	done bool
	cur  line
}

func (l *siteLines) Next() bool {
	l.rows = l.rows[:0]
	if l.next != nil {
		l.rows = append(l.rows, *l.next)
		l.next = nil
	}
	for !l.done {
		if !l.it.Next() {
			l.done = true
			break
		}
		v := l.it.At()
		if len(l.rows) > 0 && (v.File == wire.SiteUntracked || v.T != l.rows[0].T) {
			l.next = &v
			break
		}
		l.rows = append(l.rows, v)
	}
	if len(l.rows) == 0 {
		return false
	}
	l.cur = line{l.rows[0].T, wire.AppendSites(l.cur.b[:0], l.rows)}
	return true
}

func (l *siteLines) At() line   { return l.cur }
func (l *siteLines) Err() error { return l.it.Err() }

// torchLines writes one process's allocator samples on one GPU as torch
// lines, each with the budget of the same sample where there is one: the
// two series are read side by side, a budget row belonging to the torch row
// of its time (the probe sends them in one line).
type torchLines struct {
	torch  *storage.Iter[storage.TorchSample]
	format *wire.SeriesFormat[storage.TorchSample]
	budget *storage.Iter[storage.BudgetSample]
	ahead  *storage.BudgetSample // read ahead
	done   bool                  // the budget series is at its end
	vals   []int64               // the fields of the sample being written (see rowLines)
	cur    storage.TorchSample   // the sample being written with a budget at hand: a local would escape through format, a heap allocation a line
}

func newTorchLines(db *storage.DB, r storage.Run, gpu, pid int, withBudget bool) *torchLines {
	l := &torchLines{torch: db.TorchSamples(r, gpu, pid, storage.MinTime, storage.MaxTime), done: !withBudget,
		format: wire.NewSeriesFormat(wire.TypeTorch, gpu, wire.TorchFields, storage.TorchSample{PID: pid})}
	if withBudget {
		l.budget = db.BudgetSamples(r, gpu, pid, storage.MinTime, storage.MaxTime)
	}
	return l
}

func (l *torchLines) next() []int64 { return l.torch.NextBlock() }

// appendLine reads the sample as a TorchSample only where a budget line
// may share its time; a run without budgets writes every sample from its
// fields.
func (l *torchLines) appendLine(b []byte, i int, tNS []byte) []byte {
	if l.done && l.ahead == nil {
		l.vals = l.torch.BlockFields(l.vals[:0], i)
		return l.format.AppendFields(b, tNS, l.vals)
	}
	l.cur = l.torch.BlockAt(i)
	s := &l.cur
	for !l.done && (l.ahead == nil || l.ahead.T < s.T) {
		if !l.budget.Next() {
			l.done, l.ahead = true, nil
			break
		}
		bs := l.budget.At()
		l.ahead = &bs
	}
	if l.ahead != nil && l.ahead.T == s.T {
		b = wire.AppendTorchBudget(b, *s, *l.ahead)
		l.ahead = nil
		return b
	}
	return l.format.Append(b, tNS, s)
}

func (l *torchLines) err() error {
	if err := l.torch.Err(); err != nil {
		return err
	}
	if l.budget != nil {
		return l.budget.Err()
	}
	return nil
}
