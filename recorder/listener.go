package recorder

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// ProbeDropped is the kind of mark a probe sends to report how many
// messages its full queue dropped (in the mark's code); they count as
// dropped messages of the recording.
const ProbeDropped = "probe_dropped"

// MaxProbeDropped is the largest count one probe_dropped mark may report:
// far more than a probe's queue can drop between two of its reports. A
// negative or larger count is a broken or hostile line, not a count: the
// mark is dropped and counted (ListenerStats.BadCounts).
const MaxProbeDropped = 100_000_000

// MaxLine is the longest probe message accepted; longer ones are dropped.
const MaxLine = 64 << 10

// MaxMarkText is the longest mark text stored from the socket; a longer one
// is cut to it (ending in "…") and counted in ListenerStats.Cut.
const MaxMarkText = 4 << 10

// Limits bound what clients may queue for the store through the socket, so
// that a flood costs bounded memory and leaves sampling on time. Lines past
// a budget are read, dropped unparsed and counted. A zero field takes its
// default.
type Limits struct {
	Conns             int   // connections open at once (default 256); more are closed at once
	ClientLinesPerSec int   // per connection (default 5 000)
	ClientBytesPerSec int64 // per connection (default 1 MiB)
	LinesPerSec       int   // all connections together (default 20 000)
	BytesPerSec       int64 // all connections together (default 4 MiB)
}

// DefaultLimits are the socket's limits when Limits fields are zero.
var DefaultLimits = Limits{Conns: 256, ClientLinesPerSec: 5000, ClientBytesPerSec: 1 << 20, LinesPerSec: 20000, BytesPerSec: 4 << 20}

func (lim Limits) withDefaults() Limits {
	d := DefaultLimits
	if lim.Conns > 0 {
		d.Conns = lim.Conns
	}
	if lim.ClientLinesPerSec > 0 {
		d.ClientLinesPerSec = lim.ClientLinesPerSec
	}
	if lim.ClientBytesPerSec > 0 {
		d.ClientBytesPerSec = lim.ClientBytesPerSec
	}
	if lim.LinesPerSec > 0 {
		d.LinesPerSec = lim.LinesPerSec
	}
	if lim.BytesPerSec > 0 {
		d.BytesPerSec = lim.BytesPerSec
	}
	return d
}

// budget counts the lines and bytes taken, and dropped, in the current
// second.
type budget struct {
	window       int64 // Unix second
	lines        int
	bytes        int64
	droppedLines int
	droppedBytes int64
	readBytes    int64 // every byte read this second, kept or not
}

// read counts n bytes read from the socket in second sec (whatever they
// are: a whole line, part of one too long to keep) and reports whether
// the reader has read more than over bytes this second.
func (b *budget) read(sec int64, n int, over int64) bool {
	if b.window != sec {
		*b = budget{window: sec}
	}
	b.readBytes += int64(n)
	return b.readBytes > over
}

// fits reports whether one more line of n bytes fits, and counts it if so.
func (b *budget) fits(sec int64, n int64, maxLines int, maxBytes int64) bool {
	if b.window != sec {
		*b = budget{window: sec}
	}
	return b.lines+1 <= maxLines && b.bytes+n <= maxBytes
}

func (b *budget) take(n int64) { b.lines++; b.bytes += n }

// Listener takes marks and allocator samples from probes and from
// `memrec annotate` over a Unix socket: JSON lines of the interchange
// format's "mark", "torch" and "sites" types, from any number of connections at
// once. The socket lives in a private (0700) directory, so only its owner
// can connect. A malformed, over-long or unknown line is counted and
// dropped; nothing a client sends stops the listener.
type Listener struct {
	Path string // socket path, for MEMREC_SOCKET

	sink    Sink
	ln      net.Listener
	dir     *OwnedDir
	lim     Limits
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
	closed  bool
	marks   atomic.Int64
	torch   atomic.Int64
	sites   atomic.Int64
	dropped atomic.Int64
	flooded atomic.Int64
	refused atomic.Int64
	acceptE atomic.Int64
	cut     atomic.Int64
	// badCounts counts probe_dropped marks whose count is impossible.
	badCounts atomic.Int64
	// droppedBytes counts the bytes read and thrown away: over-long lines
	// and lines past the budgets.
	droppedBytes atomic.Int64
	totalMu      sync.Mutex
	total        budget
	// backoff is the first wait after a failed Accept; it doubles to 1 s.
	backoff time.Duration
	// onDrop, if set, is told why a line was dropped (for logs and tests).
	onDrop func(error)
	now    func() time.Time
	pause  func(time.Duration)
}

