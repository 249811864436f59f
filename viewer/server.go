package viewer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

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
