package recorder

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// failingListener fails its first n Accepts as a process out of file
// descriptors does, then accepts for real.
type failingListener struct {
	net.Listener
	n atomic.Int64
}

func (f *failingListener) Accept() (net.Conn, error) {
	if f.n.Add(-1) >= 0 {
		return nil, &net.OpError{Op: "accept", Net: "unix", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return f.Listener.Accept()
}

// startListener starts a listener on a socket in a temporary folder,
// wrapping the net.Listener with wrap (nil: none), with the clock now (nil:
// time.Now).
func startListener(t *testing.T, sink Sink, lim Limits, wrap func(net.Listener) net.Listener, now func() time.Time) *Listener {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	l := newListener(ln, sink, lim)
	l.Path = path
	l.backoff = time.Millisecond
	if now != nil {
		l.now = now
		l.pause = func(time.Duration) {} // the fake clock decides the second
	}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(func() { l.Close(time.Second) })
	return l
}

// waitFor polls until cond holds (or fails the test after 10 s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestListenerKeepsAcceptingAfterEMFILE: Accept failing for want of file
// descriptors is counted and retried; the mark sent meanwhile arrives.
func TestListenerKeepsAcceptingAfterEMFILE(t *testing.T) {
	sink := &memSink{}
	fl := &failingListener{}
	fl.n.Store(5)
	l := startListener(t, sink, Limits{}, func(ln net.Listener) net.Listener { fl.Listener = ln; return fl }, nil)
	if err := Send(l.Path, storage.NewMark(1, wire.MarkEvent)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mark", func() bool { return l.Stats().Marks == 1 })
	if st := l.Stats(); st.AcceptErrors != 5 {
		t.Errorf("stats %+v, want 5 accept errors", st)
	}
	// And it goes on accepting.
	if err := Send(l.Path, storage.NewMark(2, wire.MarkEvent)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the second mark", func() bool { return l.Stats().Marks == 2 })
}

func sendLines(t *testing.T, path string, n int, text string) {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var buf []byte
	for i := range n {
		m := storage.NewMark(int64(i+1), wire.MarkEvent)
		m.Text = text
		buf = wire.AppendMark(buf, m)
	}
	if _, err := c.Write(buf); err != nil {
		t.Fatal(err)
	}
}

// TestListenerFloodBounds: past its own per-second budget a client's lines
// are dropped and counted, past the total one every client's; the next
// second takes lines again.
func TestListenerFloodBounds(t *testing.T) {
	sink := &memSink{}
	var mu sync.Mutex
	now := time.Unix(1000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l := startListener(t, sink, Limits{ClientLinesPerSec: 100, LinesPerSec: 150, ClientBytesPerSec: 1 << 30, BytesPerSec: 1 << 30}, nil, clock)
	handled := func() int64 { st := l.Stats(); return st.Marks + st.Dropped }

	sendLines(t, l.Path, 500, "a")
	waitFor(t, "client A's lines", func() bool { return handled() == 500 })
	if st := l.Stats(); st.Marks != 100 || st.Flooded != 400 || st.Dropped != 400 {
		t.Fatalf("client A: %+v, want 100 stored and 400 flooded", st)
	}
	sendLines(t, l.Path, 100, "b")
	waitFor(t, "client B's lines", func() bool { return handled() == 600 })
	if st := l.Stats(); st.Marks != 150 || st.Flooded != 450 {
		t.Fatalf("client B: %+v, want 50 more stored (the total budget) and 50 flooded", st)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	sendLines(t, l.Path, 10, "c")
	waitFor(t, "client C's lines", func() bool { return handled() == 610 })
	if st := l.Stats(); st.Marks != 160 {
		t.Fatalf("next second: %+v, want 10 more stored", st)
	}
}

// TestListenerByteBudgetAndCut: the byte budget counts line bytes, and a
// long mark text is stored cut to MaxMarkText.
func TestListenerByteBudgetAndCut(t *testing.T) {
	sink := &memSink{}
	l := startListener(t, sink, Limits{ClientBytesPerSec: 100 << 10}, nil, func() time.Time { return time.Unix(1000, 0) })
	text := strings.Repeat("é", 30<<10/2) // 30 KiB of two-byte runes
	sendLines(t, l.Path, 10, text)
	waitFor(t, "the lines", func() bool { st := l.Stats(); return st.Marks+st.Dropped == 10 })
	st := l.Stats()
	if st.Marks != 3 || st.Flooded != 7 || st.Cut != 3 {
		t.Fatalf("%+v: want 3 stored (100 KiB of 30 KiB lines), 7 flooded, 3 cut", st)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	got := sink.marks[0].Text
	if len(got) > MaxMarkText || !strings.HasSuffix(got, "…") || !strings.HasPrefix(text, strings.TrimSuffix(got, "…")) {
		t.Errorf("cut text: %d bytes, ends %q", len(got), got[len(got)-8:])
	}
}

// TestListenerConnectionLimit: connections past Limits.Conns are closed at
// once and counted; the ones inside keep working.
func TestListenerConnectionLimit(t *testing.T) {
	sink := &memSink{}
	l := startListener(t, sink, Limits{Conns: 2}, nil, nil)
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("unix", l.Path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	waitFor(t, "two connections", func() bool { l.mu.Lock(); defer l.mu.Unlock(); return len(l.conns) == 2 })
	extra, err := net.Dial("unix", l.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("third connection: %v, want closed", err)
	}
	if st := l.Stats(); st.Refused != 1 {
		t.Errorf("%+v", st)
	}
	fmt.Fprintf(held[0], "%s", wire.AppendMark(nil, storage.NewMark(1, wire.MarkEvent)))
	waitFor(t, "a mark on a held connection", func() bool { return l.Stats().Marks == 1 })
}

// FuzzListener feeds arbitrary bytes to a connection: the listener never
// panics or hangs, stores what it counts, and cuts every mark text.
func FuzzListener(f *testing.F) {
	m := storage.NewMark(5, wire.MarkStep)
	m.Step, m.Text = 3, "hello"
	f.Add(wire.AppendMark(nil, m))
	f.Add(wire.AppendTorch(nil, storage.TorchSample{T: 7, GPU: 1, PID: 2, Allocated: 5, Reserved: 9}))
	f.Add([]byte("{not json\n\n{\"type\":\"mark\",\"kind\":\"probe_dropped\",\"code\":3}\n{\"type\":\"bogus\"}"))
	f.Add([]byte(`{"type":"mark","t_ns":-9223372036854775808,"kind":"event","text":"` + strings.Repeat("x", MaxMarkText+3) + `"}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		sink := &memSink{}
		l := newListener(nil, sink, Limits{})
		client, server := net.Pipe()
		l.wg.Add(1)
		go l.serve(server)
		go func() {
			client.Write(data)
			client.Close()
		}()
		done := make(chan struct{})
		go func() { l.wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("listener hangs")
		}
		st := l.Stats()
		sink.mu.Lock()
		defer sink.mu.Unlock()
		if st.Marks != int64(len(sink.marks)) || st.Torch != int64(len(sink.torch)) {
			t.Fatalf("stats %+v, sink has %d marks and %d allocator samples", st, len(sink.marks), len(sink.torch))
		}
		for _, m := range sink.marks {
			if len(m.Text) > MaxMarkText {
				t.Fatalf("mark text of %d bytes stored", len(m.Text))
			}
		}
	})
}

// TestListenerRefusesTimesOutOfBounds: a mark dated near the end of int64
// from the socket is dropped and counted, and the run stays analysable.
func TestListenerRefusesTimesOutOfBounds(t *testing.T) {
	db, err := storage.Open(filepath.Join(t.TempDir(), "m.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	app, err := db.NewAppender(storage.Run{Name: "r", StartNS: time.Now().UnixNano(), GPUs: []storage.GPU{{Index: 0}}}, storage.AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	l := startListener(t, app, Limits{}, nil, nil)
	for _, ts := range []int64{math.MaxInt64, math.MinInt64, 1} {
		m := storage.NewMark(ts, wire.MarkEvent)
		if err := Send(l.Path, m); !errors.Is(err, ErrNotTaken) {
			t.Fatalf("a mark at %d the recorder dropped: Send says %v, want ErrNotTaken", ts, err)
		}
	}
	if err := Send(l.Path, storage.NewMark(time.Now().UnixNano(), wire.MarkEvent)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "four lines", func() bool { st := l.Stats(); return st.Marks+st.Dropped == 4 })
	if st := l.Stats(); st.Marks != 1 || st.Dropped != 3 {
		t.Fatalf("%+v: want the one mark of today stored, three dropped", st)
	}
	if err := app.Close(); err != nil {
		t.Fatal(err)
	}
	if r := app.Run(); r.EndNS > storage.LatestTime {
		t.Errorf("run end %d past the bound", r.EndNS)
	}
}

// TestListenerCloseServesTheBacklog: a client that connected, sent and
// exited before the accept loop took its connection (a short job on a
// loaded machine) still has its lines stored when the listener closes.
// The accept loop is not started here, so every connection is in the
// backlog at Close.
func TestListenerCloseServesTheBacklog(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the backlog is taken at Close on Linux")
	}
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	l := newListener(ln, sink, Limits{})
	for i := range 3 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		m := storage.NewMark(int64(i+1), wire.MarkEpochStart)
		m.Epoch = i
		if _, err := c.Write(wire.AppendMark(nil, m)); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	l.Close(time.Second)
	if st := l.Stats(); st.Marks != 3 || len(sink.marks) != 3 {
		t.Fatalf("%d marks stored of 3 sent (%+v)", len(sink.marks), st)
	}
}

// TestListenerBudgetsEveryByteRead: a client that sends bytes with no
// newline (one endless line) is charged for every byte it sends: past
// twice its bytes budget in a second it is paused, and all it sent is
// counted as dropped bytes. The old code read such a line at full speed,
// unpaused and uncounted (the budgets saw only whole lines).
func TestListenerBudgetsEveryByteRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l := newListener(ln, &memSink{}, Limits{ClientBytesPerSec: 1 << 20})
	l.Path = path
	l.now = func() time.Time { return time.Unix(1000, 0) } // one second throughout
	var pauses atomic.Int64
	l.pause = func(time.Duration) { pauses.Add(1) }
	l.wg.Add(1)
	go l.accept()
	defer l.Close(time.Second)

	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	const sent = 8 << 20
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for n := 0; n < sent; n += len(chunk) {
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	waitFor(t, "the over-long line", func() bool { return l.Stats().Dropped == 1 })
	st := l.Stats()
	if st.DroppedBytes != sent {
		t.Errorf("%d dropped bytes counted, want the %d sent", st.DroppedBytes, sent)
	}
	// Past 2 MiB in the second, every read of its 16 KiB buffer pauses.
	if min := int64((sent - 2<<20) / (16 << 10)); pauses.Load() < min {
		t.Errorf("paused %d times, want at least %d", pauses.Load(), min)
	}
}

// TestListenerProbeDroppedCounts: a probe's count of dropped messages is
// added to the dropped ones only if it is one a probe can report; an
// impossible count drops the mark itself, counted once, and adds nothing.
func TestListenerProbeDroppedCounts(t *testing.T) {
	for _, tc := range []struct {
		code    string
		stored  bool
		dropped int64
		bad     int64
	}{
		{`3`, true, 3, 0},
		{`0`, true, 0, 0},
		{fmt.Sprint(MaxProbeDropped), true, MaxProbeDropped, 0},
		{fmt.Sprint(MaxProbeDropped + 1), false, 1, 1},
		{`2147483648`, false, 1, 1},
		{`-5`, false, 1, 0}, // refused by the parser already: no mark has a negative code
	} {
		sink := &memSink{}
		l := newListener(nil, sink, Limits{})
		var p wire.Parser
		line := fmt.Sprintf(`{"type":"mark","kind":"probe_dropped","t_ns":1700000000000000000,"code":%s}`, tc.code)
		if got := l.handle(&p, []byte(line)); got != tc.stored {
			t.Errorf("code %s: stored %v, want %v", tc.code, got, tc.stored)
		}
		st := l.Stats()
		if st.Dropped != tc.dropped || st.BadCounts != tc.bad || int64(len(sink.marks)) != map[bool]int64{true: 1}[tc.stored] {
			t.Errorf("code %s: dropped %d, bad %d, %d marks stored; want %d, %d", tc.code, st.Dropped, st.BadCounts, len(sink.marks), tc.dropped, tc.bad)
		}
	}
}
