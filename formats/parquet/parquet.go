// Package parquet writes memrec runs as Apache Parquet files, for the
// engines a fleet's data goes to (DuckDB, Spark, Trino, BigQuery, Polars,
// pandas through pyarrow).
//
// One table per kind of record, each a folder of Hive-style partitions by
// host and run, so the exports of many nodes and runs copied into one folder
// are one dataset:
//
//	DIR/device/host=H/run=R/part-0.parquet     NVML, one row per GPU per tick
//	DIR/process/host=H/run=R/part-0.parquet    NVML, one row per process per list
//	DIR/allocator/host=H/run=R/part-0.parquet  the probe, one row per sample
//	DIR/marks/host=H/run=R/part-0.parquet      epoch, step, event, OOM, exit marks
//	DIR/sites/host=H/run=R/part-0.parquet      allocation sites, one row per site per snapshot
//	DIR/budget/host=H/run=R/part-0.parquet     a watched model's budget
//	DIR/runs/host=H/run=R/part-0.parquet       the run itself, one row
//	DIR/gpus/host=H/run=R/part-0.parquet       its GPUs, one row each
//
// A table is written only when the run has rows of it (runs and gpus
// always). H and R are the host and run names escaped as Hive and Spark
// escape a partition value (PartitionValue), so distinct names are distinct
// folders; an export that would write two runs into one folder refuses the
// second (Dataset). Every row also holds the exact names as strings
// (host_name, run_name): an engine that infers a partition's type reads
// run=20261207 as a number, a column is a string everywhere.
//
// Every column is typed, its unit in its name (_bytes, _ns), with the
// field tables' names (storage/wire); times both as Unix ns (t_ns, INT64)
// and as a UTC timestamp (time, TIMESTAMP(MICROS, adjusted to UTC)); no
// unsigned types. Device and allocator rows carry the epoch and step of
// the latest marks at their time (progress.go), -1 before the first. An
// absent optional value (a mark's epoch, a sample's rank) is null.
//
// A file appears whole or not at all (safefile), and a run's partition is
// replaced whole: a second export of the same run leaves no file of the
// first. Files are zstd-compressed, in row groups of RowGroupRows rows.
package parquet

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	pq "github.com/parquet-go/parquet-go"

	"github.com/memrec/memrec/internal/safefile"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// RowGroupRows is the number of rows of a row group (and of each write):
// large enough for the columns to compress, small enough that a writer
// holds a few MB per table.
const RowGroupRows = 1 << 16

// Tables are the table names, in the order Export writes them.
var Tables = []string{"runs", "gpus", "device", "process", "allocator", "marks", "sites", "budget"}

// Device is a row of the device table.
type Device struct {
	TNS                 int64  `parquet:"t_ns,delta"`
	Time                int64  `parquet:"time,timestamp(microsecond:utc),delta"`
	GPU                 int32  `parquet:"gpu"`
	UUID                string `parquet:"uuid,dict"`
	UsedBytes           int64  `parquet:"used_bytes,delta"`
	DriverReservedBytes *int64 `parquet:"driver_reserved_bytes,optional"` // null: not reported
	Epoch               int32  `parquet:"epoch"`                          // the latest epoch_start mark's (progress.go)
	Step                int64  `parquet:"step,delta"`
	HostName            string `parquet:"host_name,dict"`
	RunName             string `parquet:"run_name,dict"`
}

// Process is a row of the process table.
type Process struct {
	TNS       int64  `parquet:"t_ns,delta"`
	Time      int64  `parquet:"time,timestamp(microsecond:utc),delta"`
	GPU       int32  `parquet:"gpu"`
	PID       int32  `parquet:"pid"`
	UsedBytes int64  `parquet:"used_bytes,delta"`
	HostName  string `parquet:"host_name,dict"`
	RunName   string `parquet:"run_name,dict"`
}

