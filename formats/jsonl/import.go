package jsonl

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"sync"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// This file is the import pipeline: JSON Lines files (package wire's
// format, docs/format.md) into the database, parsed in parallel, applied in
// order, in one transaction. A "run" line starts a run. It writes through
// storage's public Loader (DB.Load), which checks every row against the
// store's limits.

// Source is one named input of an import ("-" for standard input).
type Source struct {
	Name string
	R    io.Reader
	// Converted says memrec made the input from another format (a PyTorch
	// snapshot, nvidia-smi logs): its line numbers mean nothing to the
	// user, so errors name the source alone.
	Converted bool
}

// ImportOptions configure Import.
type ImportOptions struct {
	// Name renames the imported run; the input must then hold exactly one.
	Name string
	// Replace deletes a stored run of the same name instead of refusing.
	Replace bool
	// Workers parse lines in parallel; zero means GOMAXPROCS.
	Workers int
	// AllowTruncated imports an input that ends early (a gzip file whose
	// writer died: ErrTruncated) up to its last whole line, and marks its
	// last run incomplete, instead of refusing it.
	AllowTruncated bool
	// Context stops the import once done (the user's Ctrl-C): at its next
	// batch of lines, or before the commit, Import returns its error and
	// commits nothing. nil: never stopped.
	Context context.Context
}

// stopped is the import's Context's error, once it is done.
func (o ImportOptions) stopped() error {
	if o.Context == nil {
		return nil
	}
	return o.Context.Err()
}

// MaxLineBytes is the longest input line Import accepts; a longer one is
// an error naming its file and line, found after reading at most twice
// this much of it.
const MaxLineBytes = 4 << 20

// Errors of Import a caller can test with errors.Is.
var (
	// ErrTruncated is an input that ends in the middle (a gzip stream cut
	// short: io.ErrUnexpectedEOF).
	ErrTruncated = errors.New("the input ends early (a truncated gzip file?)")
	ErrLineLong  = fmt.Errorf("line longer than %d bytes", MaxLineBytes)
)

// Import reads JSON Lines from every source into the database in one
// transaction: it either imports every run or, on any error, leaves the
// file exactly as it was. Errors name the source and line. Unknown fields
// are ignored. It blocks until done and returns the imported runs.
func Import(db *storage.DB, srcs []Source, opts ImportOptions) ([]storage.Run, error) {
	return db.Load(func(l *storage.Loader) error {
		imp := &importer{l: l, opts: opts, names: map[string]bool{}}
		for _, src := range srcs {
			imp.src, imp.converted, imp.truncated = src.Name, src.Converted, false
			if err := imp.read(src.R); err != nil {
				return err
			}
		}
		if err := imp.finish(); err != nil {
			return err
		}
		if err := opts.stopped(); err != nil {
			return fmt.Errorf("import stopped: %w", err)
		}
		if len(l.Finished()) == 0 {
			return errors.New("no run in the input (a file starts with a \"run\" line)")
		}
		return nil
	})
}

// rec is one parsed line and its number.
type rec struct {
	wire.Record
	line int
}

type importer struct {
	l    *storage.Loader
	opts ImportOptions
	src  string
	// converted: the source is not the user's text (Source.Converted).
	converted bool
	open      bool // a run is started
	names     map[string]bool
	// truncated: the current source ended early (AllowTruncated).
	truncated bool
}

func (imp *importer) errf(line int, format string, args ...any) error {
	return fmt.Errorf("%s: "+format, append([]any{imp.pos(line)}, args...)...)
}

// pos is where line is, in messages: "file:line", or the source alone
// when it was converted.
func (imp *importer) pos(line int) string {
	if imp.converted {
		return imp.src
	}
	return imp.src + ":" + strconv.Itoa(line)
}

// finish writes the current run's remaining chunks into the transaction.
func (imp *importer) finish() error {
	if !imp.open {
		return nil
	}
	imp.open = false
	name := imp.l.Run().Name
	if err := imp.l.Finish(); err != nil {
		return fmt.Errorf("%s: write run %q: %w", imp.src, name, err)
	}
	return nil
}

