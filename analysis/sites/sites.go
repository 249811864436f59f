package sites

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// This file is the "where" pass: which lines of code hold a GPU's memory,
// from the run's site snapshots (memrec record --sites, or an imported
// PyTorch snapshot). Package analysis runs it after the leak and OOM
// passes, and names the leak's site and the OOM's holders in their
// findings.

// TopSites is how many sites a snapshot's figures list.
const TopSites = 10

// Where is where a GPU's memory is held, by allocation site. Nil without
// site snapshots.
type Where struct {
	Snapshots int `json:"snapshots"`
	// AtPeak is the snapshot with the most live bytes; AtEnd the last
	// (out-of-memory snapshots aside).
	AtPeak *SiteSnapshot `json:"at_peak"`
	AtEnd  *SiteSnapshot `json:"at_end"`
	// Growing are the sites whose live bytes grow between snapshots, the
	// most first; empty when none grows.
	Growing []GrowingSite `json:"growing"`
	// OOM is the snapshot taken at the first out-of-memory error.
	OOM *SiteSnapshot `json:"oom,omitempty"`
	// Bad counts snapshot entries that made no sense, dropped.
	Bad int64 `json:"bad_entries,omitempty"`
	// Series are the live bytes over time of the largest sites (those
	// that grow first), then "other sites" and "untracked", for the
	// report's stacked chart. Each has a value at every snapshot time.
	Series []SiteSeries `json:"-"`
}

// SiteSeries is one band of the live-memory-by-site chart.
type SiteSeries struct {
	Name   string // the site and its function ("train.py:52 keep_logits"), or the band's name
	Band   SiteBand
	Site   string // file name and line (BandSite only)
	Func   string // the site's function (BandSite only)
	TNS    []int64
	Bytes  []int64
	Growth bool // the site grows
}

// SiteBand is what a band of the chart adds up.
type SiteBand int

const (
	BandSite      SiteBand = iota // one line of code
	BandOther                     // every site not shown on its own, and the snapshots' SiteOther
	BandUntracked                 // the blocks without a stack (wire.SiteUntracked)
)

// String is the band's kind as the viewer's API spells it.
func (b SiteBand) String() string {
	switch b {
	case BandOther:
		return "other"
	case BandUntracked:
		return "untracked"
	}
	return "site"
}

// ChartSites is how many sites the chart shows before "other sites".
const ChartSites = 6

// SiteSnapshot is one snapshot's figures.
type SiteSnapshot struct {
	TNS            int64               `json:"t_ns"`
	PID            int                 `json:"pid"`
	Reason         storage.SitesReason `json:"reason"`
	Epoch          *int                `json:"epoch"`
	Step           *int                `json:"step"`
	LiveBytes      int64               `json:"live_bytes"`      // every block, sites and untracked
	UntrackedBytes int64               `json:"untracked_bytes"` // blocks without a Python stack
	Top            []SiteFigure        `json:"top"`             // the sites with the most live bytes
}

// SiteFigure is one site's live memory in a snapshot.
type SiteFigure struct {
	Site       string   `json:"site"` // file name and line
	File       string   `json:"file"`
	Line       int      `json:"line"`
	Func       string   `json:"func"`
	Stack      []string `json:"stack,omitempty"`
	LiveBytes  int64    `json:"live_bytes"`
	LiveBlocks int64    `json:"live_blocks"`
	Share      float64  `json:"share"` // of the snapshot's live bytes
}