// Allocator is a row of the allocator table (PyTorch's caching allocator,
// or JAX's through memrec.jax). Its figures, from allocated_bytes to the
// last counter, are wire.TorchFields' rows in the table's order, named as
// ColumnName names them; Export fills them through the table
// (allocatorFigures), and TestAllocatorFollowsWireTable holds the two
// together. A field of the struct rather than a schema built at run time:
// parquet-go writes a struct's columns directly, many times faster.
type Allocator struct {
	TNS                    int64  `parquet:"t_ns,delta"`
	Time                   int64  `parquet:"time,timestamp(microsecond:utc),delta"`
	GPU                    int32  `parquet:"gpu"`
	PID                    int32  `parquet:"pid"`
	Rank                   *int32 `parquet:"rank,optional"`
	AllocatedBytes         int64  `parquet:"allocated_bytes,delta"`
	ReservedBytes          int64  `parquet:"reserved_bytes,delta"`
	ActiveBytes            int64  `parquet:"active_bytes,delta"`
	InactiveSplitBytes     int64  `parquet:"inactive_split_bytes,delta"`
	StepPeakAllocatedBytes int64  `parquet:"step_peak_allocated_bytes,delta"`
	Segments               int64  `parquet:"segments,delta"`
	AllocRetries           int64  `parquet:"alloc_retries,delta"`
	OOMs                   int64  `parquet:"ooms,delta"`
	// LargestSegmentBytes is the largest segment the allocator was seen to
	// hold so far; 0: not measured.
	LargestSegmentBytes int64  `parquet:"largest_segment_bytes,delta"`
	DeviceAllocs        int64  `parquet:"device_allocs,delta"`
	DeviceFrees         int64  `parquet:"device_frees,delta"`
	Epoch               int32  `parquet:"epoch"` // the latest epoch_start mark's (progress.go)
	Step                int64  `parquet:"step,delta"`
	HostName            string `parquet:"host_name,dict"`
	RunName             string `parquet:"run_name,dict"`
}

// Mark is a row of the marks table.
type Mark struct {
	TNS      int64  `parquet:"t_ns,delta"`
	Time     int64  `parquet:"time,timestamp(microsecond:utc),delta"`
	Kind     string `parquet:"kind,dict"`
	Epoch    *int32 `parquet:"epoch,optional"`
	Step     *int64 `parquet:"step,optional"`
	Rank     *int32 `parquet:"rank,optional"`
	GPU      *int32 `parquet:"gpu,optional"`
	PID      *int32 `parquet:"pid,optional"`
	Code     *int32 `parquet:"code,optional"` // exit status of an exit mark
	Text     string `parquet:"text"`
	HostName string `parquet:"host_name,dict"`
	RunName  string `parquet:"run_name,dict"`
}

// Site is a row of the sites table: one site of one snapshot.
type Site struct {
	TNS        int64   `parquet:"t_ns,delta"`
	Time       int64   `parquet:"time,timestamp(microsecond:utc),delta"`
	GPU        int32   `parquet:"gpu"`
	PID        int32   `parquet:"pid"`
	Rank       *int32  `parquet:"rank,optional"`
	Reason     string  `parquet:"reason,dict"`
	Epoch      *int32  `parquet:"epoch,optional"`
	Name       string  `parquet:"name,dict"`
	File       string  `parquet:"file,dict"`
	Line       int32   `parquet:"line"`
	Func       string  `parquet:"func,dict"`
	LiveBytes  int64   `parquet:"live_bytes"`
	LiveBlocks int64   `parquet:"live_blocks"`
	AllocBytes int64   `parquet:"alloc_bytes"`
	Allocs     int64   `parquet:"allocs"`
	FreedBytes int64   `parquet:"freed_bytes"`
	Frees      int64   `parquet:"frees"`
	SinceNS    int64   `parquet:"since_ns"`
	Sampled    float64 `parquet:"sampled_every"`
	HostName   string  `parquet:"host_name,dict"`
	RunName    string  `parquet:"run_name,dict"`
}

// Budget is a row of the budget table.
type Budget struct {
	TNS                 int64  `parquet:"t_ns,delta"`
	Time                int64  `parquet:"time,timestamp(microsecond:utc),delta"`
	GPU                 int32  `parquet:"gpu"`
	PID                 int32  `parquet:"pid"`
	Rank                *int32 `parquet:"rank,optional"`
	ParamsBytes         int64  `parquet:"params_bytes"`
	GradsBytes          int64  `parquet:"grads_bytes"`
	OptimizerStateBytes int64  `parquet:"optimizer_bytes"`
	BuffersBytes        int64  `parquet:"buffers_bytes"`
	ParamCount          int64  `parquet:"params"`            // elements
	Trainable           int64  `parquet:"trainable"`         // elements
	Autocast            *bool  `parquet:"autocast,optional"` // null: not seen yet
	Optimizer           string `parquet:"optimizer,dict"`
	OptimizerKeys       string `parquet:"optimizer_state,dict"` // its state's tensor names
	DType               string `parquet:"dtype,dict"`
	HostName            string `parquet:"host_name,dict"`
	RunName             string `parquet:"run_name,dict"`
}