// runLine is the "run" line: the fields docs/format.md lists, all optional
// but the name.
type runLine struct {
	Name       string             `json:"name"`
	Host       string             `json:"host"`
	Job        string             `json:"job"`
	Hosts      []storage.HostInfo `json:"hosts"`
	StartNS    *int64             `json:"start_ns"`
	EndNS      int64              `json:"end_ns"`
	IntervalNS int64              `json:"interval_ns"`
	Tags       map[string]any     `json:"tags"`
	Complete   *bool              `json:"complete"`
	Recorder   json.RawMessage    `json:"recorder"`
}

func (imp *importer) startRun(r rec) error {
	if err := imp.finish(); err != nil {
		return err
	}
	var l runLine
	if err := json.Unmarshal(r.Raw, &l); err != nil {
		return imp.errf(r.line, "run: %v", err)
	}
	if imp.opts.Name != "" {
		if len(imp.l.Finished()) > 0 {
			return imp.errf(r.line, "%w", storage.ErrRenameMany)
		}
		l.Name = imp.opts.Name
	}
	if l.Name == "" {
		return imp.errf(r.line, "%w", storage.ErrNoName)
	}
	if imp.names[l.Name] {
		return imp.errf(r.line, "run %q appears twice in the input", l.Name)
	}
	imp.names[l.Name] = true
	run := storage.Run{Name: l.Name, Host: l.Host, Job: l.Job, Hosts: l.Hosts, EndNS: l.EndNS, IntervalNS: l.IntervalNS, Complete: true}
	if l.StartNS != nil {
		run.StartNS = *l.StartNS
	} else {
		run.StartNS = storage.MinTime // set from the first sample
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
				what := "null"
				switch v.(type) {
				case []any:
					what = "a list"
				case map[string]any:
					what = "an object"
				}
				return imp.errf(r.line, "run tag %q: want a string or number, got %s", k, what)
			}
		}
	}
	if _, err := imp.l.Start(run, imp.opts.Replace); err != nil {
		return imp.errf(r.line, "%w", err)
	}
	imp.open = true
	return nil
}

