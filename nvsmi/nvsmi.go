// Package nvsmi reads the CSV logs nvidia-smi writes with
//
//	nvidia-smi --query-gpu=timestamp,index,uuid,memory.used,memory.total --format=csv
//	nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,used_memory --format=csv
//
// (with or without the header and the units, "noheader" and "nounits"), and
// turns them into one memrec run: device samples from the first query,
// process samples from the second. Memory in these logs is whole MiB, so the
// run knows it to 1 MiB only.
//
// Parse reads everything before anything is returned: a bad line is an
// error naming the file and line, and then nothing is imported.
package nvsmi

import (
	"bufio"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// Source is one named log.
type Source struct {
	Name string
	R    io.Reader
}

// Log is what the logs hold, in time order.
type Log struct {
	GPUs   []storage.GPU // by index
	Device []storage.DeviceSample
	Procs  []storage.ProcSample
	// Unavailable counts values nvidia-smi could not read ("[N/A]",
	// "[Not Supported]", ...): their samples are dropped.
	Unavailable int64
}

// ErrNoData is returned when the logs hold no sample at all.
var ErrNoData = errors.New("no samples in the nvidia-smi logs")

// TimeLayout is nvidia-smi's timestamp: local time of the machine that
// logged, without a zone.
const TimeLayout = "2006/01/02 15:04:05.999999999"

const mib = 1 << 20

// maxLine bounds a log's line (nvidia-smi's are under 200 bytes).
const maxLine = 1 << 20

// query is what one log holds.
type query int

const (
	queryGPU  query = iota + 1 // --query-gpu
	queryApps                  // --query-compute-apps
)

// columns are the positions of the fields a query needs (-1: absent).
type columns struct {
	q                                   query
	n                                   int // fields per line
	time, index, uuid, used, total, pid int
}

// Without a header the columns are the documented queries', in order.
var (
	plainGPU  = columns{q: queryGPU, n: 5, time: 0, index: 1, uuid: 2, used: 3, total: 4, pid: -1}
	plainApps = columns{q: queryApps, n: 4, time: 0, index: -1, uuid: 1, pid: 2, used: 3, total: -1}
)

// headerColumns reads a header line: field names, each perhaps followed by
// its unit in brackets ("memory.used [MiB]"); other fields are ignored.
func headerColumns(fields []string) (columns, error) {
	c := columns{n: len(fields), time: -1, index: -1, uuid: -1, used: -1, total: -1, pid: -1}
	for i, f := range fields {
		name, unit, _ := strings.Cut(f, " [")
		if unit != "" && unit != "MiB]" && !strings.HasPrefix(name, "timestamp") {
			return c, fmt.Errorf("column %q: memory must be in MiB", f)
		}
		switch name {
		case "timestamp":
			c.time = i
		case "index":
			c.index = i
		case "uuid", "gpu_uuid":
			c.uuid = i
		case "memory.used", "used_gpu_memory", "used_memory":
			c.used = i
		case "memory.total":
			c.total = i
		case "pid":
			c.pid = i
		}
	}
	switch {
	case c.time < 0 || c.used < 0:
		return c, errors.New("the header names no timestamp or no memory used")
	case c.pid >= 0 && c.uuid >= 0:
		c.q = queryApps
	case c.pid < 0 && (c.index >= 0 || c.uuid >= 0):
		c.q = queryGPU
	default:
		return c, errors.New("the header is neither --query-gpu (timestamp, index or uuid, memory.used) nor --query-compute-apps (timestamp, gpu_uuid, pid, used_gpu_memory)")
	}
	return c, nil
}

// isHeader tells a header from a data line: data starts with a date.
func isHeader(fields []string) bool {
	return len(fields) > 0 && strings.HasPrefix(fields[0], "timestamp")
}

// parser collects the logs.
type parser struct {
	loc        *time.Location
	log        Log
	byIndex    map[int]*storage.GPU
	byUUID     map[string]int
	uuidLine   map[int]string // where a GPU's uuid was first seen
	appsByUUID []appRow       // compute-apps rows; GPUs resolved at the end
}

type appRow struct {
	t    int64
	uuid string
	pid  int
	used int64
}

// Parse reads the logs, in loc's time (time.Local if nil), into one Log.
// Errors name the source and line.
func Parse(srcs []Source, loc *time.Location) (*Log, error) {
	if loc == nil {
		loc = time.Local
	}
	p := &parser{loc: loc, byIndex: map[int]*storage.GPU{}, byUUID: map[string]int{}, uuidLine: map[int]string{}}
	for _, s := range srcs {
		if err := p.read(s); err != nil {
			return nil, err
		}
	}
	return p.finish()
}

func (p *parser) read(src Source) error {
	sc := bufio.NewScanner(src.R)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var cols columns
	var header string
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "\ufeff"))
		if text == "" {
			continue
		}
		fields := strings.Split(text, ",")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		errf := func(format string, args ...any) error {
			return fmt.Errorf("%s:%d: "+format, append([]any{src.Name, line}, args...)...)
		}
		if isHeader(fields) {
			if header != "" {
				if text != header {
					return errf("a second, different header (the first: %q)", header)
				}
				continue // nvidia-smi restarted into the same log
			}
			if cols.q != 0 {
				return errf("a header after data lines")
			}
			c, err := headerColumns(fields)
			if err != nil {
				return errf("%v", err)
			}
			cols, header = c, text
			continue
		}
		if cols.q == 0 {
			switch len(fields) {
			case plainGPU.n:
				cols = plainGPU
			case plainApps.n:
				cols = plainApps
			default:
				return errf("%d columns and no header: want the 5 of --query-gpu=timestamp,index,uuid,memory.used,memory.total or the 4 of --query-compute-apps=timestamp,gpu_uuid,pid,used_memory", len(fields))
			}
		}
		if len(fields) != cols.n {
			return errf("%d columns, want %d", len(fields), cols.n)
		}
		if err := p.row(cols, fields, src.Name, line); err != nil {
			return errf("%v", err)
		}
	}
	if err := sc.Err(); errors.Is(err, bufio.ErrTooLong) {
		return fmt.Errorf("%s:%d: a line longer than %d bytes", src.Name, line+1, maxLine)
	} else if err != nil {
		return fmt.Errorf("%s:%d: %w", src.Name, line+1, err)
	}
	return nil
}