// RunRow is the row of the runs table.
type RunRow struct {
	Run         string `parquet:"run_name"`
	Host        string `parquet:"host_name"`
	ID          int64  `parquet:"run_id"`
	Job         string `parquet:"job"`
	StartNS     int64  `parquet:"start_ns"`
	Start       int64  `parquet:"start_time,timestamp(microsecond:utc)"`
	EndNS       int64  `parquet:"end_ns"`
	IntervalNS  int64  `parquet:"interval_ns"`
	Complete    bool   `parquet:"complete"`
	Tags        string `parquet:"tags_json"` // {"batch_size":"64",…}
	Source      string `parquet:"source"`
	Driver      string `parquet:"driver"`
	Ticks       int64  `parquet:"ticks"`
	MissedTicks int64  `parquet:"missed_ticks"`
}

// GPURow is a row of the gpus table.
type GPURow struct {
	GPU        int32  `parquet:"gpu"`
	UUID       string `parquet:"uuid"`
	Name       string `parquet:"name"`
	TotalBytes int64  `parquet:"total_bytes"`
	PCIBusID   string `parquet:"pci_bus_id"`
	Device     string `parquet:"device"`
	Host       string `parquet:"node"` // a merged run's node
	HostGPU    int32  `parquet:"node_gpu"`
	HostName   string `parquet:"host_name,dict"`
	RunName    string `parquet:"run_name,dict"`
}

// Stats count what Export wrote.
type Stats struct {
	Rows  map[string]int64 // by table
	Files []string
	Bytes int64
}

// Export writes run r of db into dir (made if missing), one partition per
// table; NewDataset(dir).Export, for one run.
func Export(ctx context.Context, db *storage.DB, r storage.Run, dir string) (Stats, error) {
	return NewDataset(dir).Export(ctx, db, r)
}

// Export writes run r of db into the Dataset's folder (made if missing),
// one partition per table. It refuses a run whose partition this Dataset
// wrote already (ErrPartitionTaken). It checks ctx between row groups:
// once ctx is done it stops, and what it wrote of this run is removed.
// Safe to call while other readers read db.
func (d *Dataset) Export(ctx context.Context, db *storage.DB, r storage.Run) (Stats, error) {
	if errFigures != nil {
		return Stats{}, errFigures
	}
	st := Stats{Rows: map[string]int64{}}
	part, err := Partition(r)
	if err != nil {
		return Stats{}, err
	}
	if err := d.claim(r, part); err != nil {
		return Stats{}, err
	}
	e := &exporter{ctx: ctx, db: db, r: r, dir: d.dir, part: part, st: &st}
	err = e.all()
	for _, f := range e.pending {
		if err != nil {
			f.Abort()
			continue
		}
		if cerr := f.Commit(); cerr != nil && err == nil {
			err = cerr
		}
	}
	if err != nil {
		return Stats{}, err
	}
	// The partition holds this export's files only: an older export of the
	// same run may have had a table this one has not (a run re-imported).
	for _, t := range Tables {
		if _, ok := st.Rows[t]; !ok {
			os.Remove(filepath.Join(d.dir, t, part, "part-0.parquet"))
		}
	}
	d.done(r, part)
	return st, nil
}

func hostOf(r storage.Run) string {
	if r.Host == "" {
		return "localhost"
	}
	return r.Host
}

type exporter struct {
	ctx     context.Context
	db      *storage.DB
	r       storage.Run
	dir     string
	part    string
	st      *Stats
	pending []*safefile.File // committed together at the end
}

