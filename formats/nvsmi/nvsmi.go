// Package nvsmi reads the CSV logs nvidia-smi writes with
//
//	nvidia-smi --query-gpu=timestamp,index,uuid,memory.used,memory.total --format=csv
//	nvidia-smi --query-compute-apps=timestamp,gpu_uuid,pid,used_memory --format=csv
//
// (with or without the header and the units, "noheader" and "nounits"; with
// a header, in any column order, and with name and memory.reserved too), and
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
	"math"
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
	// Folded counts lines in a repeated hour (the end of daylight saving
	// time) read as its second pass, since the log had already passed
	// their first reading.
	Folded int64
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
	q                                                   query
	n                                                   int // fields per line
	time, index, uuid, name, used, reserved, total, pid int
}

// Without a header the columns are the documented queries', in order.
var (
	plainGPU  = columns{q: queryGPU, n: 5, time: 0, index: 1, uuid: 2, name: -1, used: 3, reserved: -1, total: 4, pid: -1}
	plainApps = columns{q: queryApps, n: 4, time: 0, index: -1, uuid: 1, name: -1, pid: 2, used: 3, reserved: -1, total: -1}
)

// column names each field of a header that memrec reads; the others are
// ignored.
var column = map[string]func(c *columns) *int{
	"timestamp":       func(c *columns) *int { return &c.time },
	"index":           func(c *columns) *int { return &c.index },
	"uuid":            func(c *columns) *int { return &c.uuid },
	"gpu_uuid":        func(c *columns) *int { return &c.uuid },
	"name":            func(c *columns) *int { return &c.name },
	"memory.used":     func(c *columns) *int { return &c.used },
	"used_gpu_memory": func(c *columns) *int { return &c.used },
	"used_memory":     func(c *columns) *int { return &c.used },
	"memory.reserved": func(c *columns) *int { return &c.reserved },
	"memory.total":    func(c *columns) *int { return &c.total },
	"pid":             func(c *columns) *int { return &c.pid },
}

// memoryColumn: a column whose unit must be MiB.
func memoryColumn(name string) bool {
	return strings.HasPrefix(name, "memory.") || strings.HasSuffix(name, "_memory")
}

