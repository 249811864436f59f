package storage

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sort"
	"strconv"

	"github.com/valyala/fastjson"
	bolt "go.etcd.io/bbolt"
)

// This file reads and writes the JSON Lines interchange format of
// DESIGN.md: one object a line, "type" first; a "run" line starts a run.

// Source is one named input of an import ("-" for standard input).
type Source struct {
	Name string
	R    io.Reader
}

// ImportOptions configure DB.Import.
type ImportOptions struct {
	// Name renames the imported run; the input must then hold exactly one.
	Name string
	// Replace deletes a stored run of the same name instead of refusing.
	Replace bool
	// Workers parse lines in parallel; zero means GOMAXPROCS.
	Workers int
}

// Import reads JSON Lines from every source into the database in one
// transaction: it either imports every run or, on any error, leaves the
// file exactly as it was. Errors name the source and line. Unknown fields
// are ignored. It blocks until done and returns the imported runs.
func (db *DB) Import(srcs []Source, opts ImportOptions) ([]Run, error) {
	var runs []Run
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		imp := &importer{tx: tx, opts: opts, names: map[string]bool{}}
		for _, src := range srcs {
			imp.src = src.Name
			if err := imp.read(src.R); err != nil {
				return err
			}
		}
		if err := imp.finish(); err != nil {
			return err
		}
		runs = imp.done
		if len(runs) == 0 {
			return errors.New("import: no run in the input (a file starts with a \"run\" line)")
		}
		return nil
	})
	return runs, err
}

type recType uint8

const (
	recRun recType = iota + 1
	recGPU
	recSample
	recProc
	recTorch
	recMark
)

// rec is one parsed line.
type rec struct {
	typ   recType
	line  int
	dev   DeviceSample
	proc  ProcSample
	torch TorchSample
	mark  Mark
	raw   []byte // run and gpu lines: the line itself, decoded by the importer
}

type importer struct {
	tx    *bolt.Tx
	opts  ImportOptions
	src   string
	w     *runWriter
	names map[string]bool
	done  []Run
}

func (imp *importer) errf(line int, format string, args ...any) error {
	return fmt.Errorf("%s:%d: "+format, append([]any{imp.src, line}, args...)...)
}

// finish writes the current run's remaining chunks into the transaction.
func (imp *importer) finish() error {
	if imp.w == nil {
		return nil
	}
	committed, err := imp.w.flush(imp.tx)
	if err != nil {
		return fmt.Errorf("%s: write run %q: %w", imp.src, imp.w.run.Name, err)
	}
	committed()
	imp.done = append(imp.done, imp.w.run)
	imp.w = nil
	return nil
}

// runLine is the "run" line. Fields beyond DESIGN.md's are memrec's own
// export of what it knows about a run; all are optional but the name.
type runLine struct {
	Name       string          `json:"name"`
	Host       string          `json:"host"`
	StartNS    *int64          `json:"start_ns"`
	EndNS      int64           `json:"end_ns"`
	IntervalNS int64           `json:"interval_ns"`
	Tags       map[string]any  `json:"tags"`
	Complete   *bool           `json:"complete"`
	Recorder   json.RawMessage `json:"recorder"`
}

func (imp *importer) startRun(r rec) error {
	if err := imp.finish(); err != nil {
		return err
	}
	var l runLine
	if err := json.Unmarshal(r.raw, &l); err != nil {
		return imp.errf(r.line, "run: %v", err)
	}
	if imp.opts.Name != "" {
		if len(imp.done) > 0 {
			return imp.errf(r.line, "a second run in the input, but --name renames exactly one run")
		}
		l.Name = imp.opts.Name
	}
	if l.Name == "" {
		return imp.errf(r.line, "run has no name (give one with --name)")
	}
	if imp.names[l.Name] {
		return imp.errf(r.line, "run %q appears twice in the input", l.Name)
	}
	imp.names[l.Name] = true
	run := Run{Name: l.Name, Host: l.Host, EndNS: l.EndNS, IntervalNS: l.IntervalNS, Complete: true}
	if l.StartNS != nil {
		run.StartNS = *l.StartNS
	} else {
		run.StartNS = MinTime // set from the first sample
	}
	if l.Complete != nil {
		run.Complete = *l.Complete
	}
	if len(l.Recorder) > 0 {
		if err := json.Unmarshal(l.Recorder, &run.Recorder); err != nil {
			return imp.errf(r.line, "run recorder: %v", err)
		}
	}
	if len(l.Tags) > 0 {
		run.Tags = map[string]string{}
		for k, v := range l.Tags {
			switch v := v.(type) {
			case string:
				run.Tags[k] = v
			case float64, bool, json.Number:
				run.Tags[k] = fmt.Sprint(v)
			default:
				return imp.errf(r.line, "run tag %q: want a string or number, got %T", k, v)
			}
		}
	}
	run, err := createRun(imp.tx, run, imp.opts.Replace)
	if err != nil {
		return imp.errf(r.line, "%w", err)
	}
	imp.w = newRunWriter(run)
	return nil
}