func (e *exporter) all() error {
	host := hostOf(e.r)
	uuid, err := e.writeRunAndGPUs(host)
	if err != nil {
		return err
	}
	series, err := e.db.Series(e.r)
	if err != nil {
		return err
	}
	marks, err := readProgress(e.db, e.r)
	if err != nil {
		return err
	}
	gpuRank, err := e.gpuRanks(series)
	if err != nil {
		return err
	}
	t := &sampleTables{e: e, host: host, uuid: uuid, marks: marks, gpuRank: gpuRank,
		dev:    &table[Device]{e: e, name: "device"},
		proc:   &table[Process]{e: e, name: "process"},
		alloc:  &table[Allocator]{e: e, name: "allocator"},
		sites:  &table[Site]{e: e, name: "sites"},
		budget: &table[Budget]{e: e, name: "budget"},
	}
	for _, s := range series {
		if err := t.write(s); err != nil {
			return err
		}
	}
	marksTable := &table[Mark]{e: e, name: "marks"}
	if err := e.writeMarks(marksTable, host); err != nil {
		return err
	}
	for _, t := range []interface{ close() error }{t.dev, t.proc, t.alloc, t.sites, t.budget, marksTable} {
		if err := t.close(); err != nil {
			return err
		}
	}
	return nil
}

// writeRunAndGPUs writes the runs and gpus tables, one file each, and
// returns the GPUs' UUIDs by index.
func (e *exporter) writeRunAndGPUs(host string) (map[int]string, error) {
	r := e.r
	tags, _ := json.Marshal(r.Tags)
	if r.Tags == nil {
		tags = []byte("{}")
	}
	if err := writeTable(e, "runs", []RunRow{{Run: r.Name, Host: host, ID: int64(r.ID), Job: r.Job, StartNS: r.StartNS, Start: micros(r.StartNS),
		EndNS: r.EndNS, IntervalNS: r.IntervalNS, Complete: r.Complete, Tags: string(tags), Source: r.Recorder.Source,
		Driver: r.Recorder.Driver, Ticks: r.Recorder.Ticks, MissedTicks: r.Recorder.MissedTicks}}); err != nil {
		return nil, err
	}
	gpus := make([]GPURow, 0, len(r.GPUs))
	uuid := map[int]string{}
	for _, g := range r.GPUs {
		gpus = append(gpus, GPURow{GPU: int32(g.Index), UUID: g.UUID, Name: g.Name, TotalBytes: g.TotalBytes, PCIBusID: g.PCIBusID,
			Device: g.Device, Host: g.Host, HostGPU: int32(g.HostGPU), HostName: host, RunName: r.Name})
		uuid[g.Index] = g.UUID
	}
	if err := writeTable(e, "gpus", gpus); err != nil {
		return nil, err
	}
	return uuid, nil
}

// sampleTables are the tables a run's series are written to, with what
// their rows take from the run: its host, GPU UUIDs, and epoch and step
// marks by rank.
type sampleTables struct {
	e       *exporter
	host    string
	uuid    map[int]string
	marks   *marksProgress
	gpuRank map[int]int
	dev     *table[Device]
	proc    *table[Process]
	alloc   *table[Allocator]
	sites   *table[Site]
	budget  *table[Budget]
}

// write appends the samples of series s to its kind's table.
func (t *sampleTables) write(s storage.SeriesRef) error {
	switch s.Kind {
	case storage.SeriesDevice:
		return t.device(s)
	case storage.SeriesProc:
		return t.process(s)
	case storage.SeriesTorch:
		return t.allocator(s)
	case storage.SeriesSites:
		return t.site(s)
	case storage.SeriesBudget:
		return t.budgets(s)
	}
	return nil
}

func (t *sampleTables) device(s storage.SeriesRef) error {
	e, r, host := t.e, t.e.r, t.host
	rank, ok := t.gpuRank[s.GPU]
	if !ok {
		rank = storage.None
	}
	epoch, step := t.marks.cursors(rank)
	return each(t.dev, e.db.DeviceSamples(r, s.GPU, storage.MinTime, storage.MaxTime), func(d storage.DeviceSample) Device {
		row := Device{TNS: d.T, Time: micros(d.T), GPU: int32(d.GPU), UUID: t.uuid[d.GPU], UsedBytes: d.Used,
			Epoch: int32(epoch.at(d.T)), Step: step.at(d.T), HostName: host, RunName: r.Name}
		if d.Reserved != 0 {
			row.DriverReservedBytes = &d.Reserved
		}
		return row
	})
}

func (t *sampleTables) process(s storage.SeriesRef) error {
	e, r, host := t.e, t.e.r, t.host
	return each(t.proc, e.db.ProcSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime), func(p storage.ProcSample) Process {
		return Process{TNS: p.T, Time: micros(p.T), GPU: int32(p.GPU), PID: int32(p.PID), UsedBytes: p.Used, HostName: host, RunName: r.Name}
	})
}

