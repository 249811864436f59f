package viewer

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/netutil"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
)

// TestSlowClientsHeldToABound: clients that ask for the largest window
// and never read hold at most Answers answers' figures, whatever their
// number. Conns+extra clients each ask for every line of the 3-minute
// run (each line once) at every sample; the live heap, sampled after a
// GC while they wait, stays under Answers answers' figures (lines ×
// samples × 16 B: a time and a value each, derived from the run's length
// and rate), one more for the answer being built, and a per-connection
// allowance. Before answers were streamed and
// counted, each accepted connection held its figures and the whole text
// (Conns × 40 MB here).
func TestSlowClientsHeldToABound(t *testing.T) {
	if testing.Short() {
		t.Skip("holds slow clients for a few seconds")
	}
	const (
		conns, extra, answers = 4, 8, 2
		samples               = testSeconds * 100 // the test run's rate: 100 Hz
		perConn               = 256 << 10
		slack                 = 8 << 20
	)
	path, _ := testDB(t)
	src := NewDBSource(path)
	t.Cleanup(func() { src.Close() })
	s := newServer(src, Options{Answers: answers, WriteTimeout: time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(netutil.LimitListener(smallSendBuffers{ln}, conns))
	t.Cleanup(func() { srv.Close() })
	// The index is built once, before the measure: it is the cache's, not
	// the clients'.
	var runs struct{ Shown []runJSON }
	if code := getJSON(t, "http://"+ln.Addr().String()+"/api/runs", &runs); code != 200 || len(runs.Shown) != 1 {
		t.Fatalf("runs: %d, %d runs", code, len(runs.Shown))
	}
	// Every line of the run, each once (a line given twice is refused).
	var lines strings.Builder
	n := min(len(runs.Shown[0].Lines), MaxLines)
	for _, l := range runs.Shown[0].Lines[:n] {
		lines.WriteString("&line=" + l.Key)
	}
	base := liveHeap()

	q := "/api/window?run=gen&from=0&to=" + fmt.Sprint(testSeconds) + "&points=10000" + lines.String()
	for range conns + extra {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.(*net.TCPConn).SetReadBuffer(4096)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", q)
	}
	// One answer more than Answers: one being built allocates its lines
	// as fast as the collector marks, and what it allocates meanwhile
	// counts as live.
	bound := uint64((answers+1)*n*samples*16 + conns*perConn + slack)
	var peak uint64
	busy := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		live := min(liveHeap(), liveHeap())
		peak = max(peak, live-min(base, live))
		busy = max(busy, len(s.slots))
	}
	if busy != answers {
		t.Fatalf("at most %d answers were in flight, want %d: the clients' requests did not reach the answers", busy, answers)
	}
	if peak > bound {
		t.Errorf("%d+%d clients that never read grew the live heap by %d MB, over the bound of %d MB", conns, extra, peak>>20, bound>>20)
	}
	t.Logf("live heap grew by at most %.1f MB (bound %.1f MB)", float64(peak)/(1<<20), float64(bound)/(1<<20))
}

// smallSendBuffers shrinks each connection's kernel send buffer, so
// that an answer to a client that never reads stays in flight whatever
// the loopback's buffer tuning would otherwise absorb.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// liveHeap is the heap's live bytes after a collection (not what was
// allocated since, which answers being built would add). What is
// allocated while the collection marks counts as live; the test takes
// the smaller of two.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestBusyAnswersRefused: a request that finds every answer's turn taken
// for WriteTimeout gets 503 with Retry-After, and the page itself is
// still served.
func TestBusyAnswersRefused(t *testing.T) {
	path, _ := testDB(t)
	src := NewDBSource(path)
	t.Cleanup(func() { src.Close() })
	s := newServer(src, Options{Answers: 1, WriteTimeout: 50 * time.Millisecond})
	s.slots <- struct{}{} // the one turn, taken
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/api/runs", nil))
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
		t.Errorf("busy: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	w = httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 200 {
		t.Errorf("page while busy: %d", w.Code)
	}
}

// TestWindowStreamed: a window is written in chunks of about chunkBytes,
// never as one buffer of its whole text.
func TestWindowStreamed(t *testing.T) {
	n := 50_000
	l := windowLineJSON{Key: "gpu0.used", T: make([]int64, n), V: make([]int64, n)}
	for i := range n {
		l.T[i], l.V[i] = int64(i)*10_000, 80<<30+int64(i)
	}
	w := &countingWriter{}
	if err := (&windowJSON{Run: "r", Lines: []windowLineJSON{l}}).writeJSON(w); err != nil {
		t.Fatal(err)
	}
	if w.buf.Len() < 10*chunkBytes || w.largest > chunkBytes+64 || w.writes < w.buf.Len()/(chunkBytes+64) {
		t.Errorf("%d bytes in %d writes, the largest %d: want writes of at most %d", w.buf.Len(), w.writes, w.largest, chunkBytes+64)
	}
}

type countingWriter struct {
	buf             bytes.Buffer
	writes, largest int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	w.largest = max(w.largest, len(p))
	return w.buf.Write(p)
}

// manyRunsDB writes runs named by names, each like the test run but of
// seconds, into a new file.
func manyRunsDB(t *testing.T, seconds int, names ...string) (string, []storage.Run) {
	t.Helper()
	var srcs []jsonl.Source
	for _, name := range names {
		c := tracegen.Default()
		c.Name, c.GPUs, c.Duration = name, 1, time.Duration(seconds)*time.Second
		var buf bytes.Buffer
		if _, err := tracegen.Write(&buf, c); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, jsonl.Source{Name: name, R: &buf})
	}
	path := filepath.Join(t.TempDir(), "runs.db")
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := jsonl.Import(db, srcs, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return path, runs
}

func (s *DBSource) keptRuns() map[uint64]bool {
	s.imu.Lock()
	defer s.imu.Unlock()
	ids := map[uint64]bool{}
	for id := range s.indexes {
		ids[id] = true
	}
	return ids
}

// TestIndexCacheBySize: the indexes kept take at most maxIndexBytes; the
// least recently used goes first, and a run asked for again is indexed
// again.
func TestIndexCacheBySize(t *testing.T) {
	path, runs := manyRunsDB(t, 30, "a", "b", "c")
	src := NewDBSource(path)
	t.Cleanup(func() { src.Close() })
	now := time.Unix(1e9, 0)
	src.now = func() time.Time { now = now.Add(time.Second); return now }
	a, b, c := runs[0], runs[1], runs[2]
	index := func(r storage.Run) {
		t.Helper()
		if _, _, err := src.Index(r); err != nil {
			t.Fatal(err)
		}
	}
	index(a)
	_, one := src.kept()
	if one == 0 {
		t.Fatal("an index of 0 bytes")
	}
	src.imu.Lock()
	src.maxIndexBytes = one * 5 / 2 // two of the three runs' (of the same length and rate)
	src.imu.Unlock()
	index(b)
	index(a) // a is now newer than b
	index(c)
	if got := src.keptRuns(); len(got) != 2 || !got[a.ID] || !got[c.ID] {
		t.Errorf("kept %v, want a (%d) and c (%d): b was the least recently used", got, a.ID, c.ID)
	}
	if _, bytes := src.kept(); bytes > src.maxIndexBytes {
		t.Errorf("kept %d bytes, over the bound of %d", bytes, src.maxIndexBytes)
	}
	index(b)
	if got := src.keptRuns(); len(got) != 2 || !got[b.ID] || !got[c.ID] {
		t.Errorf("after b again: kept %v, want b and c", got)
	}
	// One index larger than the bound is kept while it is the one in use.
	src.imu.Lock()
	src.maxIndexBytes = one / 2
	src.imu.Unlock()
	index(a)
	if got := src.keptRuns(); len(got) != 1 || !got[a.ID] {
		t.Errorf("bound below one index: kept %v, want a alone", got)
	}
}

// TestIndexCacheIdle: an index unused for idle is given up without any
// request coming.
func TestIndexCacheIdle(t *testing.T) {
	path, runs := manyRunsDB(t, 10, "a")
	src := NewDBSource(path)
	t.Cleanup(func() { src.Close() })
	src.idle = 50 * time.Millisecond
	if _, _, err := src.Index(runs[0]); err != nil {
		t.Fatal(err)
	}
	if n, _ := src.kept(); n != 1 {
		t.Fatalf("kept %d indexes after one request", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for n, _ := src.kept(); n > 0; n, _ = src.kept() {
		if time.Now().After(deadline) {
			t.Fatalf("still %d indexes kept 10 s after their last use, idle %v", n, src.idle)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Asked for again, the run is indexed again.
	if x, _, err := src.Index(runs[0]); err != nil || x.Samples() == 0 {
		t.Errorf("again: %v", err)
	}
}
