package viewer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
)

// Limits of one request: a window's points per line, the lines of one
// window request, the marks of one answer.
const (
	MaxPoints     = 10_000
	MaxLines      = 64
	MaxMarks      = 5_000
	MaxSites      = 50
	defaultPoints = 2_000
	defaultMarks  = 2_000
	defaultSites  = 8
)

// Options configure the server.
type Options struct {
	// Runs are the names of the runs the page opens with (overlaid);
	// empty: the newest run.
	Runs []string
	// Live says the source is a recording in progress: the page asks for
	// new data every second.
	Live bool
	// Answers is how many /api/ answers are built and written at once
	// (0: DefaultAnswers). An answer holds its figures until its client
	// has read it; this, with the server's cap on connections, bounds
	// what clients that never read can make the server hold.
	Answers int
	// WriteTimeout bounds each write of an answer (0: DefaultWriteTimeout):
	// a client that takes longer to accept the next chunk is dropped. A
	// request waits at most as long for its turn among Answers, then gets
	// 503.
	WriteTimeout time.Duration
}

// The defaults of Options.Answers and Options.WriteTimeout.
const (
	DefaultAnswers      = 4
	DefaultWriteTimeout = 10 * time.Second
)

// chunkBytes is the most of an answer written at once: a window is
// streamed in chunks of about this size, never built whole.
const chunkBytes = 32 << 10

// Handler serves the page at / and its API under /api/: runs, window, at,
// marks and sites, all read-only GETs. Anything else is 404 (405 for another
// method). A bad parameter is a 400 and an unknown run, line or GPU a 404,
// each with a JSON {"error": "..."} that says what was wrong; a panic in a
// handler is a 500 that says so, and the server goes on.
//
// The handler is safe for concurrent use. At most Options.Answers API
// answers are in flight at once, each written with a deadline per write;
// the caller bounds connections and checks the Host header (cmd serves it
// through recorder.ServeHTTP and recorder.HostGuard).
func Handler(src Source, opts Options) http.Handler { return newServer(src, opts) }

func newServer(src Source, opts Options) *server {
	if opts.Answers <= 0 {
		opts.Answers = DefaultAnswers
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = DefaultWriteTimeout
	}
	s := &server{src: src, opts: opts, slots: make(chan struct{}, opts.Answers)}
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", s.page)
	mux.HandleFunc("/api/runs", s.runs)
	mux.HandleFunc("/api/window", s.window)
	mux.HandleFunc("/api/at", s.at)
	mux.HandleFunc("/api/marks", s.marks)
	mux.HandleFunc("/api/sites", s.sites)
	s.mux = mux
	return s
}

type server struct {
	src   Source
	opts  Options
	mux   *http.ServeMux
	slots chan struct{} // one per API answer in flight
}

// ServeHTTP allows GET and HEAD only, gives each API answer its turn and
// its write deadlines, and turns a panic into a 500.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		fail(w, http.StatusMethodNotAllowed, "the viewer is read-only: GET only")
		return
	}
	w = &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: s.opts.WriteTimeout}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		wait := time.NewTimer(s.opts.WriteTimeout)
		defer wait.Stop()
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-wait.C:
			w.Header().Set("Retry-After", "1")
			fail(w, http.StatusServiceUnavailable, "too many answers in flight; try again")
			return
		case <-r.Context().Done():
			return
		}
	}
	defer func() {
		if p := recover(); p != nil {
			fail(w, http.StatusInternalServerError, fmt.Sprintf("internal error: %v", p))
		}
	}()
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// deadlineWriter gives each write of an answer its own deadline, so that
// an answer may take as long as its client reads steadily, and a client
// that stops reading lets go of it.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.rc.SetWriteDeadline(time.Now().Add(w.d)) // ErrNotSupported from a test's recorder: no deadline needed
	return w.ResponseWriter.Write(p)
}

func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// httpError is an answer other than 200.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func badRequest(format string, a ...any) error {
	return &httpError{http.StatusBadRequest, fmt.Sprintf(format, a...)}
}

