package recorder

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/memrec/memrec/storage"
)

// TestScrapeOfInvalidUTF8Names: a run name, host and GPU name that are not
// valid UTF-8 are scraped as valid label values (the old code answered
// every scrape with HTTP 500 and a goroutine's stack).
func TestScrapeOfInvalidUTF8Names(t *testing.T) {
	run := storage.Run{Name: "bad\xffname", Host: "h\xc3", Job: "j\xfe", GPUs: []storage.GPU{{Index: 0, UUID: "GPU-\xff", Name: "H\x80200", TotalBytes: 1 << 30}}}
	l := NewLive(run, time.Second, LiveOptions{ProcName: func(int) string { return "py\xffthon" }})
	sink := l.Wrap(Discard)
	sink.AppendDevice(storage.DeviceSample{T: 1, GPU: 0, Used: 1 << 20})
	sink.AppendProc(storage.ProcSample{T: 1, GPU: 0, PID: 7, Used: 1 << 20})
	w := httptest.NewRecorder()
	l.Handler().ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	body := w.Body.String()
	if w.Code != http.StatusOK || !utf8.ValidString(body) {
		t.Fatalf("HTTP %d, valid UTF-8 %v:\n%s", w.Code, utf8.ValidString(body), body)
	}
	for _, want := range []string{"run=\"bad\uFFFDname\"", "modelName=\"H\uFFFD200\"", "process_name=\"py\uFFFDthon\"", "memrec_gpu_memory_used_bytes{"} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s:\n%s", want, body)
		}
	}
}

// TestScrapesShareOneBuild: scrapes within Rebuild of each other get the
// same bytes, built once, whatever changed meanwhile; the next one after
// Rebuild shows the new value.
func TestScrapesShareOneBuild(t *testing.T) {
	l := NewLive(storage.Run{Name: "r", Host: "h", GPUs: []storage.GPU{{Index: 0, UUID: "GPU-0", TotalBytes: 1 << 30}}}, time.Second, LiveOptions{})
	sink := l.Wrap(Discard)
	sink.AppendDevice(storage.DeviceSample{T: 1, GPU: 0, Used: 111})
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	e := newExposition(gathererOf(l), DefaultServeLimits)
	e.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	scrape := func() string {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		return w.Body.String()
	}
	first := scrape()
	sink.AppendDevice(storage.DeviceSample{T: 2, GPU: 0, Used: 222})
	if second := scrape(); second != first || !strings.Contains(first, "} 111\n") {
		t.Fatalf("a scrape within Rebuild was built again:\n%s\n--\n%s", first, second)
	}
	mu.Lock()
	now = now.Add(DefaultServeLimits.Rebuild)
	mu.Unlock()
	if third := scrape(); !strings.Contains(third, "} 222\n") {
		t.Fatalf("after Rebuild the scrape still shows the old value:\n%s", third)
	}
	// gzip is built and cached on its own, and is what it says.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "/metrics", nil)
	r.Header.Set("Accept-Encoding", "gzip")
	e.ServeHTTP(w, r)
	if w.Header().Get("Content-Encoding") != "gzip" || !bytes.HasPrefix(w.Body.Bytes(), []byte{0x1f, 0x8b}) {
		t.Errorf("gzip asked: %q, body starts % x", w.Header().Get("Content-Encoding"), w.Body.Bytes()[:2])
	}
}

// openFDs counts this process's open file descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	return len(entries)
}

// TestServeHoldsAtMostConnsDescriptors: 300 idle connections to the
// metrics server take at most Conns descriptors of the recorder (the rest
// wait unaccepted in the kernel's backlog), and a scrape is answered once
// the idle ones time out. The old server accepted them all, one
// descriptor each, until the process had none left for the probes.
func TestServeHoldsAtMostConnsDescriptors(t *testing.T) {
	l := NewLive(storage.Run{Name: "r", Host: "h"}, time.Second, LiveOptions{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := DefaultServeLimits
	lim.Conns, lim.ReadHeader, lim.Idle = 8, 500*time.Millisecond, 500*time.Millisecond
	stop := ServeHTTP(ln, l.Handler(), lim)
	defer stop()
	before := openFDs(t)
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	for range 300 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	// The clients' own ends are this process's too: 300 of them. The
	// server's ends may be at most Conns more.
	time.Sleep(100 * time.Millisecond) // let the server accept what it will
	if got := openFDs(t) - before - len(clients); got > lim.Conns+2 {
		t.Errorf("the server holds %d descriptors for 300 idle connections, want at most %d", got, lim.Conns)
	}
	for _, c := range clients {
		c.Close()
	}
	clients = nil
	cl := &http.Client{Timeout: 30 * time.Second}
	resp, err := cl.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("scrape after the idle flood: HTTP %d", resp.StatusCode)
	}
}

// gathererOf is a registry of l alone.
func gathererOf(l *Live) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(l)
	return reg
}

