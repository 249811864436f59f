package storage

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strconv"

	"github.com/memrec/memrec/internal/merge"
)

// CSV columns, after t_ns and time_s, per GPU N in index order:
//
//	gpuN_used_bytes             device memory used (NVML)
//	gpuN_driver_reserved_bytes  memory the driver reserves (NVML; 0 if unknown)
//	gpuN_allocated_bytes        PyTorch allocated, summed over the GPU's processes
//	gpuN_reserved_bytes         PyTorch reserved, summed over the GPU's processes
//
// One row per NVML tick (per allocator sample when the run has no device
// samples). Allocator figures hold their last value between reports; a
// cell is empty where a figure has no value yet, or the GPU no sample at
// that tick.
var csvFigures = []string{"used_bytes", "driver_reserved_bytes", "allocated_bytes", "reserved_bytes"}

// ExportCSV writes a run as CSV, one row per tick and a column per GPU and
// figure, for pandas and spreadsheets. It streams: memory does not grow
// with the run's length. It is safe to call while other readers read.
func (db *DB) ExportCSV(out io.Writer, r Run) error {
	series, err := db.Series(r)
	if err != nil {
		return err
	}
	gpus := make([]int, 0, len(r.GPUs))
	for _, g := range r.GPUs {
		gpus = append(gpus, g.Index)
	}
	slices.Sort(gpus)
	col := map[int]int{} // GPU index → position in gpus
	for i, g := range gpus {
		col[g] = i
	}
	var devs []merge.Iterator[DeviceSample]
	var torchs []merge.Iterator[TorchSample]
	for _, s := range series {
		if _, ok := col[s.GPU]; !ok {
			continue
		}
		switch s.Kind {
		case SeriesDevice:
			devs = append(devs, db.DeviceSamples(r, s.GPU, MinTime, MaxTime))
		case SeriesTorch:
			torchs = append(torchs, db.TorchSamples(r, s.GPU, s.PID, MinTime, MaxTime))
		}
	}
	c := &csvWriter{w: bufio.NewWriterSize(out, 1<<20), start: r.RunStartNS(), gpus: len(gpus), col: col,
		torch: merge.New(func(s TorchSample) int64 { return s.T }, torchs...),
		last:  map[[2]int]TorchSample{}, alloc: make([]csvAlloc, len(gpus)), dev: make([]*DeviceSample, len(gpus))}
	c.row = []byte("t_ns,time_s")
	for _, g := range gpus {
		for _, f := range csvFigures {
			c.row = fmt.Appendf(c.row, ",gpu%d_%s", g, f)
		}
	}
	if _, err := c.w.Write(append(c.row, '\n')); err != nil {
		return err
	}
	c.nextTorch()
	if len(devs) > 0 {
		err = c.deviceRows(merge.New(func(s DeviceSample) int64 { return s.T }, devs...))
	} else {
		err = c.torchRows()
	}
	if err != nil {
		return err
	}
	return c.w.Flush()
}

// csvWriter writes the rows of ExportCSV.
type csvWriter struct {
	w     *bufio.Writer
	start int64
	gpus  int
	col   map[int]int // GPU index → column group
	row   []byte
	dev   []*DeviceSample // this tick's samples by column group

	torch    *merge.ByTime[TorchSample]
	pending  TorchSample // the next allocator sample not yet applied
	hasTorch bool
	last     map[[2]int]TorchSample // (gpu, pid) → last applied
	alloc    []csvAlloc
}

// csvAlloc is a GPU's allocator figures summed over its processes.
type csvAlloc struct {
	seen                bool
	allocated, reserved int64
}

func (c *csvWriter) nextTorch() {
	c.hasTorch = c.torch.Next()
	if c.hasTorch {
		c.pending = c.torch.At()
	}
}

// applyTorch applies the allocator samples up to time t.
func (c *csvWriter) applyTorch(t int64) error {
	for c.hasTorch && c.pending.T <= t {
		s := c.pending
		k := [2]int{s.GPU, s.PID}
		prev := c.last[k]
		c.last[k] = s
		a := &c.alloc[c.col[s.GPU]]
		a.seen = true
		a.allocated += s.Allocated - prev.Allocated
		a.reserved += s.Reserved - prev.Reserved
		c.nextTorch()
	}
	return c.torch.Err()
}

// deviceRows writes a row per distinct device sample time.
func (c *csvWriter) deviceRows(devs *merge.ByTime[DeviceSample]) error {
	t, open := int64(0), false
	for devs.Next() {
		s := devs.At()
		if open && s.T != t {
			if err := c.flushRow(t); err != nil {
				return err
			}
		}
		t, open = s.T, true
		c.dev[c.col[s.GPU]] = &s
	}
	if err := devs.Err(); err != nil {
		return err
	}
	if open {
		return c.flushRow(t)
	}
	return nil
}

// torchRows writes a row per allocator sample time.
func (c *csvWriter) torchRows() error {
	for c.hasTorch {
		if err := c.flushRow(c.pending.T); err != nil {
			return err
		}
	}
	return c.torch.Err()
}

func (c *csvWriter) flushRow(t int64) error {
	if err := c.applyTorch(t); err != nil {
		return err
	}
	row := strconv.AppendInt(c.row[:0], t, 10)
	row = append(row, ',')
	row = strconv.AppendFloat(row, float64(t-c.start)/1e9, 'f', 6, 64)
	for i := 0; i < c.gpus; i++ {
		if d := c.dev[i]; d != nil {
			row = append(row, ',')
			row = strconv.AppendInt(row, d.Used, 10)
			row = append(row, ',')
			row = strconv.AppendInt(row, d.Reserved, 10)
			c.dev[i] = nil
		} else {
			row = append(row, ',', ',')
		}
		if a := c.alloc[i]; a.seen {
			row = append(row, ',')
			row = strconv.AppendInt(row, a.allocated, 10)
			row = append(row, ',')
			row = strconv.AppendInt(row, a.reserved, 10)
		} else {
			row = append(row, ',', ',')
		}
	}
	c.row = row
	_, err := c.w.Write(append(row, '\n'))
	return err
}
