package storage

import (
	"bufio"
	"encoding/json"
	"io"
	"sort"

	"github.com/memrec/memrec/internal/merge"
	"github.com/memrec/memrec/storage/wire"
)

// This file is the export of a run: its run and gpu lines, then every
// series merged by time into lines of package wire's format.

// exportRun is the run line memrec writes (docs/format.md).
type exportRun struct {
	Type       string            `json:"type"`
	Name       string            `json:"name"`
	Host       string            `json:"host,omitempty"`
	Job        string            `json:"job,omitempty"`
	Hosts      []HostInfo        `json:"hosts,omitempty"`
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
// sample, process sample, allocator sample (with the budget of the same
// sample, if any), mark and site snapshot merged in time order.
// It streams: memory does not grow with the run's length.
func (db *DB) Export(out io.Writer, r Run) error {
	w := bufio.NewWriterSize(out, 1<<20)
	head := exportRun{Type: "run", Name: r.Name, Host: r.Host, Job: r.Job, Hosts: r.Hosts, StartNS: r.StartNS, EndNS: r.EndNS,
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
	its := make([]merge.Iterator[line], 0, len(series)+1)
	budgets := map[[2]int]bool{}
	for _, s := range series {
		if s.Kind == SeriesBudget {
			budgets[[2]int{s.GPU, s.PID}] = true
		}
	}
	for _, s := range series {
		switch s.Kind {
		case SeriesDevice:
			its = append(its, lines(db.DeviceSamples(r, s.GPU, MinTime, MaxTime), &deviceSchema, wire.AppendDevice))
		case SeriesProc:
			its = append(its, lines(db.ProcSamples(r, s.GPU, s.PID, MinTime, MaxTime), &procSchema, wire.AppendProc))
		case SeriesTorch:
			its = append(its, newTorchLines(db, r, s.GPU, s.PID, budgets[[2]int{s.GPU, s.PID}]))
		case SeriesSites:
			its = append(its, &siteLines{it: db.SiteSamples(r, s.GPU, s.PID, MinTime, MaxTime)})
		}
	}
	its = append(its, lines(db.Marks(r, MinTime, MaxTime), &markSchema, wire.AppendMark))
	m := merge.New(func(l line) int64 { return l.t }, its...)
	for m.Next() {
		if _, err := w.Write(m.At().b); err != nil {
			return err
		}
	}
	if err := m.Err(); err != nil {
		return err
	}
	return w.Flush()
}

// line is one exported line and the time it is sorted by.
type line struct {
	t int64
	b []byte
}

// lineIter formats the values of one series as lines, reusing one buffer
// (merge.ByTime reads a line before it advances the series).
type lineIter[T any] struct {
	it     *Iter[T]
	time   func(T) int64
	format func([]byte, T) []byte
	cur    line
}

func lines[T any](it *Iter[T], sc *rowSchema[T], format func([]byte, T) []byte) *lineIter[T] {
	return &lineIter[T]{it: it, time: sc.time, format: format}
}

func (l *lineIter[T]) Next() bool {
	if !l.it.Next() {
		return false
	}
	v := l.it.At()
	l.cur = line{l.time(v), l.format(l.cur.b[:0], v)}
	return true
}

func (l *lineIter[T]) At() line   { return l.cur }
func (l *lineIter[T]) Err() error { return l.it.Err() }

// siteLines formats the rows of a site series as one line per snapshot (a
// snapshot starts at its wire.SiteUntracked row).
type siteLines struct {
	it   *Iter[SiteSample]
	rows []SiteSample
	next *SiteSample // the first row of the next snapshot, read ahead
	done bool
	cur  line
}

func (l *siteLines) Next() bool {
	l.rows = l.rows[:0]
	if l.next != nil {
		l.rows = append(l.rows, *l.next)
		l.next = nil
	}
	for !l.done {
		if !l.it.Next() {
			l.done = true
			break
		}
		v := l.it.At()
		if len(l.rows) > 0 && (v.File == wire.SiteUntracked || v.T != l.rows[0].T) {
			l.next = &v
			break
		}
		l.rows = append(l.rows, v)
	}
	if len(l.rows) == 0 {
		return false
	}
	l.cur = line{l.rows[0].T, wire.AppendSites(l.cur.b[:0], l.rows)}
	return true
}

func (l *siteLines) At() line   { return l.cur }
func (l *siteLines) Err() error { return l.it.Err() }