// GrowingSite is a site whose live bytes grow over the snapshots, by the
// growth rule (see growing): its slopes are the rule's Theil–Sen slopes;
// GrowthBytes is its change from the first snapshot to the last (scaled
// where the stacks were sampled), FirstBytes and LastBytes what the two
// hold.
type GrowingSite struct {
	Site          string   `json:"site"`
	File          string   `json:"file"`
	Line          int      `json:"line"`
	Func          string   `json:"func"`
	Stack         []string `json:"stack,omitempty"`
	PID           int      `json:"pid"`
	FirstNS       int64    `json:"first_t_ns"`
	LastNS        int64    `json:"last_t_ns"`
	FirstBytes    int64    `json:"first_bytes"`
	LastBytes     int64    `json:"last_bytes"`
	GrowthBytes   int64    `json:"growth_bytes"`
	BytesPerStep  *float64 `json:"bytes_per_step"`
	BytesPerEpoch *float64 `json:"bytes_per_epoch"`
	BytesPerHour  float64  `json:"bytes_per_hour"`
	// Share is the part of the leak slope the site explains (its growth
	// per step, or per hour, over the slope's); without a leak verdict,
	// its part of the growth of every site that grows.
	Share float64 `json:"share"`
	// SampledEvery is N when the probe kept stacks on one step in N only:
	// the growth and its rates are then the tracked growth times N, an
	// estimate (LastBytes − FirstBytes stays what was tracked).
	SampledEvery float64 `json:"sampled_every,omitempty"`
}

// siteSnap is one snapshot: its rows, untracked first.
type siteSnap struct {
	pid  int
	rows []storage.SiteSample
}

func (s siteSnap) t() int64                    { return s.rows[0].T }
func (s siteSnap) reason() storage.SitesReason { return s.rows[0].Reason }
func (s siteSnap) liveBytes() (n int64) {
	for _, r := range s.rows {
		n += r.LiveBytes
	}
	return n
}

// Input is what the where pass knows of one GPU's run beyond its
// snapshots: the steps and epochs that place a snapshot, the warm-up the
// growth rule leaves out, and the GPU's leak verdict. The zero Input is a
// run without marks or verdict: the growth rule then judges the sites
// against time.
type Input struct {
	Steps   *growth.Steps      // the step marks of the GPU's rank; nil: none
	EpochAt func(t int64) *int // the epoch t falls in; nil: the run has no epochs
	Warm    growth.Warmup      // where the run's warm-up ends
	// Leak is the GPU's leak verdict: a growing site's share is its part
	// of the leak's slope.
	Leak growth.Leak
	// Budget is what the snapshots' rows kept are taken from, the
	// command's decoding budget (nil: one of storage.DefaultDecodeBudget
	// for this read alone).
	Budget *storage.DecodeBudget
}

func (in *Input) epochAt(t int64) *int {
	if in.EpochAt == nil {
		return nil
	}
	return in.EpochAt(t)
}

// LeftOut is what a read of site snapshots left out past the decoding
// budget: Rows counts the rows not kept, Err says why (it wraps
// storage.ErrDecodeBudget). The zero LeftOut is a read that kept all.
type LeftOut struct {
	Rows int
	Err  error
}

// rowCost is what keeping one site row costs the budget, its strings
// aside.
const rowCost = int64(unsafe.Sizeof(storage.SiteSample{}))

// reader keeps site rows while the budget lasts. Each row is taken from
// the budget before it is kept: its struct, and each string the first
// time it is seen (a chunk's rows share them). Once a row is refused, the
// snapshot it belongs to and every later row are left out and counted, so
// no snapshot is read in part.
type reader struct {
	budget *storage.DecodeBudget
	seen   map[*byte]bool
	left   LeftOut
}

func (r *reader) take(row storage.SiteSample) bool {
	if r.left.Rows > 0 {
		r.left.Rows++
		return false
	}
	n := rowCost
	for _, s := range []string{row.File, row.Func, row.Stack, row.Name, string(row.Reason)} {
		if p := unsafe.StringData(s); len(s) > 0 && !r.seen[p] {
			r.seen[p] = true
			n += int64(len(s)) + 16
		}
	}
	if err := r.budget.Take(n, "the run's site snapshots"); err != nil {
		r.left = LeftOut{Rows: 1, Err: err}
		return false
	}
	return true
}

