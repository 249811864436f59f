package wire

// This file lists, once, the integer fields of each sample kind and of a
// mark: their JSON names, whether a line must have them, and how to read
// and set them in the Go type. Parse and the Append functions read these
// tables, the store takes its column names and order from them
// (storage/schema.go), and the probe's line formats are checked against
// them by a test. Adding a figure to a kind is one entry here (at the end
// of its table, with Later set) plus its docs in docs/format.md; docs/design.md has the whole recipe.
//
// "t_ns" and "gpu" head every sample line and are not listed; a mark's
// "kind" and "text" are strings, written beside its table.

// Field is one integer field of a record of type T. The store keeps its
// own hand-written row conversions (decoding is the hottest path memrec
// has), checked against these tables by its tests.
type Field[T any] struct {
	Name string // as the JSON line spells it
	// Required: a line without it is refused. Otherwise an absent field
	// reads as Default's value (0 without one), or None if Optional.
	Required bool
	// Optional fields are absent (None) or not negative; they are left
	// out of a written line when absent. The store refuses a negative
	// value of the others.
	Optional bool
	// Key fields (a process's pid) identify a stored series rather than
	// fill a column of it.
	Key bool
	// Later marks a field added after files were first written: a series
	// stored before it has no such column, which reads as 0, and a line
	// leaves it out when it is 0 (so older files export as they were).
	Later bool
	// Alias is an older name of the field, read where a line lacks Name
	// (files written before the rename) and never written.
	Alias string
	// Stat is the key of torch.cuda.memory_stats() whose count the probe
	// sends as this field, for the allocator's event counters; the probe's
	// list of them (python/memrec/_lines.py, COUNTERS) is checked against
	// the rows that have one. Help, where set, makes the field a counter on
	// /metrics (memrec_torch_NAME_total) with that help text.
	Stat string
	Help string
	// Column is the name the exports (CSV, Parquet) and /metrics give the
	// field where it differs from Name; ColumnName reads it.
	Column  string
	Default func(*T) int64 // the value of an absent field; nil: 0 (None if Optional)
	Get     func(T) int64  // by value: the hot paths keep their values on the stack
	Set     func(*T, int64)
}

// DeviceFields are a "sample" line's fields.
var DeviceFields = []Field[DeviceSample]{
	{Name: "used_bytes", Required: true,
		Get: func(s DeviceSample) int64 { return s.Used }, Set: func(s *DeviceSample, v int64) { s.Used = v }},
	// Driver-reserved memory: "reserved_bytes" until the rename that gave
	// every meaning one name (a torch line's reserved_bytes is PyTorch's).
	{Name: "driver_reserved_bytes", Alias: "reserved_bytes",
		Get: func(s DeviceSample) int64 { return s.Reserved }, Set: func(s *DeviceSample, v int64) { s.Reserved = v }},
}

// ProcFields are a "proc" line's fields.
var ProcFields = []Field[ProcSample]{
	{Name: "pid", Required: true, Key: true,
		Get: func(s ProcSample) int64 { return int64(s.PID) }, Set: func(s *ProcSample, v int64) { s.PID = int(v) }},
	{Name: "used_bytes", Required: true,
		Get: func(s ProcSample) int64 { return s.Used }, Set: func(s *ProcSample, v int64) { s.Used = v }},
}