func (t *sampleTables) allocator(s storage.SeriesRef) error {
	e, r, host := t.e, t.e.r, t.host
	var epoch, step cursor
	first := true
	return each(t.alloc, e.db.TorchSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime), func(ts storage.TorchSample) Allocator {
		if first { // a series is one process: one rank
			epoch, step = t.marks.cursors(ts.Rank)
			first = false
		}
		row := Allocator{TNS: ts.T, Time: micros(ts.T), Epoch: int32(epoch.at(ts.T)), Step: step.at(ts.T), HostName: host, RunName: r.Name,
			GPU: int32(ts.GPU), PID: int32(ts.PID), Rank: opt32(ts.Rank)}
		v := reflect.ValueOf(&row).Elem()
		for _, f := range allocatorFigures {
			v.Field(f.index).SetInt(f.get(ts))
		}
		return row
	})
}

func (t *sampleTables) site(s storage.SeriesRef) error {
	e, r, host := t.e, t.e.r, t.host
	return each(t.sites, e.db.SiteSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime), func(x storage.SiteSample) Site {
		return Site{TNS: x.T, Time: micros(x.T), HostName: host, RunName: r.Name, GPU: int32(x.GPU), PID: int32(x.PID), Rank: opt32(x.Rank), Reason: string(x.Reason),
			Epoch: opt32(x.Epoch), Name: x.Name, File: x.File, Line: int32(x.Line), Func: x.Func, LiveBytes: x.LiveBytes,
			LiveBlocks: x.LiveBlocks, AllocBytes: x.AllocBytes, Allocs: x.Allocs, FreedBytes: x.FreedBytes, Frees: x.Frees,
			SinceNS: x.SinceNS, Sampled: x.SampledEvery}
	})
}

func (t *sampleTables) budgets(s storage.SeriesRef) error {
	e, r, host := t.e, t.e.r, t.host
	return each(t.budget, e.db.BudgetSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime), func(b storage.BudgetSample) Budget {
		row := Budget{TNS: b.T, Time: micros(b.T), HostName: host, RunName: r.Name, GPU: int32(b.GPU), PID: int32(b.PID), Rank: opt32(b.Rank), ParamsBytes: b.Params,
			GradsBytes: b.Grads, OptimizerStateBytes: b.OptimizerState, BuffersBytes: b.Buffers, ParamCount: b.ParamCount,
			Trainable: b.Trainable, Optimizer: b.Optimizer, OptimizerKeys: b.OptimizerKeys, DType: b.DType}
		if b.Autocast != storage.AutocastUnknown {
			on := b.Autocast == storage.AutocastOn
			row.Autocast = &on
		}
		return row
	})
}

// writeMarks appends the run's marks to mt.
func (e *exporter) writeMarks(mt *table[Mark], host string) error {
	r := e.r
	return each(mt, e.db.Marks(r, storage.MinTime, storage.MaxTime), func(m storage.Mark) Mark {
		row := Mark{TNS: m.T, Time: micros(m.T), HostName: host, RunName: r.Name, Kind: string(m.Kind), Epoch: opt32(m.Epoch), Rank: opt32(m.Rank), GPU: opt32(m.GPU),
			PID: opt32(m.PID), Code: opt32(m.Code), Text: m.Text}
		if m.Step != storage.None {
			s := int64(m.Step)
			row.Step = &s
		}
		return row
	})
}

// allocatorFigure is one figure column of the allocator table: its field
// of Allocator and how to read it from a sample.
type allocatorFigure struct {
	index int // of the field in Allocator
	get   func(storage.TorchSample) int64
}

// allocatorFigures are wire.TorchFields' figures (the rows that are no key
// and not optional: pid and rank are columns of their own) as Allocator's
// fields, in the table's order; errFigures names a figure Allocator has no
// field for, which Export returns (TestAllocatorFollowsWireTable fails
// first).
var allocatorFigures, errFigures = figuresOf(reflect.TypeFor[Allocator](), wire.TorchFields)