// read reads the GPU's site snapshots of processes pids, in time order,
// taking what it keeps from budget (nil: a budget of its own).
func read(db *storage.DB, run storage.Run, gpu int, pids []int, budget *storage.DecodeBudget) ([]siteSnap, LeftOut, error) {
	if budget == nil {
		budget = storage.NewDecodeBudget(storage.DefaultDecodeBudget)
	}
	rd := reader{budget: budget, seen: map[*byte]bool{}}
	var out []siteSnap
	for _, pid := range pids {
		it := db.SiteSamples(run, gpu, pid, run.StartNS, run.EndNS+1)
		var rows []storage.SiteSample
		for it.Next() {
			row := it.At()
			if rd.take(row) {
				rows = append(rows, row)
			} else if rd.left.Rows == 1 {
				// The snapshot the refused row belongs to goes whole.
				for len(rows) > 0 && rows[len(rows)-1].T == row.T {
					rows = rows[:len(rows)-1]
					rd.left.Rows++
				}
			}
		}
		if err := it.Err(); err != nil {
			return nil, LeftOut{}, err
		}
		out = appendSnaps(out, pid, rows)
	}
	slices.SortStableFunc(out, func(x, y siteSnap) int { return cmp.Compare(x.t(), y.t()) })
	return out, rd.left, nil
}

// Find is the where pass: it reads the site snapshots of processes pids
// on one GPU and finds where the GPU's memory is held; nil without
// snapshots. holders[i] are the sites that held the most at the OOM
// snapshot nearest ooms[i], within 10 s (nil: none). What it keeps is
// taken from in.Budget; left says what was left out past it.
func Find(db *storage.DB, run storage.Run, gpu int, pids []int, in Input, ooms []int64) (w *Where, holders [][]SiteFigure, left LeftOut, err error) {
	snaps, left, err := read(db, run, gpu, pids, in.Budget)
	if err != nil || len(snaps) == 0 {
		return nil, nil, left, err
	}
	w = &Where{Snapshots: len(snaps), Growing: []GrowingSite{}}
	var peak, end *siteSnap
	for i := range snaps {
		s := &snaps[i]
		w.Bad += s.rows[0].Bad
		if peak == nil || s.liveBytes() > peak.liveBytes() {
			peak = s
		}
		if s.reason() != wire.SitesOOM {
			end = s
		} else if w.OOM == nil {
			w.OOM = in.figures(*s)
		}
	}
	w.AtPeak = in.figures(*peak)
	if end != nil {
		w.AtEnd = in.figures(*end)
	}
	if gs := in.growing(snaps); gs != nil {
		w.Growing = gs
	}
	w.Series = siteSeries(snaps, w.Growing, ChartSites)
	holders = make([][]SiteFigure, len(ooms))
	for i, t := range ooms {
		if s := nearestOOMSnapshot(snaps, t); s != nil {
			holders[i] = in.figures(*s).Top
		}
	}
	return w, holders, left, nil
}