// ListenerStats count what the listener took. Dropped counts every line
// not stored (Flooded among them) and what probes report their own queues
// dropped.
type ListenerStats struct {
	Marks, Torch, Sites, Dropped int64
	Flooded                      int64 // lines dropped unparsed past a Limits budget
	Refused                      int64 // connections closed past Limits.Conns
	AcceptErrors                 int64 // failed accepts (out of file descriptors), retried
	Cut                          int64 // mark texts cut to MaxMarkText
	DroppedBytes                 int64 // bytes read and thrown away (over-long lines, lines past the budgets)
	BadCounts                    int64 // probe_dropped marks with a negative or impossible count, dropped (in Dropped)
}

// Listen creates a private directory under dir ("" for the system's
// temporary folder) with a socket in it and starts accepting. Close it.
// It first removes what killed recorders provably left there
// (RemoveStale); the folder it makes is an OwnedDir.
func Listen(dir string, sink Sink, lim Limits) (*Listener, error) {
	RemoveStale(dir)
	d, err := MakeOwnedDir(dir, "")
	if err != nil {
		return nil, fmt.Errorf("marks socket: %w", err)
	}
	if err := d.Own("marks.sock"); err != nil {
		d.Remove()
		return nil, fmt.Errorf("marks socket: %w", err)
	}
	path := filepath.Join(d.Path, "marks.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		d.Remove()
		return nil, fmt.Errorf("marks socket: %w", err)
	}
	os.Chmod(path, 0o600)
	l := newListener(ln, sink, lim)
	l.Path, l.dir = path, d
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

func newListener(ln net.Listener, sink Sink, lim Limits) *Listener {
	return &Listener{sink: sink, ln: ln, lim: lim.withDefaults(), conns: map[net.Conn]bool{}, now: time.Now, pause: time.Sleep, backoff: 5 * time.Millisecond}
}

// accept accepts connections until Close. A failed Accept (the process is
// out of file descriptors: EMFILE, ENFILE) is counted and retried after a
// wait that doubles up to 1 s; the client waits in the backlog meanwhile.
func (l *Listener) accept() {
	defer l.wg.Done()
	wait := time.Duration(0)
	for {
		c, err := l.ln.Accept()
		if err != nil {
			l.mu.Lock()
			closed := l.closed
			l.mu.Unlock()
			if closed || errors.Is(err, net.ErrClosed) {
				return
			}
			l.acceptE.Add(1)
			if l.onDrop != nil {
				l.onDrop(fmt.Errorf("accept: %w", err))
			}
			wait = min(max(2*wait, l.backoff), time.Second)
			time.Sleep(wait)
			continue
		}
		wait = 0
		l.take(c)
	}
}

// take serves an accepted connection (one made before Close too: its
// client may have sent everything and exited).
func (l *Listener) take(c net.Conn) {
	if !peerIsOwner(c) {
		c.Close()
		return
	}
	l.mu.Lock()
	if len(l.conns) >= l.lim.Conns {
		l.mu.Unlock()
		l.refused.Add(1)
		l.drop(fmt.Errorf("more than %d connections at once", l.lim.Conns))
		c.Close()
		return
	}
	l.conns[c] = true
	l.mu.Unlock()
	l.wg.Add(1)
	go l.serve(c)
}

// admit reports whether a line of n bytes from a client fits both its own
// budget and the total one for this second, and counts it if so.
func (l *Listener) admit(own *budget, n int) bool {
	sec := l.now().Unix()
	if !own.fits(sec, int64(n), l.lim.ClientLinesPerSec, l.lim.ClientBytesPerSec) {
		return false
	}
	l.totalMu.Lock()
	ok := l.total.fits(sec, int64(n), l.lim.LinesPerSec, l.lim.BytesPerSec)
	if ok {
		l.total.take(int64(n))
	}
	l.totalMu.Unlock()
	if ok {
		own.take(int64(n))
	}
	return ok
}

func (l *Listener) drop(err error) {
	l.dropped.Add(1)
	if l.onDrop != nil {
		l.onDrop(err)
	}
}

// serve reads one connection's lines until it closes.
func (l *Listener) serve(c net.Conn) {
	defer l.wg.Done()
	defer func() {
		// A bug in reading one connection ends that connection, not the
		// recording nor the job.
		if v := recover(); v != nil {
			l.drop(fmt.Errorf("reading a connection failed: %v", v))
		}
	}()
	defer func() {
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 16<<10)
	var p wire.Parser
	var line []byte
	var own budget
	stored := 0 // lines of this connection taken
	for {
		line = line[:0]
		tooLong := false
		for { // read one line, keeping at most MaxLine bytes of it
			chunk, err := br.ReadSlice('\n')
			l.throttle(&own, len(chunk))
			if !tooLong {
				if len(line)+len(chunk) > MaxLine+1 {
					tooLong = true
					l.droppedBytes.Add(int64(len(line)))
					line = line[:0]
				} else {
					line = append(line, chunk...)
				}
			}
			if tooLong {
				l.droppedBytes.Add(int64(len(chunk)))
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				switch {
				case tooLong:
					l.drop(fmt.Errorf("line longer than %d bytes", MaxLine))
				case len(line) > 0 && errors.Is(err, io.EOF):
					if l.admitHandle(&p, &own, line) { // last line without newline
						stored++
					}
				}
				if errors.Is(err, io.EOF) {
					ack(c, stored)
				}
				return
			}
			break
		}
		if tooLong {
			l.drop(fmt.Errorf("line longer than %d bytes", MaxLine))
			continue
		}
		if l.admitHandle(&p, &own, line) {
			stored++
		}
	}
}

// ack tells a client that has sent all it had (closed its side) how many
// of its lines were taken: "ok N\n". memrec annotate waits for it, so that
// a mark the recorder never took is an error there, not a silent exit 0. A
// probe does not read it; a client already gone makes the write fail,
// which is of no concern.
func ack(c net.Conn, stored int) {
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	c.Write([]byte("ok " + strconv.Itoa(stored) + "\n"))
}

// throttle charges n bytes just read to the client's and the total
// reading budgets: a connection, or all of them together, that has read
// twice its bytes budget this second is not read for floodPause. Every
// byte counts, so a client sending bytes without a newline (an endless
// line, dropped as too long) is read no faster than one sending lines.
func (l *Listener) throttle(own *budget, n int) {
	sec := l.now().Unix()
	over := own.read(sec, n, 2*l.lim.ClientBytesPerSec)
	l.totalMu.Lock()
	over = l.total.read(sec, n, 2*l.lim.BytesPerSec) || over
	l.totalMu.Unlock()
	if over {
		l.pause(floodPause)
	}
}

// admitHandle takes line if it fits the budgets, and says whether it was
// stored.
func (l *Listener) admitHandle(p *wire.Parser, own *budget, line []byte) bool {
	if len(bytes.TrimSpace(line)) == 0 {
		return false
	}
	if !l.admit(own, len(line)) {
		l.flooded.Add(1)
		l.droppedBytes.Add(int64(len(line)))
		l.drop(errFlood)
		// A client that sent twice its budget this second is read no
		// faster for a while: reading a flood only to drop it costs the
		// CPU that sampling needs. Its writes wait in the socket meanwhile.
		own.droppedLines++
		own.droppedBytes += int64(len(line))
		if own.droppedLines > l.lim.ClientLinesPerSec || own.droppedBytes > l.lim.ClientBytesPerSec {
			l.pause(floodPause)
		}
		return false
	}
	return l.handle(p, line)
}

var errFlood = errors.New("over the socket's per-second budget")

// floodPause is how long a flooding client's connection goes unread.
const floodPause = 100 * time.Millisecond

// handle parses and stores one line, and says whether it was stored.
func (l *Listener) handle(p *wire.Parser, line []byte) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return false
	}
	rec, err := p.Parse(line)
	if err != nil {
		l.drop(err)
		return false
	}
	switch rec.Type {
	case wire.TypeMark:
		if rec.Mark.T == 0 {
			rec.Mark.T = l.now().UnixNano()
		}
		if len(rec.Mark.Text) > MaxMarkText {
			rec.Mark.Text = cutText(rec.Mark.Text, MaxMarkText)
			l.cut.Add(1)
		}
		if rec.Mark.Kind == ProbeDropped {
			// A probe reports what its own full queue made it drop.
			if rec.Mark.Code != wire.None && (rec.Mark.Code < 0 || rec.Mark.Code > MaxProbeDropped) {
				l.badCounts.Add(1)
				l.drop(fmt.Errorf("a %s mark with count %d (want 0 to %d)", ProbeDropped, rec.Mark.Code, MaxProbeDropped))
				return false
			}
			l.dropped.Add(int64(max(rec.Mark.Code, 0))) // None: no count given
		}
		if err := l.sink.AppendMark(rec.Mark); err != nil {
			l.drop(err)
			return false
		}
		l.marks.Add(1)
		return true
	case wire.TypeTorch:
		if err := l.sink.AppendTorch(rec.Torch); err != nil {
			l.drop(err)
			return false
		}
		l.torch.Add(1)
		if rec.Budget != nil {
			if err := l.sink.AppendBudget(*rec.Budget); err != nil {
				l.drop(err)
			}
		}
		return true
	case wire.TypeSites:
		if err := l.sink.AppendSites(rec.Sites); err != nil {
			l.drop(err)
			return false
		}
		l.sites.Add(1)
		return true
	default:
		l.drop(fmt.Errorf("type %q is not accepted on the marks socket", rec.Type))
	}
	return false
}

