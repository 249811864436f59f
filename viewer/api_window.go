package viewer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
)

// chunkBytes is the most of an answer written at once: a window is
// streamed in chunks of about this size, never built whole.
const chunkBytes = 32 << 10

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
// encoding them through reflection is a large part of a window's time:
// BenchmarkWindows; bench/README.md, "Figures moved from comments"), a
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
