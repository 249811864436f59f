package storage

import (
	"bytes"
	"encoding/csv"
	"strings"
	"testing"
)

// TestExportCSV: one row per tick, allocator sums over a GPU's processes
// holding their last value, empty cells where there is no value. The
// expected table is worked out by hand from the input below.
func TestExportCSV(t *testing.T) {
	db := openTestDB(t)
	in := `{"type":"run","name":"c","start_ns":1000000000}
{"type":"gpu","gpu":0}
{"type":"gpu","gpu":1}
{"type":"sample","t_ns":1000000000,"gpu":0,"used_bytes":100,"reserved_bytes":7}
{"type":"sample","t_ns":1000000000,"gpu":1,"used_bytes":200,"reserved_bytes":7}
{"type":"torch","t_ns":1005000000,"gpu":0,"pid":10,"allocated_bytes":30,"reserved_bytes":40}
{"type":"sample","t_ns":1010000000,"gpu":0,"used_bytes":110,"reserved_bytes":7}
{"type":"torch","t_ns":1015000000,"gpu":0,"pid":11,"allocated_bytes":5,"reserved_bytes":6}
{"type":"torch","t_ns":1020000000,"gpu":0,"pid":10,"allocated_bytes":31,"reserved_bytes":40}
{"type":"sample","t_ns":1020000000,"gpu":0,"used_bytes":120,"reserved_bytes":7}
{"type":"sample","t_ns":1020000000,"gpu":1,"used_bytes":220,"reserved_bytes":7}
`
	runs, err := importString(db, "in", in, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := db.ExportCSV(&buf, runs[0]); err != nil {
		t.Fatal(err)
	}
	rows, err := csv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%s", err, buf.String())
	}
	want := [][]string{
		strings.Split("t_ns,time_s,gpu0_used_bytes,gpu0_driver_reserved_bytes,gpu0_allocated_bytes,gpu0_reserved_bytes,gpu1_used_bytes,gpu1_driver_reserved_bytes,gpu1_allocated_bytes,gpu1_reserved_bytes", ","),
		// first tick: no allocator report yet
		strings.Split("1000000000,0.000000,100,7,,,200,7,,", ","),
		// GPU 1 missed this tick; pid 10 reported 30/40 at 1.005 s
		strings.Split("1010000000,0.010000,110,7,30,40,,,,", ","),
		// pid 11 joined (5/6), pid 10 moved to 31 at the tick's own time
		strings.Split("1020000000,0.020000,120,7,36,46,220,7,,", ","),
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), buf.String())
	}
	for i := range want {
		if strings.Join(rows[i], ",") != strings.Join(want[i], ",") {
			t.Errorf("row %d:\n got %v\nwant %v", i, rows[i], want[i])
		}
	}
}

// TestExportCSVAllocatorOnly: without device samples the rows are the
// allocator's report times.
func TestExportCSVAllocatorOnly(t *testing.T) {
	db := openTestDB(t)
	in := `{"type":"run","name":"a","start_ns":0}
{"type":"gpu","gpu":2}
{"type":"torch","t_ns":1000,"gpu":2,"pid":1,"allocated_bytes":3,"reserved_bytes":4}
{"type":"torch","t_ns":3000,"gpu":2,"pid":1,"allocated_bytes":5,"reserved_bytes":8}
`
	runs, err := importString(db, "in", in, ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := db.ExportCSV(&buf, runs[0]); err != nil {
		t.Fatal(err)
	}
	want := "t_ns,time_s,gpu2_used_bytes,gpu2_driver_reserved_bytes,gpu2_allocated_bytes,gpu2_reserved_bytes\n" +
		"1000,0.000001,,,3,4\n3000,0.000003,,,5,8\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}
