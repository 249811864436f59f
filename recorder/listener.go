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
	"sync"
	"sync/atomic"
	"time"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// ProbeDropped is the kind of mark a probe sends to report how many
// messages its full queue dropped (in the mark's code); they count as
// dropped messages of the recording.
const ProbeDropped = "probe_dropped"

// MaxLine is the longest probe message accepted; longer ones are dropped.
const MaxLine = 64 << 10

// Listener takes marks and allocator samples from probes and from
// `memrec annotate` over a Unix socket: JSON lines of the interchange
// format's "mark" and "torch" types, from any number of connections at
// once. The socket lives in a private (0700) directory, so only its owner
// can connect. A malformed, over-long or unknown line is counted and
// dropped; nothing a client sends stops the listener.
type Listener struct {
	Path string // socket path, for MEMREC_SOCKET

	sink    Sink
	ln      net.Listener
	dir     string
	wg      sync.WaitGroup
	mu      sync.Mutex
	conns   map[net.Conn]bool
	closed  bool
	marks   atomic.Int64
	torch   atomic.Int64
	dropped atomic.Int64
	// onDrop, if set, is told why a line was dropped (for logs and tests).
	onDrop func(error)
	now    func() time.Time
}

// ListenerStats count what the listener took.
type ListenerStats struct {
	Marks, Torch, Dropped int64
}

// Listen creates a private directory under dir ("" for the system's
// temporary folder) with a socket in it and starts accepting. Close it.
func Listen(dir string, sink Sink) (*Listener, error) {
	d, err := os.MkdirTemp(dir, "memrec-")
	if err != nil {
		return nil, fmt.Errorf("marks socket: %w", err)
	}
	if err := os.Chmod(d, 0o700); err != nil {
		os.RemoveAll(d)
		return nil, err
	}
	path := filepath.Join(d, "marks.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		os.RemoveAll(d)
		return nil, fmt.Errorf("marks socket: %w", err)
	}
	os.Chmod(path, 0o600)
	l := &Listener{Path: path, sink: sink, ln: ln, dir: d, conns: map[net.Conn]bool{}, now: time.Now}
	l.wg.Add(1)
	go l.accept()
	return l, nil
}

func (l *Listener) accept() {
	defer l.wg.Done()
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return // closed
		}
		if !peerIsOwner(c) {
			c.Close()
			continue
		}
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			c.Close()
			return
		}
		l.conns[c] = true
		l.mu.Unlock()
		l.wg.Add(1)
		go l.serve(c)
	}
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
		l.mu.Lock()
		delete(l.conns, c)
		l.mu.Unlock()
		c.Close()
	}()
	br := bufio.NewReaderSize(c, 16<<10)
	var p wire.Parser
	var line []byte
	for {
		line = line[:0]
		tooLong := false
		for { // read one line, keeping at most MaxLine bytes of it
			chunk, err := br.ReadSlice('\n')
			if !tooLong {
				if len(line)+len(chunk) > MaxLine+1 {
					tooLong = true
				} else {
					line = append(line, chunk...)
				}
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				if len(line) > 0 && !tooLong && errors.Is(err, io.EOF) {
					l.handle(&p, line) // last line without newline
				}
				return
			}
			break
		}
		if tooLong {
			l.drop(fmt.Errorf("line longer than %d bytes", MaxLine))
			continue
		}
		l.handle(&p, line)
	}
}

func (l *Listener) handle(p *wire.Parser, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	rec, err := p.Parse(line)
	if err != nil {
		l.drop(err)
		return
	}
	switch rec.Type {
	case wire.TypeMark:
		if rec.Mark.T == 0 {
			rec.Mark.T = l.now().UnixNano()
		}
		if rec.Mark.Kind == ProbeDropped && rec.Mark.Code > 0 {
			// A probe reports what its own full queue made it drop.
			l.dropped.Add(int64(rec.Mark.Code))
		}
		if err := l.sink.AppendMark(rec.Mark); err != nil {
			l.drop(err)
			return
		}
		l.marks.Add(1)
	case wire.TypeTorch:
		if err := l.sink.AppendTorch(rec.Torch); err != nil {
			l.drop(err)
			return
		}
		l.torch.Add(1)
	default:
		l.drop(fmt.Errorf("type %q is not accepted on the marks socket", rec.Type))
	}
}

// Stats returns the counts so far. Safe for concurrent use.
func (l *Listener) Stats() ListenerStats {
	return ListenerStats{Marks: l.marks.Load(), Torch: l.torch.Load(), Dropped: l.dropped.Load()}
}

// Close stops accepting, waits up to grace for connected clients to finish
// sending, then closes them and removes the socket's directory.
func (l *Listener) Close(grace time.Duration) error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
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
	os.RemoveAll(l.dir)
	return err
}

// Send sends one mark to the socket at path (what `memrec annotate` does).
func Send(path string, m storage.Mark) error {
	c, err := net.DialTimeout("unix", path, 2*time.Second)
	if err != nil {
		return fmt.Errorf("marks socket %s: %w (is memrec record still running?)", path, err)
	}
	defer c.Close()
	c.SetWriteDeadline(time.Now().Add(2 * time.Second))
	_, err = c.Write(wire.AppendMark(nil, m))
	return err
}