// headerColumns reads a header line: field names, each perhaps followed by
// its unit in brackets ("memory.used [MiB]"), in any order.
func headerColumns(fields []string) (columns, error) {
	c := columns{n: len(fields), time: -1, index: -1, uuid: -1, name: -1, used: -1, reserved: -1, total: -1, pid: -1}
	for i, f := range fields {
		name, unit, _ := strings.Cut(f, " [")
		if unit != "" && unit != "MiB]" && memoryColumn(name) {
			return c, fmt.Errorf("column %q: memory must be in MiB", f)
		}
		if at, ok := column[name]; ok {
			if *at(&c) >= 0 {
				return c, fmt.Errorf("column %q appears twice", name)
			}
			*at(&c) = i
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

// isHeader tells a header from a data line: a header names a column
// memrec reads, in any position; data never does.
func isHeader(fields []string) bool {
	for _, f := range fields {
		name, _, _ := strings.Cut(f, " [")
		if _, ok := column[name]; ok {
			return true
		}
	}
	return false
}

// parser collects the logs.
type parser struct {
	loc        *time.Location
	log        Log
	byIndex    map[int]*storage.GPU
	byUUID     map[string]int
	uuidLine   map[int]string // where a GPU's uuid was first seen
	appsByUUID []appRow       // compute-apps rows; GPUs resolved at the end
	uuids      []string       // the compute-apps rows' uuids, by appRow.uuid
	uuidIndex  map[string]int32
	last       int64 // the source's previous time, to read a repeated (DST) hour
}

// appRow is a compute-apps row, 24 bytes: its uuid by index into uuids.
type appRow struct {
	t    int64
	uuid int32
	pid  int32
	used int64
}

// Parse reads the logs, in loc's time (time.Local if nil), into one Log.
// Errors name the source and line.
func Parse(srcs []Source, loc *time.Location) (*Log, error) {
	if loc == nil {
		loc = time.Local
	}
	p := &parser{loc: loc, byIndex: map[int]*storage.GPU{}, byUUID: map[string]int{}, uuidLine: map[int]string{}, uuidIndex: map[string]int32{}}
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
	p.last = math.MinInt64
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

// maxIndex is the highest GPU index a run holds.
const maxIndex = storage.MaxGPUIndex

// maxMiB bounds a memory value: 2^40 MiB (an exabyte) is no GPU's.
const maxMiB = 1 << 40

// mebibytes parses "1234 MiB" or "1234" into bytes.
func mebibytes(name, s string) (int64, error) {
	num := strings.TrimSpace(strings.TrimSuffix(s, "MiB"))
	v, err := strconv.ParseInt(num, 10, 64)
	if err != nil || v < 0 || v > maxMiB {
		return 0, fmt.Errorf("%s %q: want a number of MiB", name, s)
	}
	return v * mib, nil
}

// The times a run may hold (storage's bound), checked on the calendar
// before a time becomes nanoseconds: year 2600 would wrap past int64.
var (
	earliest = time.Unix(0, storage.EarliestTime)
	latest   = time.Unix(0, storage.LatestTime)
)

// timestamp parses a row's time in p.loc. In a repeated hour (a clock set
// back for the end of daylight saving time) a wall time has two readings:
// the earlier one unless the log has already passed it, since a log's
// lines are in time order; folded counts the lines read as the later.
func (p *parser) timestamp(s string) (int64, error) {
	ts, err := time.ParseInLocation(TimeLayout, s, p.loc)
	if err != nil {
		return 0, fmt.Errorf("timestamp %q: want YYYY/MM/DD HH:MM:SS.mmm", s)
	}
	if ts.Before(earliest) || !ts.Before(latest) {
		return 0, fmt.Errorf("timestamp %q is outside 1970..2200", s)
	}
	first, second := readings(ts)
	t := first.UnixNano()
	if t < p.last && second != first {
		t = second.UnixNano()
		p.log.Folded++
	}
	p.last = t
	return t, nil
}

// readings returns the earlier and later instants that show ts's wall
// time in its location: the same twice, but in a repeated hour.
func readings(ts time.Time) (first, second time.Time) {
	first, second = ts, ts
	_, off := ts.Zone()
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} { // the clock shifts in use
		if _, o := ts.Add(d).Zone(); off-o == int(d/time.Second) {
			second = ts.Add(d) // ts is the first reading
		}
		if _, o := ts.Add(-d).Zone(); o-off == int(d/time.Second) {
			first = ts.Add(-d) // ts is the second
		}
	}
	return first, second
}

func (p *parser) row(c columns, f []string, src string, line int) error {
	t, err := p.timestamp(f[c.time])
	if err != nil {
		return err
	}
	if c.q == queryApps {
		pid, err := strconv.Atoi(f[c.pid])
		if err != nil || pid < 0 || pid > math.MaxInt32 {
			return fmt.Errorf("pid %q: want a process id", f[c.pid])
		}
		if f[c.uuid] == "" {
			return fmt.Errorf("no GPU uuid")
		}
		if unavailable(f[c.uuid]) || unavailable(f[c.used]) {
			p.log.Unavailable++ // a process on a GPU nvidia-smi could not name: not attributable
			return nil
		}
		used, err := mebibytes("used memory", f[c.used])
		if err != nil {
			return err
		}
		u, ok := p.uuidIndex[f[c.uuid]]
		if !ok {
			u = int32(len(p.uuids))
			p.uuids = append(p.uuids, f[c.uuid])
			p.uuidIndex[f[c.uuid]] = u
		}
		p.appsByUUID = append(p.appsByUUID, appRow{t: t, uuid: u, pid: int32(pid), used: used})
		return nil
	}
	if c.index < 0 && unavailable(f[c.uuid]) {
		p.log.Unavailable++ // neither index nor uuid: not attributable to a GPU
		return nil
	}
	g, err := p.gpu(c, f, src, line)
	if err != nil {
		return err
	}
	if c.name >= 0 && g.Name == "" && !unavailable(f[c.name]) {
		g.Name = f[c.name]
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
	var reserved int64 // 0: unknown, as the store keeps it
	if c.reserved >= 0 && !unavailable(f[c.reserved]) {
		if reserved, err = mebibytes("memory.reserved", f[c.reserved]); err != nil {
			return err
		}
	}
	p.log.Device = append(p.log.Device, storage.DeviceSample{T: t, GPU: g.Index, Used: used, Reserved: reserved})
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
		if err != nil || n < 0 || n > maxIndex {
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
		if len(p.byIndex) >= storage.MaxGPUs {
			return nil, fmt.Errorf("more than %d GPUs, the most a run holds", storage.MaxGPUs)
		}
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
	if uuid != "" && g.UUID == "" { // nvidia-smi could not read it until now
		if other, ok := p.byUUID[uuid]; ok {
			return nil, fmt.Errorf("GPU %s is index %d here but index %d at %s", uuid, index, other, p.uuidLine[other])
		}
		g.UUID, p.byUUID[uuid], p.uuidLine[index] = uuid, index, fmt.Sprintf("%s:%d", src, line)
	}
	if uuid != "" && g.UUID != uuid {
		return nil, fmt.Errorf("GPU %d is %s here but %s at %s", index, uuid, g.UUID, p.uuidLine[index])
	}
	return g, nil
}

func (p *parser) finish() (*Log, error) {
	// Processes: a GPU the --query-gpu log did not name gets the next free
	// index, in order of first appearance.
	p.log.Procs = make([]storage.ProcSample, 0, len(p.appsByUUID))
	for _, a := range p.appsByUUID {
		uuid := p.uuids[a.uuid]
		i, ok := p.byUUID[uuid]
		if !ok {
			if len(p.byIndex) >= storage.MaxGPUs {
				return nil, fmt.Errorf("more than %d GPUs, the most a run holds (the compute-apps logs name GPU %s that the GPU logs do not)", storage.MaxGPUs, uuid)
			}
			i = 0
			for p.byIndex[i] != nil {
				i++
			}
			p.byIndex[i] = &storage.GPU{Index: i, UUID: uuid}
			p.byUUID[uuid] = i
		}
		p.log.Procs = append(p.log.Procs, storage.ProcSample{T: a.t, GPU: i, PID: int(a.pid), Used: a.used})
	}
	p.appsByUUID = nil
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
// of host (may be ""), for jsonl.Import. The run's recorder says its
// source is nvidia-smi and counts the unavailable values as invalid
// readings.
func (l *Log) WriteJSONL(w io.Writer, name, host string) error {
	start, end := l.Span()
	head := map[string]any{"type": "run", "name": name, "start_ns": start, "end_ns": end, "complete": true,
		"interval_ns": l.Interval(), "recorder": storage.Recorder{Source: storage.SourceNvidiaSMI, Invalid: l.Unavailable}}
	if host != "" {
		head["host"] = host
	}
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	if err := enc.Encode(head); err != nil {
		return err
	}
	for _, g := range l.GPUs {
		if err := enc.Encode(map[string]any{"type": "gpu", "gpu": g.Index, "uuid": g.UUID, "name": g.Name, "total_bytes": g.TotalBytes}); err != nil {
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

// Looks reports whether line (a file's first line that is not blank)
// reads as one of an nvidia-smi CSV log: a header naming its columns, or
// a row that starts with a timestamp.
func Looks(line string) bool {
	fields := strings.Split(strings.TrimSpace(strings.TrimPrefix(line, "\ufeff")), ",")
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	if len(fields) < 2 {
		return false
	}
	if isHeader(fields) {
		return true
	}
	_, err := time.Parse(TimeLayout, fields[0])
	return err == nil
}