// Stats returns the counts so far. Safe for concurrent use.
func (l *Listener) Stats() ListenerStats {
	return ListenerStats{Marks: l.marks.Load(), Torch: l.torch.Load(), Sites: l.sites.Load(), Dropped: l.dropped.Load(),
		Flooded: l.flooded.Load(), Refused: l.refused.Load(), AcceptErrors: l.acceptE.Load(), Cut: l.cut.Load(),
		DroppedBytes: l.droppedBytes.Load(), BadCounts: l.badCounts.Load()}
}

// cutText cuts s to at most n bytes at a rune boundary, ending in "…".
func cutText(s string, n int) string {
	const ell = "…"
	i := n - len(ell)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + ell
}

// Close stops accepting, waits up to grace for connected clients to finish
// sending, then closes them and removes the socket's directory.
func (l *Listener) Close(grace time.Duration) error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	// Connections the accept loop has not taken yet wait in the backlog;
	// closing the socket would drop them with all their clients sent (a
	// probe whose process has just exited: on a loaded machine, every mark
	// of a short job). They are served first.
	for _, c := range acceptPending(l.ln) {
		l.take(c)
	}
	err := l.ln.Close()
	done := make(chan struct{})
	go func() { l.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		l.mu.Lock()
		for c := range l.conns {
			c.Close()
		}
		l.mu.Unlock()
		<-done
	}
	if l.dir != nil {
		l.dir.Remove()
	}
	return err
}