// stepAt is the step a time falls in: the first step mark at or after it
// (marks end their step).
func stepAt(steps *growth.Steps, t int64) *int {
	if i := steps.Search(t); i < steps.Len() {
		n := steps.Step(i)
		return &n
	}
	return nil
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// appendSnaps cuts one process's rows, in time order, into its snapshots:
// a snapshot's rows share its time, its wire.SiteUntracked row first.
func appendSnaps(out []siteSnap, pid int, rows []storage.SiteSample) []siteSnap {
	var cur []storage.SiteSample
	for _, r := range rows {
		if len(cur) > 0 && (r.File == wire.SiteUntracked || r.T != cur[0].T) {
			out = append(out, siteSnap{pid, cur})
			cur = nil
		}
		cur = append(cur, r)
	}
	if len(cur) > 0 {
		out = append(out, siteSnap{pid, cur})
	}
	return out
}

// SitesOf is ReadSites over rows held in memory (a recording's, as it
// happens: package recorder's Watch), of one GPU, each process's in time
// order. Without the run's marks the growth rule judges the sites against
// time, each series settling on its own.
func SitesOf(gpu int, rows []storage.SiteSample) *Sites {
	byPID := map[int][]storage.SiteSample{}
	var pids []int
	for _, r := range rows {
		if r.GPU != gpu {
			continue
		}
		if _, ok := byPID[r.PID]; !ok {
			pids = append(pids, r.PID)
		}
		byPID[r.PID] = append(byPID[r.PID], r)
	}
	var snaps []siteSnap
	for _, pid := range pids {
		snaps = appendSnaps(snaps, pid, byPID[pid])
	}
	slices.SortStableFunc(snaps, func(x, y siteSnap) int { return cmp.Compare(x.t(), y.t()) })
	return &Sites{snaps: snaps}
}

// nearestOOMSnapshot is the OOM snapshot closest to an OOM mark, within 10 s.
func nearestOOMSnapshot(snaps []siteSnap, t int64) *siteSnap {
	var best *siteSnap
	for i := range snaps {
		s := &snaps[i]
		if s.reason() != wire.SitesOOM || abs64(s.t()-t) > 10e9 {
			continue
		}
		if best == nil || abs64(s.t()-t) < abs64(best.t()-t) {
			best = s
		}
	}
	return best
}

func stackLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// figures are a snapshot's totals and its largest sites.
func (in *Input) figures(s siteSnap) *SiteSnapshot { return in.figuresN(s, TopSites) }

// figuresN are a snapshot's totals and its n largest sites (all, if n < 0).
func (in *Input) figuresN(s siteSnap, n int) *SiteSnapshot {
	h := s.rows[0]
	out := &SiteSnapshot{TNS: h.T, PID: s.pid, Reason: h.Reason, Step: stepAt(in.Steps, h.T), LiveBytes: s.liveBytes()}
	if h.Epoch != storage.None {
		epoch := h.Epoch
		out.Epoch = &epoch
	} else {
		out.Epoch = in.epochAt(h.T)
	}
	var top []SiteFigure
	for _, r := range s.rows {
		switch r.File {
		case wire.SiteUntracked:
			out.UntrackedBytes += r.LiveBytes
			continue
		case wire.SiteOther:
			continue
		}
		if r.LiveBytes == 0 {
			continue
		}
		f := SiteFigure{Site: r.Label(), File: r.File, Line: r.Line, Func: r.Func, Stack: stackLines(r.Stack),
			LiveBytes: r.LiveBytes, LiveBlocks: r.LiveBlocks}
		if out.LiveBytes > 0 {
			f.Share = float64(r.LiveBytes) / float64(out.LiveBytes)
		}
		top = append(top, f)
	}
	slices.SortStableFunc(top, func(x, y SiteFigure) int { return cmp.Compare(y.LiveBytes, x.LiveBytes) })
	if n >= 0 {
		top = top[:min(len(top), n)]
	}
	out.Top = top
	if out.Top == nil {
		out.Top = []SiteFigure{}
	}
	return out
}

// growing finds, per process, the sites whose live bytes grow over the
// snapshots that show the steady state (epoch ends, requested snapshots,
// trace windows; not OOMs, exits or tracked blocks), by the growth rule
// (siteGrowth), the steepest first: a site's Share is its part of the
// leak's slope.
func (in *Input) growing(snaps []siteSnap) []GrowingSite {
	pids, byPID := steadyByPID(snaps)
	var out []GrowingSite
	var totalGrowth int64
	for _, pid := range pids {
		g, total := in.growingOf(pid, byPID[pid])
		out = append(out, g...)
		totalGrowth += total
	}
	l := in.Leak
	for i := range out {
		g := &out[i]
		switch {
		case l.IsLeak() && l.Per == "step" && l.SlopeBytesPerStep != nil && *l.SlopeBytesPerStep > 0 && g.BytesPerStep != nil:
			g.Share = *g.BytesPerStep / *l.SlopeBytesPerStep
		case l.IsLeak() && l.SlopeBytesPerHour != nil && *l.SlopeBytesPerHour > 0:
			g.Share = g.BytesPerHour / *l.SlopeBytesPerHour
		case totalGrowth > 0:
			g.Share = float64(g.GrowthBytes) / float64(totalGrowth)
		}
	}
	slices.SortStableFunc(out, func(x, y GrowingSite) int { return cmp.Compare(y.BytesPerHour, x.BytesPerHour) })
	return out
}

// steadyByPID groups the snapshots that show the steady state by process,
// the processes in the order they first appear.
func steadyByPID(snaps []siteSnap) (pids []int, byPID map[int][]siteSnap) {
	byPID = map[int][]siteSnap{}
	for _, s := range snaps {
		switch s.reason() {
		case wire.SitesOOM, wire.SitesExit, wire.SitesTrack:
			continue
		}
		if _, ok := byPID[s.pid]; !ok {
			pids = append(pids, s.pid)
		}
		byPID[s.pid] = append(byPID[s.pid], s)
	}
	return pids, byPID
}

// growingOf returns the growing sites of one process's snapshots ss, and
// the growth of all its sites that grew (the basis of a share when there
// is no leak slope). Where the probe kept stacks on one step in N only
// (sampled_every), each change between two snapshots counts N times, and
// the untracked blocks, which then hold the other steps' blocks too, are
// not a site that grows.
func (in *Input) growingOf(pid int, ss []siteSnap) (out []GrowingSite, totalGrowth int64) {
	if len(ss) < 2 || ss[len(ss)-1].t() <= ss[0].t() {
		return nil, 0
	}
	// Each site's live bytes in each snapshot (0 where absent).
	type series struct {
		row  storage.SiteSample
		vals []int64
	}
	sites := map[string]*series{}
	var order []string
	var sampled float64
	for i, s := range ss {
		sampled = max(sampled, s.rows[0].SampledEvery)
		for _, r := range s.rows {
			if r.File == wire.SiteOther {
				continue
			}
			k := r.Key()
			se := sites[k]
			if se == nil {
				se = &series{row: r, vals: make([]int64, len(ss))}
				sites[k] = se
				order = append(order, k)
			}
			se.vals[i] += r.LiveBytes
		}
	}
	if sampled <= 1 {
		sampled = 0
	}
	first, last := ss[0].rows[0], ss[len(ss)-1].rows[0]
	// x: steps since the first snapshot where the run has steps, else
	// seconds; the warm-up: the snapshots before the first epoch's end.
	xs, ts := make([]float64, len(ss)), make([]float64, len(ss))
	perStep := stepsBetween(in.Steps, first.T, last.T) > 0
	skip := -1
	if in.Warm.ByEpoch {
		skip = 0
	}
	for i, s := range ss {
		ts[i] = float64(s.t()-first.T) / 1e9
		xs[i] = ts[i]
		if perStep {
			xs[i] = float64(stepsBetween(in.Steps, first.T, s.t()))
		}
		if skip >= 0 && s.t() < in.Warm.EndNS {
			skip = i + 1
		}
	}
	for _, k := range order {
		se := sites[k]
		if sampled > 0 && se.row.File == wire.SiteUntracked {
			continue
		}
		// The live bytes with each change scaled by the snapshot's
		// sampling (1 where the stacks were kept on every step).
		y := make([]float64, len(ss))
		y[0] = float64(se.vals[0])
		for i := 1; i < len(ss); i++ {
			y[i] = y[i-1] + float64(se.vals[i]-se.vals[i-1])*max(1, ss[i].rows[0].SampledEvery)
		}
		perX, perS, ok := growth.SiteGrowth(xs, ts, y, skip)
		if !ok {
			continue
		}
		growth := int64(math.Round(y[len(y)-1] - y[0]))
		totalGrowth += growth
		v0, v1 := se.vals[0], se.vals[len(se.vals)-1]
		g := GrowingSite{Site: se.row.Label(), File: se.row.File, Line: se.row.Line, Func: se.row.Func,
			Stack: stackLines(se.row.Stack), PID: pid, FirstNS: first.T, LastNS: last.T, FirstBytes: v0,
			LastBytes: v1, GrowthBytes: growth, BytesPerHour: perS * 3600, SampledEvery: sampled}
		if perStep {
			g.BytesPerStep = &perX
		}
		if first.Epoch != storage.None && last.Epoch > first.Epoch {
			perEpoch := float64(growth) / float64(last.Epoch-first.Epoch)
			g.BytesPerEpoch = &perEpoch
		}
		out = append(out, g)
	}
	return out, totalGrowth
}

// stepsBetween counts the step marks in (from, to].
func stepsBetween(steps *growth.Steps, from, to int64) int {
	n := 0
	for i := range steps.Len() {
		if t := steps.T(i); t > from && t <= to {
			n++
		}
	}
	return n
}

// SiteSnapshots reads every site snapshot of one GPU of a run, in time
// order, each with all its sites (largest first), placed by in, taking
// what it keeps from in.Budget (ReadSites); left says what was left out.
func SiteSnapshots(db *storage.DB, run storage.Run, gpu int, in Input) (snaps []SiteSnapshot, left LeftOut, err error) {
	s, err := ReadSites(db, run, gpu, in)
	if err != nil {
		return nil, LeftOut{}, err
	}
	out := make([]SiteSnapshot, len(s.snaps))
	for i, sn := range s.snaps {
		out[i] = *s.in.figuresN(sn, -1)
	}
	return out, s.left, nil
}

// Sites are one GPU's site snapshots of a run, read once with what the
// growth rule needs (the run's steps and warm-up), so that the bands of
// any window are computed without the file (the viewer asks for one per
// zoom). A Sites is safe for concurrent use: Bands only reads it.
type Sites struct {
	in    Input
	snaps []siteSnap
	left  LeftOut
}

// ReadSites reads a GPU's site snapshots; a Sites of none (Len 0) when the
// GPU has none. in places them in the run (analysis.SitesInput reads it
// from the run's marks); its Leak is not used. The rows kept are taken
// from in.Budget; past it the later snapshots are left out (LeftOut).
func ReadSites(db *storage.DB, run storage.Run, gpu int, in Input) (*Sites, error) {
	series, err := db.Series(run)
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, s := range series {
		if s.GPU == gpu && s.Kind == storage.SeriesSites {
			pids = append(pids, s.PID)
		}
	}
	snaps, left, err := read(db, run, gpu, pids, in.Budget)
	if err != nil {
		return nil, err
	}
	in.Leak, in.Budget = growth.Leak{}, nil
	return &Sites{in: in, snaps: snaps, left: left}, nil
}

// Len is the number of snapshots.
func (s *Sites) Len() int { return len(s.snaps) }

// LeftOut is what reading the snapshots left out past the budget.
func (s *Sites) LeftOut() LeftOut { return s.left }

// Bands are the bands of the live-memory-by-site chart over the snapshots
// of [from, to) and each process's last one before from (it holds until
// the next), as the report draws them for the whole run: the n sites
// ranked first (those that grow over these snapshots by the growth rule,
// the steepest first, then by their largest live bytes), then "other
// sites" and "untracked". Each band has a value at every snapshot time;
// nil when no snapshot is in the window.
func (s *Sites) Bands(from, to int64, n int) []SiteSeries {
	var in []siteSnap
	seen := map[int]bool{}
	for i := len(s.snaps) - 1; i >= 0; i-- {
		if sn := s.snaps[i]; sn.t() < from && !seen[sn.pid] {
			seen[sn.pid] = true
			in = append(in, sn)
		}
	}
	slices.Reverse(in)
	for _, sn := range s.snaps {
		if sn.t() >= from && sn.t() < to {
			in = append(in, sn)
		}
	}
	if len(in) == 0 {
		return nil
	}
	return siteSeries(in, s.in.growing(in), n)
}

// SiteDelta is one site's change between two snapshots.
type SiteDelta struct {
	Site   string `json:"site"`
	File   string `json:"file"`
	Line   int    `json:"line"`
	Func   string `json:"func"`
	ABytes int64  `json:"a_bytes"`
	BBytes int64  `json:"b_bytes"`
	Delta  int64  `json:"delta_bytes"`
}

// DiffSites compares two snapshots site by site, the largest changes
// first (growth before shrinkage of the same size); sites that did not
// change are left out.
func DiffSites(a, b SiteSnapshot) []SiteDelta {
	idx := map[string]int{}
	var out []SiteDelta
	add := func(f SiteFigure, isB bool) {
		k := f.File + ":" + fmt.Sprint(f.Line)
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, SiteDelta{Site: f.Site, File: f.File, Line: f.Line, Func: f.Func})
		}
		if isB {
			out[i].BBytes += f.LiveBytes
		} else {
			out[i].ABytes += f.LiveBytes
		}
	}
	for _, f := range a.Top {
		add(f, false)
	}
	for _, f := range b.Top {
		add(f, true)
	}
	out = append(out, SiteDelta{Site: wire.SiteUntracked, File: wire.SiteUntracked, ABytes: a.UntrackedBytes, BBytes: b.UntrackedBytes})
	kept := out[:0]
	for _, d := range out {
		d.Delta = d.BBytes - d.ABytes
		if d.Delta != 0 {
			kept = append(kept, d)
		}
	}
	slices.SortStableFunc(kept, func(x, y SiteDelta) int {
		if c := cmp.Compare(abs64(y.Delta), abs64(x.Delta)); c != 0 {
			return c
		}
		return cmp.Compare(y.Delta, x.Delta)
	})
	return kept
}