func (imp *importer) apply(r rec) error {
	if r.typ == recRun {
		return imp.startRun(r)
	}
	w := imp.w
	if w == nil {
		return imp.errf(r.line, "data before the first \"run\" line")
	}
	var err error
	switch r.typ {
	case recGPU:
		var g GPU
		if err := json.Unmarshal(r.raw, &g); err != nil {
			return imp.errf(r.line, "gpu: %v", err)
		}
		if g.Index < 0 || g.TotalBytes < 0 {
			return imp.errf(r.line, "gpu: negative index or total_bytes")
		}
		if w.gpus[g.Index] {
			return imp.errf(r.line, "gpu %d declared twice", g.Index)
		}
		w.run.GPUs = append(w.run.GPUs, g)
		w.gpus[g.Index] = true
		return nil
	case recSample:
		err = w.addDevice(r.dev)
		imp.firstTime(r.dev.T)
	case recProc:
		err = w.addProc(r.proc)
		imp.firstTime(r.proc.T)
	case recTorch:
		err = w.addTorch(r.torch)
		imp.firstTime(r.torch.T)
	case recMark:
		err = w.addMark(r.mark)
		imp.firstTime(r.mark.T)
	}
	if err != nil {
		return imp.errf(r.line, "%s: %w", typeNames[r.typ], err)
	}
	return nil
}

func (imp *importer) firstTime(t int64) {
	if imp.w.run.StartNS == MinTime {
		imp.w.run.StartNS = t
	}
}

var typeNames = map[recType]string{recRun: "run", recGPU: "gpu", recSample: "sample", recProc: "proc", recTorch: "torch", recMark: "mark"}

// batch is a slice of input lines parsed by one worker.
type batch struct {
	line int // number of the first line
	data []byte
	recs []rec
	err  error
	out  chan struct{}
}

const batchBytes = 256 << 10

// read parses the source in parallel and applies the records in order.
func (imp *importer) read(r io.Reader) error {
	workers := imp.opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	jobs := make(chan *batch, workers)
	order := make(chan *batch, 2*workers)
	stop := make(chan struct{})
	readErr := make(chan error, 1)

	go func() { // split the input into batches of whole lines
		defer close(jobs)
		defer close(order)
		br := bufio.NewReaderSize(r, 1<<20)
		line := 1
		var carry []byte
		for {
			buf := make([]byte, len(carry), batchBytes+len(carry))
			copy(buf, carry)
			n, err := io.ReadFull(br, buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			end := len(buf)
			if err == nil { // more to come: cut after the last newline
				if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
					end = i + 1
				} else {
					carry = buf
					continue // a line longer than the batch: keep reading
				}
			}
			carry = append([]byte(nil), buf[end:]...)
			if end > 0 {
				b := &batch{line: line, data: buf[:end], out: make(chan struct{})}
				line += bytes.Count(b.data, []byte{'\n'})
				select {
				case order <- b:
				case <-stop:
					return
				}
				select {
				case jobs <- b:
				case <-stop:
					return
				}
			}
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				readErr <- nil
				return
			}
			if err != nil {
				readErr <- err
				return
			}
		}
	}()
	for i := 0; i < workers; i++ {
		go func() {
			var p fastjson.Parser
			for b := range jobs {
				b.recs, b.err = parseBatch(&p, b.data, b.line, imp.src)
				close(b.out)
			}
		}()
	}
	var err error
	for b := range order {
		<-b.out
		if err == nil {
			err = b.err
		}
		for i := 0; i < len(b.recs) && err == nil; i++ {
			err = imp.apply(b.recs[i])
		}
		if err != nil {
			close(stop)
			for range order { // let the reader finish
			}
			break
		}
	}
	if err != nil {
		return err
	}
	if err := <-readErr; err != nil {
		return fmt.Errorf("%s: %w", imp.src, err)
	}
	return nil
}

