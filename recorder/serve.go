package recorder

import (
	"bytes"
	"compress/gzip"
	"context"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"golang.org/x/net/netutil"
)

// ServeLimits bound what HTTP clients may take from a recording (the
// metrics and the live page), so that no number of scrapers, idle
// connections or slow readers costs the sampler its ticks, the process its
// file descriptors (the probes' socket needs them), or memory without end.
// docs/limits.md lists them.
type ServeLimits struct {
	// Conns is how many connections are open at once; more wait in the
	// kernel's backlog, unaccepted, taking no descriptor of the recorder's.
	Conns int
	// ReadHeader, Write and Idle bound how long a connection may take to
	// send its request, to read the answer, and to stay open unused.
	ReadHeader, Write, Idle time.Duration
	// HeaderBytes bounds a request's header.
	HeaderBytes int
	// Scrapes is how many /metrics answers are written at once; a scrape
	// past it waits up to Write for its turn, then gets 503.
	Scrapes int
	// Rebuild is the most often the exposition is built again: scrapes in
	// between get the same bytes, so their cost does not grow with their
	// number.
	Rebuild time.Duration
	// Rate is how many /metrics answers are written a second, at most; a
	// scrape past it waits for its turn (as one past Scrapes does). A
	// Prometheus scrapes once every few seconds: this bounds what a flood
	// of scrapers costs in CPU and garbage, whatever their number.
	Rate int
}

// DefaultServeLimits are the recorder's HTTP limits.
var DefaultServeLimits = ServeLimits{
	Conns: 64, ReadHeader: 5 * time.Second, Write: 10 * time.Second, Idle: 5 * time.Second,
	HeaderBytes: 8 << 10, Scrapes: 8, Rebuild: 100 * time.Millisecond, Rate: 100,
}

// ServeHTTP serves h on ln within lim until the returned stop is called;
// stop waits at most a second for answers in flight and closes ln.
func ServeHTTP(ln net.Listener, h http.Handler, lim ServeLimits) (stop func()) {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: lim.ReadHeader, WriteTimeout: lim.Write,
		IdleTimeout: lim.Idle, MaxHeaderBytes: lim.HeaderBytes}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(netutil.LimitListener(ln, lim.Conns)) // ErrServerClosed at stop, or the listener's error
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			srv.Close()
		}
		<-done
	}
}

// HostGuard answers 421 to a request whose Host header names another
// host than the server's, so that a web page whose own name was made to
// point at this machine (DNS rebinding) cannot read what h serves. The
// names allowed: the host of named (the address as the user gave it,
// "node1:8080"), the IP bound (from bound, the listener's address), the
// machine's host name and, bound to loopback or every interface,
// "localhost" and the loopback addresses; bound to every interface, any IP
// address (an address cannot be rebound). The port is not compared. Safe
// for concurrent use.
func HostGuard(h http.Handler, named string, bound net.Addr) http.Handler {
	allowed := map[string]bool{}
	if host, _, err := net.SplitHostPort(named); err == nil && host != "" {
		allowed[strings.ToLower(host)] = true
	}
	var ip net.IP
	if a, ok := bound.(*net.TCPAddr); ok {
		ip = a.IP
		allowed[ip.String()] = true
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		name = strings.ToLower(name)
		allowed[name] = true
		short, _, _ := strings.Cut(name, ".")
		allowed[short] = true
	}
	wild := ip == nil || ip.IsUnspecified()
	if wild || ip.IsLoopback() {
		for _, n := range []string{"localhost", "127.0.0.1", "::1"} {
			allowed[n] = true
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
		if !allowed[host] && !(wild && net.ParseIP(host) != nil) {
			http.Error(w, "memrec: this server answers to the address it listens on (or localhost), not "+strconv.Quote(r.Host), http.StatusMisdirectedRequest)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// readOnly answers 405 with Allow to a method other than GET and HEAD.
func readOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "memrec: read-only: GET or HEAD", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// exposition answers /metrics from bytes built at most once per
// lim.Rebuild, per format (text or protobuf, as the scraper asks) and
// encoding (gzip or not), at most lim.Scrapes at a time. A scrape costs a
// copy of those bytes, however many come.
type exposition struct {
	g     prometheus.Gatherer
	lim   ServeLimits
	slots chan struct{}
	now   func() time.Time

	mu    sync.Mutex
	built map[string]*builtExposition // by format and encoding
	next  time.Time                   // when the next answer may be written (Rate)
	// zw is reused for every gzip build: a new one allocates about 1 MB
	// of compressor state, which at ten builds a second was most of what
	// a flood of scrapers cost in memory.
	zw *gzip.Writer
}

type builtExposition struct {
	at   time.Time
	body []byte
}

func newExposition(g prometheus.Gatherer, lim ServeLimits) *exposition {
	return &exposition{g: g, lim: lim, slots: make(chan struct{}, lim.Scrapes), now: time.Now, built: map[string]*builtExposition{}}
}

func (e *exposition) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	wait := time.NewTimer(e.lim.Write)
	defer wait.Stop()
	select {
	case e.slots <- struct{}{}:
		defer func() { <-e.slots }()
	case <-wait.C:
		http.Error(w, "memrec: too many scrapes at once; try again", http.StatusServiceUnavailable)
		return
	case <-r.Context().Done():
		return
	}
	if !e.turn(r, wait.C) {
		http.Error(w, "memrec: too many scrapes a second; try again", http.StatusServiceUnavailable)
		return
	}
	format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
	gz := acceptsGzip(r.Header.Get("Accept-Encoding"))
	body, err := e.get(format, gz)
	if err != nil {
		http.Error(w, "memrec: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", string(format))
	if gz {
		w.Header().Set("Content-Encoding", "gzip")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Write(body)
}

// turn waits for this scrape's turn under lim.Rate (the slot held), or
// says false if giveUp fires or the scraper leaves first.
func (e *exposition) turn(r *http.Request, giveUp <-chan time.Time) bool {
	if e.lim.Rate <= 0 {
		return true
	}
	e.mu.Lock()
	now := e.now()
	at := e.next
	if at.Before(now) {
		at = now
	}
	e.next = at.Add(time.Second / time.Duration(e.lim.Rate))
	e.mu.Unlock()
	d := at.Sub(now)
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-giveUp:
	case <-r.Context().Done():
	}
	return false
}

// get returns the exposition in format, built again if the last build is
// lim.Rebuild old or more. The bytes returned are never changed.
func (e *exposition) get(format expfmt.Format, gz bool) ([]byte, error) {
	key := string(format)
	if gz {
		key += ";gzip"
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	if b := e.built[key]; b != nil && now.Sub(b.at) < e.lim.Rebuild {
		return b.body, nil
	}
	mfs, err := e.g.Gather()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	var out interface {
		Write([]byte) (int, error)
	} = &buf
	var zw *gzip.Writer
	if gz {
		if e.zw == nil {
			e.zw = gzip.NewWriter(&buf)
		} else {
			e.zw.Reset(&buf)
		}
		zw = e.zw
		out = zw
	}
	enc := expfmt.NewEncoder(out, format)
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return nil, err
		}
	}
	if c, ok := enc.(expfmt.Closer); ok {
		if err := c.Close(); err != nil {
			return nil, err
		}
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return nil, err
		}
	}
	e.built[key] = &builtExposition{at: now, body: buf.Bytes()}
	return buf.Bytes(), nil
}

// acceptsGzip says whether an Accept-Encoding header takes gzip.
func acceptsGzip(h string) bool {
	for _, part := range strings.Split(h, ",") {
		enc, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(enc) == "gzip" && strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0" {
			return true
		}
	}
	return false
}
