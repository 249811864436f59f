package storage

import (
	"bufio"
	"container/heap"
	"fmt"
	"io"
	"slices"
	"strconv"
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
	devs := make([]*Iter[DeviceSample], len(gpus))
	var torch torchHeap
	for _, s := range series {
		i, ok := col[s.GPU]
		if !ok {
			continue
		}
		switch s.Kind {
		case "device":
			devs[i] = db.DeviceSamples(r, s.GPU, MinTime, MaxTime)
		case "torch":
			if err := torch.add(db.TorchSamples(r, s.GPU, s.PID, MinTime, MaxTime)); err != nil {
				return err
			}
		}
	}
	heap.Init(&torch)

	w := bufio.NewWriterSize(out, 1<<20)
	row := []byte("t_ns,time_s")
	for _, g := range gpus {
		for _, f := range csvFigures {
			row = fmt.Appendf(row, ",gpu%d_%s", g, f)
		}
	}
	if _, err := w.Write(append(row, '\n')); err != nil {
		return err
	}

	// Heads of the device iterators; the allocator state per GPU.
	heads := make([]*DeviceSample, len(gpus))
	hasDevice := false
	for i, it := range devs {
		if it != nil && it.Next() {
			s := it.At()
			heads[i], hasDevice = &s, true
		} else if it != nil && it.Err() != nil {
			return it.Err()
		}
	}
	type alloc struct {
		seen                bool
		allocated, reserved int64
	}
	allocs := make([]alloc, len(gpus))
	last := map[[2]int]TorchSample{} // (gpu, pid) → last sample
	applyTorch := func(upTo int64) error {
		for torch.Len() > 0 && torch.items[0].At().T <= upTo {
			s, err := torch.pop()
			if err != nil {
				return err
			}
			k := [2]int{s.GPU, s.PID}
			prev := last[k]
			last[k] = s
			a := &allocs[col[s.GPU]]
			a.seen = true
			a.allocated += s.Allocated - prev.Allocated
			a.reserved += s.Reserved - prev.Reserved
		}
		return nil
	}
	for {
		t, ok := int64(0), false
		if hasDevice {
			for _, h := range heads {
				if h != nil && (!ok || h.T < t) {
					t, ok = h.T, true
				}
			}
		} else if torch.Len() > 0 {
			t, ok = torch.items[0].At().T, true
		}
		if !ok {
			break
		}
		if err := applyTorch(t); err != nil {
			return err
		}
		row = strconv.AppendInt(row[:0], t, 10)
		row = append(row, ',')
		row = strconv.AppendFloat(row, float64(t-r.StartNS)/1e9, 'f', 6, 64)
		for i := range gpus {
			if h := heads[i]; h != nil && h.T == t {
				row = append(row, ',')
				row = strconv.AppendInt(row, h.Used, 10)
				row = append(row, ',')
				row = strconv.AppendInt(row, h.Reserved, 10)
				if devs[i].Next() {
					s := devs[i].At()
					heads[i] = &s
				} else if err := devs[i].Err(); err != nil {
					return err
				} else {
					heads[i] = nil
				}
			} else {
				row = append(row, ',', ',')
			}
			if a := allocs[i]; a.seen {
				row = append(row, ',')
				row = strconv.AppendInt(row, a.allocated, 10)
				row = append(row, ',')
				row = strconv.AppendInt(row, a.reserved, 10)
			} else {
				row = append(row, ',', ',')
			}
		}
		if _, err := w.Write(append(row, '\n')); err != nil {
			return err
		}
	}
	return w.Flush()
}

// torchHeap merges allocator iterators by the time of their current sample.
type torchHeap struct{ items []*Iter[TorchSample] }

func (h *torchHeap) add(it *Iter[TorchSample]) error {
	if it.Next() {
		h.items = append(h.items, it)
	}
	return it.Err()
}

// pop returns the earliest current sample and advances its iterator.
func (h *torchHeap) pop() (TorchSample, error) {
	it := h.items[0]
	s := it.At()
	if it.Next() {
		heap.Fix(h, 0)
		return s, nil
	}
	heap.Pop(h)
	return s, it.Err()
}

func (h torchHeap) Len() int           { return len(h.items) }
func (h torchHeap) Less(i, j int) bool { return h.items[i].At().T < h.items[j].At().T }
func (h torchHeap) Swap(i, j int)      { h.items[i], h.items[j] = h.items[j], h.items[i] }
func (h *torchHeap) Push(x any)        { h.items = append(h.items, x.(*Iter[TorchSample])) }
func (h *torchHeap) Pop() any {
	n := len(h.items) - 1
	x := h.items[n]
	h.items = h.items[:n]
	return x
}