// unavailable is a value nvidia-smi could not read: "[N/A]", "[Not Supported]".
func unavailable(s string) bool { return strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") }

// mebibytes parses "1234 MiB" or "1234" into bytes.
func mebibytes(name, s string) (int64, error) {
	num := strings.TrimSpace(strings.TrimSuffix(s, "MiB"))
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > 1<<40 {
		return 0, fmt.Errorf("%s %q: want a number of MiB", name, s)
	}
	return v * mib, nil
}

func (p *parser) row(c columns, f []string, src string, line int) error {
	ts, err := time.ParseInLocation(TimeLayout, f[c.time], p.loc)
	if err != nil {
		return fmt.Errorf("timestamp %q: want YYYY/MM/DD HH:MM:SS.mmm", f[c.time])
	}
	t := ts.UnixNano()
	if c.q == queryApps {
		pid, err := strconv.Atoi(f[c.pid])
		if err != nil || pid < 0 {
			return fmt.Errorf("pid %q: want a process id", f[c.pid])
		}
		if f[c.uuid] == "" || unavailable(f[c.uuid]) {
			return fmt.Errorf("no GPU uuid")
		}
		if unavailable(f[c.used]) {
			p.log.Unavailable++
			return nil
		}
		used, err := mebibytes("used memory", f[c.used])
		if err != nil {
			return err
		}
		p.appsByUUID = append(p.appsByUUID, appRow{t: t, uuid: f[c.uuid], pid: pid, used: used})
		return nil
	}
	g, err := p.gpu(c, f, src, line)
	if err != nil {
		return err
	}
	if c.total >= 0 && g.TotalBytes == 0 {
		if unavailable(f[c.total]) {
			p.log.Unavailable++
		} else if g.TotalBytes, err = mebibytes("memory.total", f[c.total]); err != nil {
			return err
		}
	}
	if unavailable(f[c.used]) {
		p.log.Unavailable++
		return nil
	}
	used, err := mebibytes("memory.used", f[c.used])
	if err != nil {
		return err
	}
	p.log.Device = append(p.log.Device, storage.DeviceSample{T: t, GPU: g.Index, Used: used})
	return nil
}

// gpu finds or declares the GPU of a --query-gpu row. An index and a uuid
// must keep to each other through the logs.
func (p *parser) gpu(c columns, f []string, src string, line int) (*storage.GPU, error) {
	uuid := ""
	if c.uuid >= 0 && !unavailable(f[c.uuid]) {
		uuid = f[c.uuid]
	}
	index := -1
	if c.index >= 0 {
		n, err := strconv.Atoi(f[c.index])
		if err != nil || n < 0 || n > 1<<16 {
			return nil, fmt.Errorf("index %q: want a GPU index", f[c.index])
		}
		index = n
	}
	if index < 0 { // uuid only
		if i, ok := p.byUUID[uuid]; ok {
			return p.byIndex[i], nil
		}
		index = len(p.byIndex)
		for p.byIndex[index] != nil {
			index++
		}
	}
	g := p.byIndex[index]
	if g == nil {
		g = &storage.GPU{Index: index, UUID: uuid}
		p.byIndex[index] = g
		p.uuidLine[index] = fmt.Sprintf("%s:%d", src, line)
		if uuid != "" {
			if other, ok := p.byUUID[uuid]; ok {
				return nil, fmt.Errorf("GPU %s is index %d here but index %d at %s", uuid, index, other, p.uuidLine[other])
			}
			p.byUUID[uuid] = index
		}
		return g, nil
	}
	if uuid != "" && g.UUID != uuid {
		return nil, fmt.Errorf("GPU %d is %s here but %s at %s", index, uuid, g.UUID, p.uuidLine[index])
	}
	return g, nil
}

func (p *parser) finish() (*Log, error) {
	// Processes: a GPU the --query-gpu log did not name gets the next free
	// index, in order of first appearance.
	for _, a := range p.appsByUUID {
		i, ok := p.byUUID[a.uuid]
		if !ok {
			i = 0
			for p.byIndex[i] != nil {
				i++
			}
			p.byIndex[i] = &storage.GPU{Index: i, UUID: a.uuid}
			p.byUUID[a.uuid] = i
		}
		p.log.Procs = append(p.log.Procs, storage.ProcSample{T: a.t, GPU: i, PID: a.pid, Used: a.used})
	}
	if len(p.log.Device)+len(p.log.Procs) == 0 {
		return nil, ErrNoData
	}
	for _, g := range p.byIndex {
		p.log.GPUs = append(p.log.GPUs, *g)
	}
	slices.SortFunc(p.log.GPUs, func(a, b storage.GPU) int { return a.Index - b.Index })
	slices.SortStableFunc(p.log.Device, func(a, b storage.DeviceSample) int { return cmp.Compare(a.T, b.T) })
	slices.SortStableFunc(p.log.Procs, func(a, b storage.ProcSample) int { return cmp.Compare(a.T, b.T) })
	return &p.log, nil
}

// Span is the first and last time of the log.
func (l *Log) Span() (start, end int64) {
	start, end = int64(1<<63-1), int64(-1<<63)
	for _, s := range l.Device {
		start, end = min(start, s.T), max(end, s.T)
	}
	for _, s := range l.Procs {
		start, end = min(start, s.T), max(end, s.T)
	}
	return start, end
}

// Interval is the median time between one GPU's consecutive samples: the
// logging interval (-l or -lms); 0 if unknown.
func (l *Log) Interval() int64 {
	if len(l.GPUs) == 0 {
		return 0
	}
	var d []int64
	last := int64(-1 << 63)
	for _, s := range l.Device {
		if s.GPU != l.GPUs[0].Index {
			continue
		}
		if last != -1<<63 && s.T > last {
			d = append(d, s.T-last)
		}
		last = s.T
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[len(d)/2]
}

// WriteJSONL writes the log as one run of memrec's JSON Lines, named name,
// for storage.DB.Import. The run's recorder says its source is nvidia-smi
// and counts the unavailable values as invalid readings.
func (l *Log) WriteJSONL(w io.Writer, name string) error {
	start, end := l.Span()
	head := map[string]any{"type": "run", "name": name, "start_ns": start, "end_ns": end, "complete": true,
		"interval_ns": l.Interval(), "recorder": storage.Recorder{Source: storage.SourceNvidiaSMI, Invalid: l.Unavailable}}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(head); err != nil {
		return err
	}
	for _, g := range l.GPUs {
		if err := enc.Encode(map[string]any{"type": "gpu", "gpu": g.Index, "uuid": g.UUID, "total_bytes": g.TotalBytes}); err != nil {
			return err
		}
	}
	// Device and process samples share a series group in the store, which
	// wants them in time order: merge the two.
	var b []byte
	d, p := l.Device, l.Procs
	for len(d)+len(p) > 0 {
		if len(d) > 0 && (len(p) == 0 || d[0].T <= p[0].T) {
			b = wire.AppendDevice(b[:0], d[0])
			d = d[1:]
		} else {
			b = wire.AppendProc(b[:0], p[0])
			p = p[1:]
		}
		if _, err := bw.Write(b); err != nil {
			return err
		}
	}
	return bw.Flush()
}