// TestHostGuard: a request whose Host names another host than the
// server's (a DNS-rebinding page's own name) gets 421; the address bound,
// the name it was bound by, localhost on loopback and any IP address on
// every interface are answered.
func TestHostGuard(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	any := &net.TCPAddr{IP: net.IPv4zero, Port: 8080}
	one := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 8080}
	for _, c := range []struct {
		named string
		bound net.Addr
		host  string
		want  int
	}{
		{"127.0.0.1:0", loop, "127.0.0.1:8080", 200},
		{"127.0.0.1:0", loop, "localhost:8080", 200},
		{"127.0.0.1:0", loop, "LOCALHOST.:8080", 200},
		{"127.0.0.1:0", loop, "[::1]:8080", 200},
		{"127.0.0.1:0", loop, "attacker.example:8080", 421},
		{"127.0.0.1:0", loop, "attacker.example", 421},
		{"127.0.0.1:0", loop, "localhost.attacker.example", 421},
		{"127.0.0.1:0", loop, "10.0.0.5:8080", 421},
		{"127.0.0.1:0", loop, "", 421},
		{"0.0.0.0:8080", any, "10.0.0.5:8080", 200},
		{"0.0.0.0:8080", any, "localhost:8080", 200},
		{"0.0.0.0:8080", any, "rebind.attacker.example:8080", 421},
		{"node1.cluster:8080", one, "node1.cluster:8080", 200},
		{"node1.cluster:8080", one, "10.0.0.5:8080", 200},
		{"node1.cluster:8080", one, "localhost:8080", 421},
		{"node1.cluster:8080", one, "10.0.0.6:8080", 421},
		{"node1.cluster:8080", one, "evil.example:8080", 421},
	} {
		r := httptest.NewRequest("GET", "/api/runs", nil)
		r.Host = c.host
		w := httptest.NewRecorder()
		HostGuard(ok, c.named, c.bound).ServeHTTP(w, r)
		if w.Code != c.want {
			t.Errorf("bound %s as %q, Host %q: %d, want %d", c.bound, c.named, c.host, w.Code, c.want)
		}
	}
	if name, err := os.Hostname(); err == nil && name != "" {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = name + ":8080"
		w := httptest.NewRecorder()
		HostGuard(ok, "10.0.0.5:8080", one).ServeHTTP(w, r)
		if w.Code != 200 {
			t.Errorf("the machine's own name %q: %d", name, w.Code)
		}
	}
}

// TestServedMethodsAndHosts: on a real server, /metrics and the page
// answer 405 with Allow to a method other than GET and HEAD; the page
// answers 421 to a rebound Host, and /metrics is scraped whatever name
// the scraper uses.
func TestServedMethodsAndHosts(t *testing.T) {
	l := NewLive(liveRun(), time.Second, LiveOptions{})
	l.page = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("page")) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	stop := l.Serve(ln)
	defer stop()
	do := func(method, path, host string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+ln.Addr().String()+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for _, m := range []string{"DELETE", "POST", "PUT", "PATCH"} {
		for _, p := range []string{"/metrics", "/", "/api/runs"} {
			if r := do(m, p, "127.0.0.1"); r.StatusCode != 405 || r.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: %d, Allow %q; want 405 and GET, HEAD", m, p, r.StatusCode, r.Header.Get("Allow"))
			}
		}
	}
	if r := do("GET", "/api/runs", "rebind.attacker.example"); r.StatusCode != 421 {
		t.Errorf("page with a rebound Host: %d, want 421", r.StatusCode)
	}
	if r := do("GET", "/metrics", "gpu-node-1.alias.example:9471"); r.StatusCode != 200 {
		t.Errorf("/metrics by another name: %d, want 200", r.StatusCode)
	}
	if r := do("HEAD", "/metrics", "127.0.0.1"); r.StatusCode != 200 {
		t.Errorf("HEAD /metrics: %d", r.StatusCode)
	}
}