// chartSites returns the keys of the sites a chart shows (the growing
// ones, then by their largest live bytes, n at most), which of them grow,
// and each site's row (its label and function).
func chartSites(snaps []siteSnap, growing []GrowingSite, n int) (keys []string, grows map[string]bool, label map[string]storage.SiteSample) {
	peak := map[string]int64{}
	label = map[string]storage.SiteSample{}
	for _, s := range snaps {
		for _, r := range s.rows {
			if r.File == wire.SiteUntracked || r.File == wire.SiteOther {
				continue
			}
			k := r.Key()
			peak[k] = max(peak[k], r.LiveBytes)
			if _, ok := label[k]; !ok {
				label[k] = r
			}
		}
	}
	grows = map[string]bool{}
	for _, g := range growing {
		k := g.File + ":" + fmt.Sprint(g.Line)
		if g.File == wire.SiteUntracked {
			continue // its own band, not a site
		}
		if !grows[k] && len(keys) < n {
			keys = append(keys, k)
			grows[k] = true
		}
	}
	var rest []string
	for k := range peak {
		if !grows[k] {
			rest = append(rest, k)
		}
	}
	slices.SortFunc(rest, func(x, y string) int {
		if c := cmp.Compare(peak[y], peak[x]); c != 0 {
			return c
		}
		return strings.Compare(x, y)
	})
	for _, k := range rest {
		if len(keys) >= n {
			break
		}
		if peak[k] > 0 {
			keys = append(keys, k)
		}
	}
	return keys, grows, label
}