func fail(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// reply writes v as JSON, or the error: its own code for an httpError, 404
// for an unknown run or line, 503 while the file is locked with nothing
// read before, 500 otherwise.
func reply(w http.ResponseWriter, v any, err error) {
	var he *httpError
	switch {
	case err == nil:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	case errors.As(err, &he):
		fail(w, he.code, he.msg)
	case errors.Is(err, storage.ErrNoRun), errors.Is(err, series.ErrNoLine):
		fail(w, http.StatusNotFound, err.Error())
	case errors.Is(err, storage.ErrLocked):
		w.Header().Set("Retry-After", "5")
		fail(w, http.StatusServiceUnavailable, err.Error()+": a recorder is writing this file; its own page (record --view-addr) shows the run live")
	default:
		fail(w, http.StatusInternalServerError, err.Error())
	}
}

// runJSON is a run as the page needs it. Times are µs since the run's
// start; the start itself is in ms since the Unix epoch (a float64 holds
// it exactly, which ns would not).
type runJSON struct {
	Name      string         `json:"name"`
	StartMS   int64          `json:"start_ms"`
	EndUS     int64          `json:"end_us"`
	Complete  bool           `json:"complete"`
	Live      bool           `json:"live"`
	Host      string         `json:"host,omitempty"`
	Tags      any            `json:"tags,omitempty"`
	GPUs      []gpuJSON      `json:"gpus"`
	Lines     []lineJSON     `json:"lines"`
	Steps     [][2]int64     `json:"steps"` // [t_us, step]
	StepEvery int            `json:"step_every"`
	Samples   int64          `json:"samples"`
	Epochs    [][3]int64     `json:"epochs"` // [start_us, end_us, epoch]
	Stale     string         `json:"stale,omitempty"`
	Counts    storage.Counts `json:"counts"`
	SiteGPUs  []int          `json:"site_gpus"` // the GPUs with allocation-site snapshots (/api/sites)
}

type gpuJSON struct {
	GPU   int    `json:"gpu"`
	Label string `json:"label"`
	Name  string `json:"name,omitempty"`
	Total int64  `json:"total_bytes,omitempty"`
}

type lineJSON struct {
	Key   string `json:"key"`
	Label string `json:"label"`
	GPU   int    `json:"gpu"`
	PID   int    `json:"pid,omitempty"`
	Field string `json:"field"`
}

// runsJSON answers /api/runs: every run's name, and the shown runs in full.
type runsJSON struct {
	All   []string  `json:"all"`
	Shown []runJSON `json:"shown"`
	Live  bool      `json:"live"` // the source is a recording: ask again every second
}

func (s *server) runs(w http.ResponseWriter, r *http.Request) {
	all, err := s.src.Runs()
	stale := ""
	if errors.Is(err, ErrLockedStale) {
		stale, err = err.Error(), nil
	}
	if err != nil {
		reply(w, nil, err)
		return
	}
	names := r.URL.Query()["run"]
	if len(names) == 0 {
		names = s.opts.Runs
	}
	if len(names) == 0 && len(all) > 0 {
		names = []string{all[len(all)-1].Name}
	}
	if len(names) > 8 {
		reply(w, nil, badRequest("%d runs: the page overlays at most 8", len(names)))
		return
	}
	out := runsJSON{All: []string{}, Shown: []runJSON{}, Live: s.opts.Live}
	for _, run := range all {
		out.All = append(out.All, run.Name)
	}
	for _, name := range names {
		run, err := find(all, name)
		if err != nil {
			reply(w, nil, err)
			return
		}
		rj, err := s.describe(run)
		if err != nil {
			reply(w, nil, err)
			return
		}
		if rj.Stale == "" {
			rj.Stale = stale
		}
		out.Shown = append(out.Shown, rj)
	}
	reply(w, out, nil)
}

func find(all []storage.Run, name string) (storage.Run, error) {
	if name == "" {
		return storage.Run{}, badRequest("run: empty name")
	}
	for _, r := range all {
		if r.Name == name {
			return r, nil
		}
	}
	return storage.Run{}, fmt.Errorf("run %s: %w", clip(name), storage.ErrNoRun)
}

// maxEcho bounds what of a query's value an error message repeats: a
// hostile value of a megabyte is named by its start and its length.
const maxEcho = 64

// clip quotes a query value for an error message, cut to maxEcho bytes.
func clip(v string) string {
	if len(v) <= maxEcho {
		return strconv.Quote(v)
	}
	return fmt.Sprintf("%q… (%d bytes)", v[:maxEcho], len(v))
}

// index returns the run's index; stale is what the page should say when
// the file is locked.
func (s *server) index(run storage.Run) (x *series.Index, rd Reader, stale string, err error) {
	x, rd, err = s.src.Index(run)
	if errors.Is(err, ErrLockedStale) {
		return x, nil, err.Error(), nil
	}
	return x, rd, "", err
}

func (s *server) describe(run storage.Run) (runJSON, error) {
	x, _, stale, err := s.index(run)
	if err != nil {
		return runJSON{}, err
	}
	us := func(t int64) int64 { return (t - run.StartNS) / 1000 }
	rj := runJSON{Name: run.Name, StartMS: run.StartNS / 1e6, EndUS: us(runEnd(run, x)), Complete: run.Complete, Live: s.opts.Live,
		Host: run.Host, GPUs: []gpuJSON{}, Lines: []lineJSON{}, Steps: [][2]int64{}, Epochs: [][3]int64{},
		Samples: x.Samples(), Stale: stale, Counts: run.Counts, SiteGPUs: []int{}}
	if ss, ok := s.src.(SiteSource); ok && stale == "" {
		gpus, err := ss.SiteGPUs(run)
		if err != nil && !errors.Is(err, storage.ErrLocked) {
			return runJSON{}, err
		}
		rj.SiteGPUs = append(rj.SiteGPUs, gpus...) // none while a recorder holds the file
	}
	if len(run.Tags) > 0 {
		rj.Tags = run.Tags
	}
	for _, g := range run.GPUs {
		rj.GPUs = append(rj.GPUs, gpuJSON{GPU: g.Index, Label: g.Label(), Name: g.Name, Total: g.TotalBytes})
	}
	for _, k := range x.Keys() {
		label := k.Field.Label()
		if k.PID != 0 && perGPUProcesses(x, k.GPU) > 1 {
			label += " (pid " + strconv.Itoa(k.PID) + ")"
		}
		rj.Lines = append(rj.Lines, lineJSON{Key: k.String(), Label: label, GPU: k.GPU, PID: k.PID, Field: k.Field.String()})
	}
	steps, every := x.Steps()
	for _, st := range steps {
		rj.Steps = append(rj.Steps, [2]int64{us(st.T), int64(st.Step)})
	}
	rj.StepEvery = every
	for _, e := range x.Epochs() {
		end := e.End
		if end == 0 {
			end = runEnd(run, x)
		}
		rj.Epochs = append(rj.Epochs, [3]int64{us(e.Start), us(end), int64(e.Epoch)})
	}
	return rj, nil
}

// runEnd is the later of the run's end and its newest sample (a live
// run's end moves).
func runEnd(run storage.Run, x *series.Index) int64 {
	end := run.EndNS
	if _, last, ok := x.Span(); ok {
		end = max(end, last)
	}
	return max(end, run.StartNS)
}

func perGPUProcesses(x *series.Index, gpu int) int {
	pids := map[int]bool{}
	for _, k := range x.Keys() {
		if k.GPU == gpu && k.PID != 0 {
			pids[k.PID] = true
		}
	}
	return len(pids)
}

// request is a parsed query: the run and its index.
type request struct {
	run   storage.Run
	x     *series.Index
	rd    Reader
	stale string
	q     map[string][]string
}

func (s *server) request(r *http.Request) (*request, error) {
	q := r.URL.Query()
	names := q["run"]
	if len(names) != 1 {
		return nil, badRequest("run: give exactly one run name (got %d)", len(names))
	}
	all, err := s.src.Runs()
	listStale := ""
	if errors.Is(err, ErrLockedStale) {
		listStale, err = err.Error(), nil
	}
	if err != nil {
		return nil, err
	}
	run, err := find(all, names[0])
	if err != nil {
		return nil, err
	}
	x, rd, stale, err := s.index(run)
	if err != nil {
		return nil, err
	}
	if stale == "" {
		stale = listStale
	}
	return &request{run: run, x: x, rd: rd, stale: stale, q: q}, nil
}

// seconds reads a parameter in seconds since the run's start as ns since
// the Unix epoch.
func (rq *request) seconds(name string, def *float64) (int64, error) {
	v := rq.q[name]
	if len(v) == 0 && def != nil {
		return rq.run.StartNS + int64(*def*1e9), nil
	}
	if len(v) != 1 {
		return 0, badRequest("%s: give it once, in seconds since the run's start", name)
	}
	f, err := strconv.ParseFloat(v[0], 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, badRequest("%s=%s: want a finite number of seconds since the run's start", name, clip(v[0]))
	}
	if math.Abs(f) > 10*365*86400 {
		return 0, badRequest("%s=%s: more than ten years from the run's start", name, clip(v[0]))
	}
	return rq.run.StartNS + int64(math.Round(f*1e9)), nil
}

func (rq *request) count(name string, def, limit int) (int, error) {
	v := rq.q[name]
	if len(v) == 0 {
		return def, nil
	}
	if len(v) != 1 {
		return 0, badRequest("%s: give it once, a whole number from 1 to %d (got %d)", name, limit, len(v))
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 1 || n > limit {
		return 0, badRequest("%s=%s: want a whole number from 1 to %d", name, clip(v[0]), limit)
	}
	return n, nil
}

// window checks from and to against the run: a window must overlap it.
func (rq *request) window() (from, to int64, err error) {
	if from, err = rq.seconds("from", nil); err != nil {
		return
	}
	if to, err = rq.seconds("to", nil); err != nil {
		return
	}
	if to <= from {
		return 0, 0, badRequest("window from %s to %s: to must be after from", clip(rq.q["from"][0]), clip(rq.q["to"][0]))
	}
	end := runEnd(rq.run, rq.x)
	if to <= rq.run.StartNS || from > end {
		return 0, 0, badRequest("window %s..%s s is outside the run, which spans 0..%.3f s", clip(rq.q["from"][0]), clip(rq.q["to"][0]), float64(end-rq.run.StartNS)/1e9)
	}
	return from, to, nil
}

// wholeOr is the window of from and to, or the whole run when neither is
// given.
func (rq *request) wholeOr() (from, to int64, err error) {
	if len(rq.q["from"]) == 0 && len(rq.q["to"]) == 0 {
		return rq.run.StartNS, runEnd(rq.run, rq.x) + 1, nil
	}
	return rq.window()
}

// gpu reads the gpu parameter: one of the run's GPUs (404 for another).
func (rq *request) gpu() (int, error) {
	v := rq.q["gpu"]
	n, err := 0, error(nil)
	if len(v) == 1 {
		n, err = strconv.Atoi(v[0])
	}
	if len(v) != 1 || err != nil || n < 0 {
		return 0, badRequest("gpu=%s: give one GPU index, a whole number from 0", clip(strings.Join(v, ",")))
	}
	var has []string
	for _, g := range rq.run.GPUs {
		if g.Index == n {
			return n, nil
		}
		has = append(has, strconv.Itoa(g.Index))
	}
	return 0, &httpError{http.StatusNotFound, fmt.Sprintf("run %q has no GPU %d (it has %s)", rq.run.Name, n, strings.Join(has, ", "))}
}

func (rq *request) keys() ([]series.Key, error) {
	lines := rq.q["line"]
	if len(lines) == 0 || len(lines) > MaxLines {
		return nil, badRequest("line: give 1 to %d lines (got %d)", MaxLines, len(lines))
	}
	var keys []series.Key
	for _, l := range lines {
		if len(l) > maxEcho {
			return nil, badRequest("line %s: no line has a name that long", clip(l))
		}
		k, err := series.ParseKey(l)
		if err != nil {
			return nil, badRequest("%v", err)
		}
		if slices.Contains(keys, k) {
			return nil, badRequest("line %s: given twice", clip(l))
		}
		if _, ok := rq.x.Last(k); !ok {
			return nil, fmt.Errorf("run %q has no line %s: %w", rq.run.Name, l, series.ErrNoLine)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func (rq *request) raw(k series.Key) series.RawReader {
	if rq.rd == nil {
		return nil
	}
	return rq.rd(rq.run, k)
}

// windowLine answers one line of a window into lj; a panic is its error,
// as guard makes it for the handler's own goroutine.
func (rq *request) windowLine(k series.Key, from, to int64, points int, us func(int64) int64, lj *windowLineJSON) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("line %s: internal error: %v", k, p)
		}
	}()
	res, err := rq.x.Window(k, from, to, points, rq.raw(k))
	if err != nil {
		return err
	}
	// Copied to their length: the answer holds them until its client has
	// read it, and the reducer's slices have grown by appending.
	*lj = windowLineJSON{Key: k.String(), T: make([]int64, len(res.T)), V: append(make([]int64, 0, len(res.V)), res.V...), Every: res.Every, Samples: res.Samples}
	for j, t := range res.T {
		lj.T[j] = us(t)
	}
	return nil
}

// byStoredSeries groups the positions of keys by the stored series their
// samples are read from, in the order they come.
func byStoredSeries(keys []series.Key) [][]int {
	type stored struct {
		gpu, pid int
		kind     storage.SeriesKind
	}
	at := map[stored]int{}
	var groups [][]int
	for i, k := range keys {
		s := stored{k.GPU, k.PID, kindOf(k.Field)}
		if s.kind == storage.SeriesDevice {
			s.pid = 0
		}
		g, ok := at[s]
		if !ok {
			g = len(groups)
			at[s] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	return groups
}

type windowJSON struct {
	Run    string           `json:"run"`
	FromUS int64            `json:"from_us"`
	ToUS   int64            `json:"to_us"`
	Lines  []windowLineJSON `json:"lines"`
	Stale  string           `json:"stale,omitempty"`
	TookMS float64          `json:"took_ms"`
}

type windowLineJSON struct {
	Key     string  `json:"key"`
	T       []int64 `json:"t_us"`
	V       []int64 `json:"v"`
	Every   int64   `json:"every"`   // samples per finest unit drawn: 1 = every sample
	Samples int64   `json:"samples"` // samples in the window
}

func (s *server) window(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rq, err := s.request(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	from, to, err := rq.window()
	if err != nil {
		reply(w, nil, err)
		return
	}
	points, err := rq.count("points", defaultPoints, MaxPoints)
	if err != nil {
		reply(w, nil, err)
		return
	}
	keys, err := rq.keys()
	if err != nil {
		reply(w, nil, err)
		return
	}
	us := func(t int64) int64 { return (t - rq.run.StartNS) / 1000 }
	out := windowJSON{Run: rq.run.Name, FromUS: us(from), ToUS: us(to), Lines: make([]windowLineJSON, len(keys)), Stale: rq.stale}
	// The lines are read side by side, one stored series a core (the page
	// asks for several GPUs' lines at once); a series' two fields (used
	// and driver reserved, allocated and reserved) one after the other, so
	// that the second is the first's read, kept.
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	for _, group := range byStoredSeries(keys) {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			for _, i := range group {
				errs[i] = rq.windowLine(keys[i], from, to, points, us, &out.Lines[i])
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		reply(w, nil, err)
		return
	}
	out.TookMS = float64(time.Since(start).Microseconds()) / 1000
	w.Header().Set("Content-Type", "application/json")
	out.writeJSON(w)
}

// writeJSON writes the window as encoding/json would, with the arrays of
// numbers written directly (the page's points are most of the bytes, and
// encoding them through reflection took a third of a window's time), a
// chunk of about chunkBytes at a time: an answer never holds its text
// whole. It returns the first write's error.
func (wj *windowJSON) writeJSON(w io.Writer) error {
	c := &chunked{w: w, b: make([]byte, 0, chunkBytes+64)}
	b := c.b
	str := func(b []byte, s string) []byte {
		q, _ := json.Marshal(s)
		return append(b, q...)
	}
	ints := func(b []byte, v []int64) []byte {
		b = append(b, '[')
		for i, x := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, x, 10)
			if len(b) >= chunkBytes {
				b = c.flush(b)
			}
		}
		return append(b, ']')
	}
	b = append(b, `{"run":`...)
	b = str(b, wj.Run)
	b = append(b, `,"from_us":`...)
	b = strconv.AppendInt(b, wj.FromUS, 10)
	b = append(b, `,"to_us":`...)
	b = strconv.AppendInt(b, wj.ToUS, 10)
	b = append(b, `,"lines":[`...)
	for i, l := range wj.Lines {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = str(b, l.Key)
		b = append(b, `,"t_us":`...)
		b = ints(b, l.T)
		b = append(b, `,"v":`...)
		b = ints(b, l.V)
		b = append(b, `,"every":`...)
		b = strconv.AppendInt(b, l.Every, 10)
		b = append(b, `,"samples":`...)
		b = strconv.AppendInt(b, l.Samples, 10)
		b = append(b, '}')
	}
	b = append(b, ']')
	if wj.Stale != "" {
		b = append(b, `,"stale":`...)
		b = str(b, wj.Stale)
	}
	b = append(b, `,"took_ms":`...)
	b = strconv.AppendFloat(b, wj.TookMS, 'f', -1, 64)
	c.flush(append(b, '}', '\n'))
	return c.err
}

// chunked writes a buffer out and hands it back empty; after a failed
// write it writes nothing more (the client is gone or too slow).
type chunked struct {
	w   io.Writer
	b   []byte
	err error
}

func (c *chunked) flush(b []byte) []byte {
	if c.err == nil && len(b) > 0 {
		_, c.err = c.w.Write(b)
	}
	return b[:0]
}

type atJSON struct {
	TUS   int64        `json:"t_us"`
	Lines []atLineJSON `json:"lines"`
	Marks []markJSON   `json:"marks"`
	Stale string       `json:"stale,omitempty"`
}

type atLineJSON struct {
	Key string `json:"key"`
	Has bool   `json:"has"`           // a sample at or before t exists
	T   int64  `json:"t_us"`          // its time
	V   int64  `json:"v"`             // its value
	Age int64  `json:"age_us"`        // t - its time
	Off bool   `json:"off,omitempty"` // the line ended before t (its newest sample is older than a second before t)
}

type markJSON struct {
	T     int64  `json:"t_us"`
	Kind  string `json:"kind"`
	Text  string `json:"text,omitempty"`
	Epoch *int   `json:"epoch,omitempty"`
	Step  *int   `json:"step,omitempty"`
	GPU   *int   `json:"gpu,omitempty"`
	Code  *int   `json:"code,omitempty"`
}

func markOf(m storage.Mark, start int64) markJSON {
	opt := func(v int) *int {
		if v == storage.None {
			return nil
		}
		return &v
	}
	text := m.Text
	if len(text) > 500 {
		text = text[:500] + "…"
	}
	return markJSON{T: (m.T - start) / 1000, Kind: m.Kind.String(), Text: text, Epoch: opt(m.Epoch), Step: opt(m.Step), GPU: opt(m.GPU), Code: opt(m.Code)}
}

func (s *server) at(w http.ResponseWriter, r *http.Request) {
	rq, err := s.request(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	t, err := rq.seconds("t", nil)
	if err != nil {
		reply(w, nil, err)
		return
	}
	zero := 0.0
	near, err := rq.seconds("near", &zero)
	if err != nil {
		reply(w, nil, err)
		return
	}
	if near -= rq.run.StartNS; near < 0 {
		reply(w, nil, badRequest("near: want seconds ≥ 0"))
		return
	}
	var keys []series.Key
	if len(rq.q["line"]) > 0 {
		if keys, err = rq.keys(); err != nil {
			reply(w, nil, err)
			return
		}
	} else {
		keys = rq.x.Keys()
	}
	us := func(t int64) int64 { return (t - rq.run.StartNS) / 1000 }
	out := atJSON{TUS: us(t), Lines: []atLineJSON{}, Marks: []markJSON{}, Stale: rq.stale}
	for _, k := range keys {
		st, v, ok, err := rq.x.At(k, t, rq.raw(k))
		if err != nil {
			reply(w, nil, err)
			return
		}
		l := atLineJSON{Key: k.String(), Has: ok}
		if ok {
			l.T, l.V, l.Age = us(st), v, (t-st)/1000
			last, _ := rq.x.Last(k)
			l.Off = last < t-int64(time.Second) && st == last
		}
		out.Lines = append(out.Lines, l)
	}
	marks, _ := rq.x.Marks(t-near, t+near+1, 50)
	for _, m := range marks {
		out.Marks = append(out.Marks, markOf(m, rq.run.StartNS))
	}
	reply(w, out, nil)
}

type marksJSON struct {
	Marks []markJSON `json:"marks"`
	More  int        `json:"more"` // marks in the window past the limit
}

func (s *server) marks(w http.ResponseWriter, r *http.Request) {
	rq, err := s.request(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	from, to, err := rq.window()
	if err != nil {
		reply(w, nil, err)
		return
	}
	limit, err := rq.count("limit", defaultMarks, MaxMarks)
	if err != nil {
		reply(w, nil, err)
		return
	}
	marks, more := rq.x.Marks(from, to, limit)
	out := marksJSON{Marks: make([]markJSON, 0, len(marks)), More: more}
	for _, m := range marks {
		out.Marks = append(out.Marks, markOf(m, rq.run.StartNS))
	}
	reply(w, out, nil)
}

// sitesJSON answers /api/sites: live bytes by allocation site at each of
// a GPU's site snapshots in the window, for a stacked chart.
type sitesJSON struct {
	Run    string     `json:"run"`
	GPU    int        `json:"gpu"`
	FromUS int64      `json:"from_us"`
	ToUS   int64      `json:"to_us"`
	T      []int64    `json:"t_us"` // the snapshots' times; each holds until the next
	Sites  []siteJSON `json:"sites"`
	Note   string     `json:"note,omitempty"`
	Stale  string     `json:"stale,omitempty"`
	// LeftOut counts the site rows not read, past the read's decoding
	// budget: the snapshots from the first of them on are not shown.
	LeftOut int `json:"site_rows_left_out,omitempty"`
}

// siteJSON is one band: a site, or what the sites shown leave out.
type siteJSON struct {
	Label string  `json:"label"`          // "train.py:52 keep_logits", "other sites", "untracked"
	Kind  string  `json:"kind"`           // sites.SiteBand: site, other, untracked
	Site  string  `json:"site,omitempty"` // file name and line
	Func  string  `json:"func,omitempty"`
	Grows bool    `json:"grows,omitempty"` // by the growth rule, over the window's snapshots
	Bytes []int64 `json:"bytes"`           // live bytes at each time of t_us
}

// noSites is the note of a GPU without site snapshots.
const noSites = "this run has no allocation-site snapshots on this GPU: record with --sites, or import a PyTorch memory snapshot"

// sites answers the window's snapshots of one GPU and its top sites: the
// window holds the snapshots in [from, to) and each process's last before
// from. The sites are ranked as memrec's report and memrec sites rank
// them (sites.Sites.Bands: those that grow by the growth rule over
// these snapshots first, then the largest live bytes); the rest are one
// "other sites" band, the blocks without a stack one "untracked" band,
// each left out when it holds nothing in the window.
func (s *server) sites(w http.ResponseWriter, r *http.Request) {
	rq, err := s.request(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	gpu, err := rq.gpu()
	if err != nil {
		reply(w, nil, err)
		return
	}
	from, to, err := rq.wholeOr()
	if err != nil {
		reply(w, nil, err)
		return
	}
	top, err := rq.count("top", defaultSites, MaxSites)
	if err != nil {
		reply(w, nil, err)
		return
	}
	us := func(t int64) int64 { return (t - rq.run.StartNS) / 1000 }
	out := sitesJSON{Run: rq.run.Name, GPU: gpu, FromUS: us(from), ToUS: us(to), T: []int64{}, Sites: []siteJSON{}, Stale: rq.stale}
	var snaps *sites.Sites
	if ss, ok := s.src.(SiteSource); ok {
		if snaps, err = ss.Sites(rq.run, gpu); err != nil {
			reply(w, nil, err)
			return
		}
	}
	if snaps != nil {
		if lo := snaps.LeftOut(); lo.Rows > 0 {
			out.LeftOut, out.Note = lo.Rows, fmt.Sprintf("%d site rows left out, the snapshots from the first of them on not shown: %v", lo.Rows, lo.Err)
		}
	}
	if snaps == nil || snaps.Len() == 0 {
		if out.Note == "" {
			out.Note = noSites
		}
		reply(w, out, nil)
		return
	}
	for i, b := range snaps.Bands(from, to, top) {
		if i == 0 {
			for _, t := range b.TNS {
				out.T = append(out.T, us(t))
			}
		}
		if b.Band != sites.BandSite && !slices.ContainsFunc(b.Bytes, func(v int64) bool { return v != 0 }) {
			continue
		}
		out.Sites = append(out.Sites, siteJSON{Label: b.Name, Kind: b.Band.String(), Site: b.Site, Func: b.Func, Grows: b.Growth, Bytes: b.Bytes})
	}
	reply(w, out, nil)
}