func (imp *importer) apply(r rec) error {
	if r.Type == wire.TypeRun {
		return imp.startRun(r)
	}
	l := imp.l
	if !imp.open {
		return imp.errf(r.line, "data before the first \"run\" line")
	}
	var err error
	switch r.Type {
	case wire.TypeGPU:
		var g storage.GPU
		if err := json.Unmarshal(r.Raw, &g); err != nil {
			return imp.errf(r.line, "gpu: %v", err)
		}
		if err := l.AddGPU(g); err != nil {
			return imp.errf(r.line, "%w", err)
		}
		return nil
	case wire.TypeSample:
		err = l.AppendDevice(r.Device)
	case wire.TypeProc:
		err = l.AppendProc(r.Proc)
	case wire.TypeTorch:
		err = l.AppendTorch(r.Torch)
		if err == nil && r.Budget != nil {
			err = l.AppendBudget(*r.Budget)
		}
	case wire.TypeMark:
		err = l.AppendMark(r.Mark)
	case wire.TypeSites:
		err = l.AppendSites(r.Sites)
	}
	if err != nil {
		return imp.errf(r.line, "%s: %w", r.Type, err)
	}
	return nil
}

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

	go imp.split(r, jobs, order, stop, readErr)
	for i := 0; i < workers; i++ {
		go func() {
			var p wire.Parser
			for b := range jobs {
				var buf []rec
				if v, ok := recPool.Get().(*[]rec); ok {
					buf = *v
				}
				b.recs, b.err = parseBatch(&p, buf, b.data, b.line, imp.pos)
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
		if err == nil {
			if err = imp.opts.stopped(); err != nil {
				err = fmt.Errorf("%s: import stopped: %w", imp.pos(b.line), err)
			}
		}
		for i := 0; i < len(b.recs) && err == nil; i++ {
			err = imp.apply(b.recs[i])
		}
		recs := b.recs[:0] // applied: nothing refers to the slice any more
		recPool.Put(&recs)
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
		if errors.Is(err, ErrLineLong) && imp.converted {
			return fmt.Errorf("%s: %w", imp.src, ErrLineLong)
		}
		if errors.Is(err, ErrLineLong) {
			return fmt.Errorf("%s:%w", imp.src, err) // err starts with the line number
		}
		return fmt.Errorf("%s: %w", imp.src, err)
	}
	if imp.truncated && imp.open {
		imp.l.SetComplete(false)
	}
	return nil
}

// split cuts the input into batches of whole lines and sends each to the
// parsers (jobs) and, in input order, to the applier (order); it ends with
// the input's error (nil at its end) on readErr, or when stop closes.
func (imp *importer) split(r io.Reader, jobs, order chan<- *batch, stop <-chan struct{}, readErr chan<- error) {
	defer close(jobs)
	defer close(order)
	br := bufio.NewReaderSize(r, 1<<20)
	line := 1
	var carry []byte
	for {
		// A long line doubles the buffer rather than being copied
		// again for every batch's worth of it.
		buf := make([]byte, len(carry), len(carry)+max(batchBytes, len(carry)))
		copy(buf, carry)
		n, err := fill(br, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		end := len(buf)
		if errors.Is(err, io.ErrUnexpectedEOF) {
			if !imp.opts.AllowTruncated {
				readErr <- fmt.Errorf("after line %d: %w", line-1+bytes.Count(buf, []byte{'\n'}), ErrTruncated)
				return
			}
			// Keep the whole lines; the cut one is dropped.
			end = bytes.LastIndexByte(buf, '\n') + 1
			imp.truncated = true
			err = io.EOF
		}
		if err == nil { // more to come: cut after the last newline
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				end = i + 1
			} else if len(buf) > MaxLineBytes {
				readErr <- fmt.Errorf("%d: %w", line, ErrLineLong)
				return
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
		if err == io.EOF {
			readErr <- nil
			return
		}
		if err != nil {
			readErr <- err
			return
		}
	}
}

// fill reads until p is full or the input ends: unlike io.ReadFull it
// returns io.EOF at the end however much it read, so that a reader's own
// io.ErrUnexpectedEOF (a cut gzip stream) is not taken for the end.
func fill(r io.Reader, p []byte) (int, error) {
	n := 0
	for n < len(p) {
		m, err := r.Read(p[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// recPool holds the record slices of batches already applied, for reuse: a
// record is a few hundred bytes, and a new slice per batch, cleared by the
// allocator, is a large share of an import's CPU (BenchmarkImport;
// bench/README.md, "Figures moved from comments").
var recPool sync.Pool

// parseBatch parses the lines of one batch into buf's space. Blank lines
// cost nothing: the records are allocated ahead by the count of lines that
// are not blank: growing the slice instead clears and copies it at every
// doubling (BenchmarkImport).
func parseBatch(p *wire.Parser, buf []rec, data []byte, line int, pos func(line int) string) ([]rec, error) {
	recs := buf[:0]
	if n := countLines(data); cap(recs) < n {
		recs = make([]rec, 0, n)
	}
	for len(data) > 0 {
		for len(data) > 0 && data[0] == '\n' { // runs of blank lines, fast
			data = data[1:]
			line++
		}
		if len(data) == 0 {
			break
		}
		i := bytes.IndexByte(data, '\n')
		var l []byte
		if i < 0 {
			l, data = data, nil
		} else {
			l, data = data[:i], data[i+1:]
		}
		if len(l) > MaxLineBytes {
			return recs, fmt.Errorf("%s: %w", pos(line), ErrLineLong)
		}
		if len(bytes.TrimSpace(l)) > 0 {
			r, err := p.Parse(l)
			if err != nil {
				return recs, fmt.Errorf("%s: %w", pos(line), err)
			}
			recs = append(recs, rec{r, line})
		}
		line++
	}
	return recs, nil
}

// countLines counts the lines of data that are not empty.
func countLines(data []byte) int {
	n := 0
	for len(data) > 0 {
		for len(data) > 0 && data[0] == '\n' {
			data = data[1:]
		}
		if len(data) == 0 {
			break
		}
		n++
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break
		}
		data = data[i+1:]
	}
	return n
}