// siteSeries is the live bytes of the largest sites at each snapshot time,
// summed over the GPU's processes (each holding its last snapshot).
func siteSeries(snaps []siteSnap, growing []GrowingSite, n int) []SiteSeries {
	keys, grows, row := chartSites(snaps, growing, n)
	index := map[string]int{}
	out := make([]SiteSeries, len(keys)+2)
	for i, k := range keys {
		index[k] = i
		r := row[k]
		out[i] = SiteSeries{Name: r.Label(), Band: BandSite, Site: r.Label(), Func: r.Func, Growth: grows[k]}
		if r.Func != "" {
			out[i].Name += " " + r.Func
		}
	}
	other, untracked := len(keys), len(keys)+1
	out[other].Name, out[untracked].Name = "other sites", "untracked"
	out[other].Band, out[untracked].Band = BandOther, BandUntracked
	latest := map[int][]int64{} // by process: its last snapshot's bands
	for _, s := range snaps {
		bands := make([]int64, len(out))
		for _, r := range s.rows {
			switch i, ok := index[r.Key()]; {
			case r.File == wire.SiteUntracked:
				bands[untracked] += r.LiveBytes
			case ok:
				bands[i] += r.LiveBytes
			default:
				bands[other] += r.LiveBytes
			}
		}
		latest[s.pid] = bands
		for i := range out {
			var sum int64
			for _, b := range latest {
				sum += b[i]
			}
			out[i].TNS = append(out[i].TNS, s.t())
			out[i].Bytes = append(out[i].Bytes, sum)
		}
	}
	return out
}