// parseBatch parses the lines of one batch.
func parseBatch(p *fastjson.Parser, data []byte, line int, src string) ([]rec, error) {
	recs := make([]rec, 0, bytes.Count(data, []byte{'\n'})+1)
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		var l []byte
		if i < 0 {
			l, data = data, nil
		} else {
			l, data = data[:i], data[i+1:]
		}
		if len(bytes.TrimSpace(l)) > 0 {
			r, err := parseLine(p, l)
			if err != nil {
				return recs, fmt.Errorf("%s:%d: %w", src, line, err)
			}
			r.line = line
			recs = append(recs, r)
		}
		line++
	}
	return recs, nil
}

// fields reads typed fields of one object, remembering the first error.
type fields struct {
	o   *fastjson.Object
	err error
}

func (f *fields) int(key string, required bool, def int64) int64 {
	v := f.o.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		if required && f.err == nil {
			f.err = fmt.Errorf("missing %q", key)
		}
		return def
	}
	if v.Type() != fastjson.TypeNumber {
		if f.err == nil {
			f.err = fmt.Errorf("%q: want an integer, got %s", key, v.Type())
		}
		return def
	}
	n, err := v.Int64()
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%q: not an integer: %s", key, v)
	}
	return n
}

func (f *fields) opt(key string) int {
	n := f.int(key, false, None)
	if n < 0 && n != None && f.err == nil {
		f.err = fmt.Errorf("%q is negative (%d)", key, n)
	}
	if n > 1<<31 && f.err == nil {
		f.err = fmt.Errorf("%q is too large (%d)", key, n)
	}
	return int(n)
}

func (f *fields) str(key string, required bool) string {
	v := f.o.Get(key)
	if v == nil || v.Type() == fastjson.TypeNull {
		if required && f.err == nil {
			f.err = fmt.Errorf("missing %q", key)
		}
		return ""
	}
	b, err := v.StringBytes()
	if err != nil && f.err == nil {
		f.err = fmt.Errorf("%q: want a string, got %s", key, v.Type())
	}
	return string(b)
}

func parseLine(p *fastjson.Parser, l []byte) (rec, error) {
	v, err := p.ParseBytes(l)
	if err != nil {
		return rec{}, fmt.Errorf("malformed JSON: %v", err)
	}
	o, err := v.Object()
	if err != nil {
		return rec{}, fmt.Errorf("want a JSON object, got %s", v.Type())
	}
	f := fields{o: o}
	typ := f.str("type", true)
	if f.err != nil {
		return rec{}, f.err
	}
	var r rec
	switch typ {
	case "run":
		r.typ, r.raw = recRun, append([]byte(nil), l...)
	case "gpu":
		r.typ, r.raw = recGPU, append([]byte(nil), l...)
	case "sample":
		r.typ = recSample
		r.dev = DeviceSample{T: f.int("t_ns", true, 0), GPU: int(f.int("gpu", true, 0)),
			Used: f.int("used_bytes", true, 0), Reserved: f.int("reserved_bytes", false, 0)}
	case "proc":
		r.typ = recProc
		r.proc = ProcSample{T: f.int("t_ns", true, 0), GPU: int(f.int("gpu", true, 0)),
			PID: int(f.int("pid", true, 0)), Used: f.int("used_bytes", true, 0)}
	case "torch":
		r.typ = recTorch
		r.torch = TorchSample{T: f.int("t_ns", true, 0), GPU: int(f.int("gpu", true, 0)),
			PID: int(f.int("pid", true, 0)), Rank: f.opt("rank"),
			Allocated: f.int("allocated_bytes", true, 0), Reserved: f.int("reserved_bytes", true, 0),
			InactiveSplit: f.int("inactive_split_bytes", false, 0), PeakAllocated: f.int("peak_allocated_bytes", false, 0),
			Segments: f.int("segments", false, 0), AllocRetries: f.int("alloc_retries", false, 0), OOMs: f.int("ooms", false, 0)}
		r.torch.Active = f.int("active_bytes", false, r.torch.Allocated)
	case "mark":
		r.typ = recMark
		r.mark = Mark{T: f.int("t_ns", true, 0), Kind: f.str("kind", true), Epoch: f.opt("epoch"),
			Step: f.opt("step"), Rank: f.opt("rank"), GPU: f.opt("gpu"), PID: f.opt("pid"),
			Code: f.opt("code"), Text: f.str("text", false)}
	default:
		return rec{}, fmt.Errorf("unknown type %q (want run, gpu, sample, proc, torch or mark)", typ)
	}
	if f.err != nil {
		return rec{}, fmt.Errorf("%s: %w", typ, f.err)
	}
	if r.typ != recRun && r.typ != recGPU && r.typ != recMark {
		if g := f.o.Get("gpu"); g != nil {
			if n, _ := g.Int64(); n < 0 {
				return rec{}, fmt.Errorf("%s: \"gpu\" is negative (%d)", typ, n)
			}
		}
	}
	return r, nil
}