// Errors of Send a caller can test with errors.Is.
var (
	// ErrNotTaken is a mark the recorder did not confirm: it never read it
	// (out of file descriptors, stopping), or it dropped it (past the
	// socket's bounds).
	ErrNotTaken = errors.New("the recorder did not take the mark")
)

// SendTimeout is how long Send waits for the recorder to confirm a mark.
const SendTimeout = 5 * time.Second

// Send sends one mark to the socket at path (what `memrec annotate` does)
// and waits, up to SendTimeout, for the recorder to say it took it; a mark
// it did not confirm is ErrNotTaken. It blocks; safe for concurrent use.
func Send(path string, m storage.Mark) error { return SendWithin(path, m, SendTimeout) }

// SendWithin is Send waiting up to timeout for the recorder's answer.
func SendWithin(path string, m storage.Mark, timeout time.Duration) error {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return fmt.Errorf("marks socket %s: %w", path, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(wire.AppendMark(nil, m)); err != nil {
		return fmt.Errorf("marks socket %s: %w", path, err)
	}
	if uc, ok := c.(*net.UnixConn); ok {
		uc.CloseWrite() // all sent: the recorder answers at this end
	}
	answer, err := io.ReadAll(io.LimitReader(c, 64))
	switch {
	case string(answer) == "ok 1\n":
		return nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		return fmt.Errorf("%w within %v: it may be out of file descriptors or stopping", ErrNotTaken, timeout)
	case strings.HasPrefix(string(answer), "ok "):
		return fmt.Errorf("%w: it dropped it (past its socket's bounds, or malformed)", ErrNotTaken)
	}
	return fmt.Errorf("%w: it closed the connection without taking it", ErrNotTaken)
}
