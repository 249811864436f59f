package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/memrec/memrec/formats/parquet"
	"github.com/memrec/memrec/storage/wire"
)

// metricsDiffer are /metrics names (recorder/metrics.go) that differ from
// the field tables': each the figure's field name in that file's prefix.
var metricsDiffer = map[string]string{"memrec_gpu_memory_reserved_bytes": "driver_reserved_bytes"}

// fieldNames is the figure names of the field tables (storage/wire), as
// the exports name them (Field.ColumnName), key fields left out.
func fieldNames[T any](fs []wire.Field[T]) map[string]bool {
	out := map[string]bool{}
	for _, f := range fs {
		if f.Key {
			continue
		}
		out[f.ColumnName()] = true
	}
	return out
}

// TestOneNamePerFigure: every figure column of the CSV, the Parquet tables
// and /metrics is named as in the field tables (storage/wire), the one
// place a record's fields are listed; JSON Lines is written from those
// tables. A column that is no field (time, host_name, epoch) is not a
// figure and is listed here.
func TestOneNamePerFigure(t *testing.T) {
	device, proc, torch, budget := fieldNames(wire.DeviceFields), fieldNames(wire.ProcFields), fieldNames(wire.TorchFields),
		fieldNames(wire.BudgetFields)
	for _, s := range wire.BudgetStrings {
		budget[s.Name] = true
	}
	budget["autocast"] = true // a line's true or false, beside the table
	common := map[string]bool{"t_ns": true, "time": true, "gpu": true, "pid": true, "rank": true, "host_name": true, "run_name": true,
		"epoch": true, "step": true}
	for _, tc := range []struct {
		table  string
		schema *pq.Schema
		fields map[string]bool
		extra  []string
	}{
		{"device", pq.SchemaOf(parquet.Device{}), device, []string{"uuid"}},
		{"process", pq.SchemaOf(parquet.Process{}), proc, nil},
		{"allocator", pq.SchemaOf(parquet.Allocator{}), torch, nil},
		{"budget", pq.SchemaOf(parquet.Budget{}), budget, nil},
	} {
		for _, f := range tc.schema.Fields() {
			n := f.Name()
			if !tc.fields[n] && !common[n] && !strings.Contains(strings.Join(tc.extra, ","), n) {
				t.Errorf("Parquet %s.%s: no field of that name in storage/wire", tc.table, n)
			}
		}
	}

	// The CSV of a run with every figure: allocator and budget columns.
	dir := t.TempDir()
	in := filepath.Join(dir, "b.jsonl")
	os.WriteFile(in, []byte(`{"type":"run","name":"b","start_ns":1000000000}
{"type":"gpu","gpu":0}
{"type":"sample","t_ns":1000000000,"gpu":0,"used_bytes":5,"driver_reserved_bytes":1}
{"type":"torch","t_ns":1000000000,"gpu":0,"pid":1,"allocated_bytes":3,"reserved_bytes":4,"params_bytes":1,"grads_bytes":1,"optimizer_bytes":2,"buffers_bytes":0}
`), 0o644)
	db := filepath.Join(dir, "m.db")
	if _, errs, code := run(t, db, "", "import", in); code != 0 {
		t.Fatal(errs)
	}
	out, errs, code := run(t, db, "", "export", "b", "--format", "csv", "--procs")
	if code != 0 {
		t.Fatal(errs)
	}
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	perGPU := regexp.MustCompile(`^gpu\d+_(pid\d+_)?`)
	for _, col := range rows[0] {
		if !perGPU.MatchString(col) {
			continue
		}
		n := perGPU.ReplaceAllString(col, "")
		if !device[n] && !torch[n] && !budget[n] && !proc[n] {
			t.Errorf("CSV %s: no field %s in storage/wire", col, n)
		}
	}
	for _, f := range wire.Counters(wire.TorchFields) { // each counter of the table is a column
		if !slices.Contains(rows[0], "gpu0_"+f.ColumnName()) {
			t.Errorf("CSV has no column gpu0_%s: %v", f.ColumnName(), rows[0])
		}
	}
	if !strings.Contains(strings.Join(rows[0], ","), "gpu0_optimizer_bytes") {
		t.Errorf("CSV has no budget columns: %v", rows[0])
	}

	// /metrics: the figures' names in recorder/metrics.go, read as text.
	src, err := os.ReadFile(filepath.Join("..", "..", "recorder", "metrics.go"))
	if err != nil {
		t.Fatal(err)
	}
	prefixes := []struct {
		prefix string
		fields map[string]bool
	}{{"memrec_gpu_memory_", device}, {"memrec_process_memory_", proc}, {"memrec_torch_", torch}}
	seen := 0
	for _, m := range regexp.MustCompile(`"(memrec_[a-z_]+)"`).FindAllStringSubmatch(string(src), -1) {
		name := m[1]
		for _, p := range prefixes {
			if !strings.HasPrefix(name, p.prefix) {
				continue
			}
			if name == p.prefix {
				continue // a prefix the code joins to a field table's names: right by construction
			}
			seen++
			n := strings.TrimSuffix(strings.TrimPrefix(name, p.prefix), "_total") // a counter's suffix
			if p.prefix == "memrec_gpu_memory_" && (n == "free_bytes" || n == "total_bytes") {
				continue // derived, and the GPU line's total_bytes
			}
			if want, ok := metricsDiffer[name]; ok {
				t.Logf("/metrics %s: the field is %s", name, want)
				continue
			}
			if !p.fields[n] {
				t.Errorf("/metrics %s: no field %s in storage/wire", name, n)
			}
		}
	}
	if seen < 8 {
		t.Errorf("only %d figure metrics found in recorder/metrics.go", seen)
	}
}