// TorchFields are a "torch" line's fields.
var TorchFields = []Field[TorchSample]{
	{Name: "pid", Required: true, Key: true,
		Get: func(s TorchSample) int64 { return int64(s.PID) }, Set: func(s *TorchSample, v int64) { s.PID = int(v) }},
	{Name: "rank", Optional: true,
		Get: func(s TorchSample) int64 { return int64(s.Rank) }, Set: func(s *TorchSample, v int64) { s.Rank = int(v) }},
	{Name: "allocated_bytes", Required: true,
		Get: func(s TorchSample) int64 { return s.Allocated }, Set: func(s *TorchSample, v int64) { s.Allocated = v }},
	{Name: "reserved_bytes", Required: true,
		Get: func(s TorchSample) int64 { return s.Reserved }, Set: func(s *TorchSample, v int64) { s.Reserved = v }},
	// Active is allocated unless said otherwise (older probes did not).
	{Name: "active_bytes", Default: func(s *TorchSample) int64 { return s.Allocated },
		Get: func(s TorchSample) int64 { return s.Active }, Set: func(s *TorchSample, v int64) { s.Active = v }},
	{Name: "inactive_split_bytes",
		Get: func(s TorchSample) int64 { return s.InactiveSplit }, Set: func(s *TorchSample, v int64) { s.InactiveSplit = v }},
	// The peak since the previous report: beside allocated_bytes in a
	// table, "peak_allocated_bytes" would read as the run's peak.
	{Name: "peak_allocated_bytes", Column: "step_peak_allocated_bytes",
		Get: func(s TorchSample) int64 { return s.PeakAllocated }, Set: func(s *TorchSample, v int64) { s.PeakAllocated = v }},
	{Name: "segments",
		Get: func(s TorchSample) int64 { return s.Segments }, Set: func(s *TorchSample, v int64) { s.Segments = v }},
	{Name: "alloc_retries", Stat: "num_alloc_retries", Help: "Allocations the rank's allocator retried after freeing its cache.",
		Get: func(s TorchSample) int64 { return s.AllocRetries }, Set: func(s *TorchSample, v int64) { s.AllocRetries = v }},
	{Name: "ooms", Stat: "num_ooms", Help: "Out-of-memory errors the rank's allocator raised.",
		Get: func(s TorchSample) int64 { return s.OOMs }, Set: func(s *TorchSample, v int64) { s.OOMs = v }},
	{Name: "largest_segment_bytes", Later: true,
		Get: func(s TorchSample) int64 { return s.LargestSegment }, Set: func(s *TorchSample, v int64) { s.LargestSegment = v }},
	{Name: "device_allocs", Later: true, Stat: "num_device_alloc", Help: "Device allocations (cudaMalloc) the rank's allocator made; a rate that keeps up with the steps is its cache thrashing.",
		Get: func(s TorchSample) int64 { return s.DeviceAllocs }, Set: func(s *TorchSample, v int64) { s.DeviceAllocs = v }},
	{Name: "device_frees", Later: true, Stat: "num_device_free", Help: "Device frees (cudaFree) the rank's allocator made.",
		Get: func(s TorchSample) int64 { return s.DeviceFrees }, Set: func(s *TorchSample, v int64) { s.DeviceFrees = v }},
}

// MarkFields are a "mark" line's integer fields, all optional; its "kind"
// (required) and "text" are strings.
var MarkFields = []Field[Mark]{
	optInt("epoch", func(m *Mark) *int { return &m.Epoch }),
	optInt("step", func(m *Mark) *int { return &m.Step }),
	optInt("rank", func(m *Mark) *int { return &m.Rank }),
	optInt("gpu", func(m *Mark) *int { return &m.GPU }),
	optInt("pid", func(m *Mark) *int { return &m.PID }),
	optInt("code", func(m *Mark) *int { return &m.Code }),
}

func optInt[T any](name string, p func(*T) *int) Field[T] {
	return Field[T]{Name: name, Optional: true,
		Get: func(v T) int64 { return int64(*p(&v)) }, Set: func(v *T, n int64) { *p(v) = int(n) }}
}

// ColumnName is the field's name in the exports and /metrics.
func (f *Field[T]) ColumnName() string {
	if f.Column != "" {
		return f.Column
	}
	return f.Name
}

// Counters are the rows of fs that count the allocator's events (those
// with a Stat), in order: what the exports sum per GPU and analyze
// totals.
func Counters[T any](fs []Field[T]) []Field[T] {
	var out []Field[T]
	for _, f := range fs {
		if f.Stat != "" {
			out = append(out, f)
		}
	}
	return out
}

// FieldNames are the names of fs, in order.
func FieldNames[T any](fs []Field[T]) []string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name
	}
	return names
}

// readFields sets v's fields of fs from the line's object.
func readFields[T any](f *fields, v *T, fs []Field[T]) {
	for i := range fs {
		d := &fs[i]
		name := d.Name
		if d.Alias != "" && f.o.Get(name) == nil {
			name = d.Alias
		}
		switch {
		case d.Optional:
			d.Set(v, int64(f.opt(name)))
		default:
			def := int64(0)
			if d.Default != nil {
				def = d.Default(v)
			}
			d.Set(v, f.int(name, d.Required, def))
		}
	}
}

// omitted is the value a written line leaves the field out for: None
// for an optional field, 0 for a later one; ok is false for a field that
// is always written.
func (f *Field[T]) omitted() (v int64, ok bool) {
	switch {
	case f.Optional:
		return None, true
	case f.Later:
		return 0, true
	}
	return 0, false
}

// appendFields appends v's fields of fs, leaving out those at their
// omitted value.
func appendFields[T any](b []byte, v *T, fs []Field[T]) []byte {
	for i := range fs {
		n := fs[i].Get(*v)
		if o, ok := fs[i].omitted(); ok && n == o {
			continue
		}
		b = appendKV(b, fs[i].Name, n)
	}
	return b
}