// exportRun is the run line memrec writes: DESIGN.md's fields and its own.
type exportRun struct {
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Host       string            `json:"host,omitempty"`
	StartNS    int64             `json:"start_ns"`
	EndNS      int64             `json:"end_ns,omitempty"`
	IntervalNS int64             `json:"interval_ns,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Complete   bool              `json:"complete"`
	Recorder   *Recorder         `json:"recorder,omitempty"`
}

type exportGPU struct {
	Type string `json:"type"`
	GPU
}

// Export writes a run as JSON Lines: the run and gpu lines, then every
// sample, process sample, allocator sample and mark merged in time order.
// It streams: memory does not grow with the run's length.
func (db *DB) Export(out io.Writer, r Run) error {
	w := bufio.NewWriterSize(out, 1<<20)
	head := exportRun{Type: "run", Name: r.Name, Host: r.Host, StartNS: r.StartNS, EndNS: r.EndNS,
		IntervalNS: r.IntervalNS, Tags: r.Tags, Complete: r.Complete}
	if r.Recorder != (Recorder{}) {
		head.Recorder = &r.Recorder
	}
	enc := json.NewEncoder(w)
	if err := enc.Encode(head); err != nil {
		return err
	}
	gpus := append([]GPU(nil), r.GPUs...)
	sort.Slice(gpus, func(i, j int) bool { return gpus[i].Index < gpus[j].Index })
	for _, g := range gpus {
		if err := enc.Encode(exportGPU{"gpu", g}); err != nil {
			return err
		}
	}
	series, err := db.Series(r)
	if err != nil {
		return err
	}
	var h lineHeap
	for i, s := range series {
		var src *lineSource
		switch s.Kind {
		case "device":
			src = iterLines(db.DeviceSamples(r, s.GPU, MinTime, MaxTime), func(b []byte, s DeviceSample) (int64, []byte) {
				return s.T, appendSample(b, s)
			})
		case "proc":
			src = iterLines(db.ProcSamples(r, s.GPU, s.PID, MinTime, MaxTime), func(b []byte, s ProcSample) (int64, []byte) {
				return s.T, appendProc(b, s)
			})
		case "torch":
			src = iterLines(db.TorchSamples(r, s.GPU, s.PID, MinTime, MaxTime), func(b []byte, s TorchSample) (int64, []byte) {
				return s.T, appendTorch(b, s)
			})
		}
		if err := h.push(src, i); err != nil {
			return err
		}
	}
	marks := iterLines(db.Marks(r, MinTime, MaxTime), func(b []byte, m Mark) (int64, []byte) {
		return m.T, appendMark(b, m)
	})
	if err := h.push(marks, len(series)); err != nil {
		return err
	}
	heap.Init(&h)
	for h.Len() > 0 {
		top := h.items[0]
		if _, err := w.Write(top.line); err != nil {
			return err
		}
		if top.advance() {
			heap.Fix(&h, 0)
		} else {
			if err := top.err(); err != nil {
				return err
			}
			heap.Pop(&h)
		}
	}
	return w.Flush()
}

// lineSource is one series being exported: its current line and time.
type lineSource struct {
	t     int64
	order int
	line  []byte
	next  func(b []byte) (t int64, line []byte, ok bool)
	err   func() error
}

func (s *lineSource) advance() bool {
	t, l, ok := s.next(s.line[:0])
	if ok {
		s.t, s.line = t, l
	}
	return ok
}

func iterLines[T any](it *Iter[T], format func([]byte, T) (int64, []byte)) *lineSource {
	return &lineSource{
		next: func(b []byte) (int64, []byte, bool) {
			if !it.Next() {
				return 0, b, false
			}
			t, l := format(b, it.At())
			return t, l, true
		},
		err: it.Err,
	}
}

type lineHeap struct{ items []*lineSource }

func (h *lineHeap) push(s *lineSource, order int) error {
	s.order = order
	if s.advance() {
		h.items = append(h.items, s)
	}
	return s.err()
}

func (h lineHeap) Len() int { return len(h.items) }
func (h lineHeap) Less(i, j int) bool {
	a, b := h.items[i], h.items[j]
	if a.t != b.t {
		return a.t < b.t
	}
	return a.order < b.order
}
func (h lineHeap) Swap(i, j int) { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *lineHeap) Push(x any)   { h.items = append(h.items, x.(*lineSource)) }
func (h *lineHeap) Pop() any {
	n := len(h.items) - 1
	x := h.items[n]
	h.items = h.items[:n]
	return x
}

func appendKV(b []byte, key string, v int64) []byte {
	b = append(b, ',', '"')
	b = append(b, key...)
	b = append(b, '"', ':')
	return strconv.AppendInt(b, v, 10)
}

func appendHead(b []byte, typ string, t int64, gpu int) []byte {
	b = append(b, `{"type":"`...)
	b = append(b, typ...)
	b = append(b, '"')
	b = appendKV(b, "t_ns", t)
	if gpu >= 0 {
		b = appendKV(b, "gpu", int64(gpu))
	}
	return b
}

func appendSample(b []byte, s DeviceSample) []byte {
	b = appendHead(b, "sample", s.T, s.GPU)
	b = appendKV(b, "used_bytes", s.Used)
	b = appendKV(b, "reserved_bytes", s.Reserved)
	return append(b, '}', '\n')
}

func appendProc(b []byte, s ProcSample) []byte {
	b = appendHead(b, "proc", s.T, s.GPU)
	b = appendKV(b, "pid", int64(s.PID))
	b = appendKV(b, "used_bytes", s.Used)
	return append(b, '}', '\n')
}

func appendTorch(b []byte, s TorchSample) []byte {
	b = appendHead(b, "torch", s.T, s.GPU)
	b = appendKV(b, "pid", int64(s.PID))
	if s.Rank != None {
		b = appendKV(b, "rank", int64(s.Rank))
	}
	b = appendKV(b, "allocated_bytes", s.Allocated)
	b = appendKV(b, "reserved_bytes", s.Reserved)
	b = appendKV(b, "active_bytes", s.Active)
	b = appendKV(b, "inactive_split_bytes", s.InactiveSplit)
	b = appendKV(b, "peak_allocated_bytes", s.PeakAllocated)
	b = appendKV(b, "segments", s.Segments)
	b = appendKV(b, "alloc_retries", s.AllocRetries)
	b = appendKV(b, "ooms", s.OOMs)
	return append(b, '}', '\n')
}

func appendMark(b []byte, m Mark) []byte {
	b = appendHead(b, "mark", m.T, -1)
	b = append(b, `,"kind":`...)
	b = appendJSONString(b, m.Kind)
	for _, f := range []struct {
		k string
		v int
	}{{"epoch", m.Epoch}, {"step", m.Step}, {"rank", m.Rank}, {"gpu", m.GPU}, {"pid", m.PID}, {"code", m.Code}} {
		if f.v != None {
			b = appendKV(b, f.k, int64(f.v))
		}
	}
	if m.Text != "" {
		b = append(b, `,"text":`...)
		b = appendJSONString(b, m.Text)
	}
	return append(b, '}', '\n')
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// LineParser parses single lines of the interchange format, as the probe
// sends them. The zero value is ready; it is not safe for concurrent use.
type LineParser struct{ p fastjson.Parser }

// Record is one parsed data line. Type is "sample", "proc", "torch" or
// "mark"; the field of that type is set. Run and gpu lines are refused.
type Record struct {
	Type   string
	Device DeviceSample
	Proc   ProcSample
	Torch  TorchSample
	Mark   Mark
}

// Parse parses one line. Errors say what is wrong with it; validity that
// depends on the run (declared GPUs) is checked when the record is stored.
func (lp *LineParser) Parse(line []byte) (Record, error) {
	r, err := parseLine(&lp.p, line)
	if err != nil {
		return Record{}, err
	}
	if r.typ == recRun || r.typ == recGPU {
		return Record{}, fmt.Errorf("a %s line is not a data line", typeNames[r.typ])
	}
	return Record{Type: typeNames[r.typ], Device: r.dev, Proc: r.proc, Torch: r.torch, Mark: r.mark}, nil
}

// AppendMarkLine appends m as one JSON line of the interchange format.
func AppendMarkLine(b []byte, m Mark) []byte { return appendMark(b, m) }

// AppendTorchLine appends s as one JSON line of the interchange format.
func AppendTorchLine(b []byte, s TorchSample) []byte { return appendTorch(b, s) }