// figuresOf finds each figure of fs among typ's fields by its column name.
func figuresOf(typ reflect.Type, fs []wire.Field[storage.TorchSample]) ([]allocatorFigure, error) {
	byName := map[string]int{}
	for i := range typ.NumField() {
		name, _, _ := strings.Cut(typ.Field(i).Tag.Get("parquet"), ",")
		byName[name] = i
	}
	var out []allocatorFigure
	for _, f := range fs {
		if f.Key || f.Optional {
			continue
		}
		i, ok := byName[f.ColumnName()]
		if !ok {
			return nil, fmt.Errorf("parquet: %s has no field for %s of storage/wire", typ.Name(), f.ColumnName())
		}
		out = append(out, allocatorFigure{index: i, get: f.Get})
	}
	return out, nil
}

// gpuRanks maps each GPU whose allocator series all carry one rank to that
// rank: the rank whose marks its device rows take.
func (e *exporter) gpuRanks(series []storage.SeriesRef) (map[int]int, error) {
	ranks := map[int]map[int]bool{}
	for _, s := range series {
		if s.Kind != storage.SeriesTorch {
			continue
		}
		it := e.db.TorchSamples(e.r, s.GPU, s.PID, storage.MinTime, storage.MaxTime)
		if it.Next() {
			if ranks[s.GPU] == nil {
				ranks[s.GPU] = map[int]bool{}
			}
			ranks[s.GPU][it.At().Rank] = true
		}
		if err := it.Err(); err != nil {
			return nil, err
		}
	}
	out := map[int]int{}
	for g, rs := range ranks {
		if len(rs) == 1 {
			for rk := range rs {
				out[g] = rk
			}
		}
	}
	return out, nil
}

// micros is Unix ns as the time columns' Unix µs: TIMESTAMP(MICROS) is the
// one timestamp Spark, Hive and BigQuery all read (Spark refuses NANOS);
// t_ns keeps the nanoseconds. Floor, so a time never moves after itself.
func micros(ns int64) int64 {
	if ns < 0 && ns%1000 != 0 {
		return ns/1000 - 1
	}
	return ns / 1000
}

func opt32(v int) *int32 {
	if v == storage.None {
		return nil
	}
	x := int32(v)
	return &x
}

// table is one table's file of the run, opened at its first row.
type table[T any] struct {
	e    *exporter
	name string
	f    *safefile.File
	w    *pq.GenericWriter[T]
	buf  []T
	rows int64
}

func (t *table[T]) add(row T) error {
	t.buf = append(t.buf, row)
	if len(t.buf) >= RowGroupRows {
		return t.flush()
	}
	return nil
}

func (t *table[T]) flush() error {
	if err := t.e.ctx.Err(); err != nil {
		return err
	}
	if len(t.buf) == 0 {
		return nil
	}
	if t.w == nil {
		dir := filepath.Join(t.e.dir, t.name, t.e.part)
		if err := os.MkdirAll(dir, 0o777); err != nil {
			return err
		}
		f, err := safefile.Create(filepath.Join(dir, "part-0.parquet"))
		if err != nil {
			return err
		}
		t.f = f
		t.e.pending = append(t.e.pending, f)
		t.w = pq.NewGenericWriter[T](f, pq.Compression(&pq.Zstd), pq.MaxRowsPerRowGroup(RowGroupRows),
			pq.CreatedBy("memrec", "", ""))
	}
	if _, err := t.w.Write(t.buf); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	t.rows += int64(len(t.buf))
	t.buf = t.buf[:0]
	return nil
}

func (t *table[T]) close() error {
	if err := t.flush(); err != nil {
		return err
	}
	if t.w == nil {
		return nil
	}
	if err := t.w.Close(); err != nil {
		return fmt.Errorf("%s: %w", t.name, err)
	}
	if err := t.f.Sync(); err != nil {
		return err
	}
	fi, err := t.f.Stat()
	if err != nil {
		return err
	}
	t.e.st.Rows[t.name] = t.rows
	t.e.st.Files = append(t.e.st.Files, t.f.Target())
	t.e.st.Bytes += fi.Size()
	return nil
}

// writeTable writes a table of a few rows at once.
func writeTable[T any](e *exporter, name string, rows []T) error {
	t := &table[T]{e: e, name: name}
	for _, r := range rows {
		if err := t.add(r); err != nil {
			return err
		}
	}
	if len(rows) == 0 { // an empty table still says the run had none
		return nil
	}
	return t.close()
}

// each adds every value of it to t, converted by row.
func each[S, T any](t *table[T], it *storage.Iter[S], row func(S) T) error {
	for it.Next() {
		if err := t.add(row(it.At())); err != nil {
			return err
		}
	}
	return it.Err()
}
