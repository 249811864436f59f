package csv

import (
	"bytes"
	stdcsv "encoding/csv"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// TestExportCSV: one row per tick; the latest epoch and step marks, of the
// run and of each of its two ranks; allocator sums over a GPU's processes
// holding their last value; per-process columns from the GPU's newest list;
// empty cells where there is no value (a driver-reserved 0 is "not
// reported"). The expected table is worked out by hand from the input.
func TestExportCSV(t *testing.T) {
	db := openTestDB(t)
	in := `{"type":"run","name":"c","start_ns":1000000000}
{"type":"gpu","gpu":0}
{"type":"gpu","gpu":1}
{"type":"mark","t_ns":1000000000,"kind":"epoch_start","epoch":0,"rank":0}
{"type":"mark","t_ns":1000000000,"kind":"epoch_start","epoch":0,"rank":1}
{"type":"sample","t_ns":1000000000,"gpu":0,"used_bytes":100,"driver_reserved_bytes":7}
{"type":"sample","t_ns":1000000000,"gpu":1,"used_bytes":200}
{"type":"proc","t_ns":1000000000,"gpu":0,"pid":10,"used_bytes":50}
{"type":"torch","t_ns":1005000000,"gpu":0,"pid":10,"allocated_bytes":30,"reserved_bytes":40,"peak_allocated_bytes":35,"inactive_split_bytes":3,"alloc_retries":1,"device_allocs":4}
{"type":"mark","t_ns":1008000000,"kind":"step","step":0,"rank":0}
{"type":"sample","t_ns":1010000000,"gpu":0,"used_bytes":110,"driver_reserved_bytes":7}
{"type":"mark","t_ns":1012000000,"kind":"step","step":0,"rank":1}
{"type":"torch","t_ns":1015000000,"gpu":0,"pid":11,"allocated_bytes":5,"reserved_bytes":6,"peak_allocated_bytes":5,"inactive_split_bytes":1,"device_allocs":2}
{"type":"mark","t_ns":1018000000,"kind":"step","step":1,"rank":0}
{"type":"torch","t_ns":1020000000,"gpu":0,"pid":10,"allocated_bytes":31,"reserved_bytes":40,"peak_allocated_bytes":33,"inactive_split_bytes":2,"alloc_retries":1,"device_allocs":6,"device_frees":1}
{"type":"sample","t_ns":1020000000,"gpu":0,"used_bytes":120,"driver_reserved_bytes":7}
{"type":"sample","t_ns":1020000000,"gpu":1,"used_bytes":220,"driver_reserved_bytes":7}
{"type":"proc","t_ns":1020000000,"gpu":0,"pid":10,"used_bytes":60}
{"type":"proc","t_ns":1020000000,"gpu":0,"pid":11,"used_bytes":20}
`
	runs, err := importString(db, "in", in, storage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Export(&buf, db, runs[0], Options{Procs: true}); err != nil {
		t.Fatal(err)
	}
	rows, err := stdcsv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%s", err, buf.String())
	}
	// The counters' cells (alloc_retries … of the field table), summed over
	// the GPU's processes like the figures; a counter not in the input is 0
	// once the GPU has a report.
	counts := func(gpu int, v map[string]int) (head, cells, empty string) {
		for _, f := range wire.Counters(wire.TorchFields) {
			head += fmt.Sprintf(",gpu%d_%s", gpu, f.Name)
			cells += fmt.Sprintf(",%d", v[f.Name])
			empty += ","
		}
		return head, cells, empty
	}
	head0, _, none := counts(0, nil)
	head1, _, _ := counts(1, nil)
	_, at1010, _ := counts(0, map[string]int{"alloc_retries": 1, "device_allocs": 4})
	// pid 11's 2 device allocations join pid 10's 6; pid 10's retry is the one it had
	_, at1020, _ := counts(0, map[string]int{"alloc_retries": 1, "device_allocs": 8, "device_frees": 1})
	want := []string{
		"t_ns,time_s,time,epoch,step,epoch_rank0,step_rank0,epoch_rank1,step_rank1," +
			"gpu0_used_bytes,gpu0_driver_reserved_bytes,gpu0_allocated_bytes,gpu0_reserved_bytes,gpu0_step_peak_allocated_bytes,gpu0_inactive_split_bytes" + head0 + ",gpu0_pid10_used_bytes,gpu0_pid11_used_bytes," +
			"gpu1_used_bytes,gpu1_driver_reserved_bytes,gpu1_allocated_bytes,gpu1_reserved_bytes,gpu1_step_peak_allocated_bytes,gpu1_inactive_split_bytes" + head1,
		// epoch 0 on both ranks, no step yet, no allocator report; GPU 1's driver does not say
		"1000000000,0.000000,1970-01-01T00:00:01.000000Z,0,-1,0,-1,0,-1,100,7,,,," + none + ",50,,200,,,,," + none,
		// rank 0 finished step 0; pid 10 reported at 1.005 s; GPU 1 missed this tick
		"1010000000,0.010000,1970-01-01T00:00:01.010000Z,0,0,0,0,0,-1,110,7,30,40,35,3" + at1010 + ",50,,,,,,," + none,
		// rank 0 at step 1, rank 1 at step 0; pid 11 joined (5/6/5/1), pid 10 moved (31/40/33/2); a new process list
		"1020000000,0.020000,1970-01-01T00:00:01.020000Z,0,1,0,1,0,0,120,7,36,46,38,3" + at1020 + ",60,20,220,7,,,," + none,
	}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d:\n%s", len(rows), len(want), buf.String())
	}
	for i := range want {
		if got := strings.Join(rows[i], ","); got != want[i] {
			t.Errorf("row %d:\n got %s\nwant %s", i, got, want[i])
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
	runs, err := importString(db, "in", in, storage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Export(&buf, db, runs[0], Options{}); err != nil {
		t.Fatal(err)
	}
	var head, zeros string
	for _, f := range wire.Counters(wire.TorchFields) {
		head += ",gpu2_" + f.Name
		zeros += ",0"
	}
	want := "t_ns,time_s,time,epoch,step,gpu2_used_bytes,gpu2_driver_reserved_bytes,gpu2_allocated_bytes,gpu2_reserved_bytes,gpu2_step_peak_allocated_bytes,gpu2_inactive_split_bytes" + head + "\n" +
		"1000,0.000001,1970-01-01T00:00:00.000001Z,-1,-1,,,3,4,0,0" + zeros + "\n3000,0.000003,1970-01-01T00:00:00.000003Z,-1,-1,,,5,8,0,0" + zeros + "\n"
	if buf.String() != want {
		t.Errorf("got\n%s\nwant\n%s", buf.String(), want)
	}
}

// TestCSVCountersFollowTheTable: a counter row added to the table is a
// column of each GPU, summed over its processes, with no edit of csv.go
// (a throwaway row reading the segments: 3 + 2).
func TestCSVCountersFollowTheTable(t *testing.T) {
	saved := csvCounters
	defer func() { csvCounters = saved }()
	csvCounters = append(wire.Counters(wire.TorchFields), wire.Field[storage.TorchSample]{Name: "throwaway_counts", Stat: "num_throwaway",
		Get: func(s storage.TorchSample) int64 { return s.Segments }})
	db := openTestDB(t)
	runs, err := importString(db, "in", `{"type":"run","name":"a","start_ns":0}
{"type":"gpu","gpu":0}
{"type":"torch","t_ns":1000,"gpu":0,"pid":1,"allocated_bytes":3,"reserved_bytes":4,"segments":3}
{"type":"torch","t_ns":2000,"gpu":0,"pid":2,"allocated_bytes":3,"reserved_bytes":4,"segments":2}
`, storage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := Export(&buf, db, runs[0], Options{}); err != nil {
		t.Fatal(err)
	}
	rows, err := stdcsv.NewReader(&buf).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(rows[0], "gpu0_throwaway_counts")
	if i < 0 || rows[1][i] != "3" || rows[2][i] != "5" {
		t.Errorf("no column gpu0_throwaway_counts of 3 then 5:\n%s", buf.String())
	}
}

// budgetRun (as in storage's budget test) is a run whose allocator samples carry the watched model's
// budget on some lines and not on others (before watch, another process).
const budgetRun = `{"type":"run","name":"watched","start_ns":1000000000}
{"type":"gpu","gpu":0,"total_bytes":1000000000}
{"type":"torch","t_ns":1001000000,"gpu":0,"pid":7,"rank":0,"allocated_bytes":5000,"reserved_bytes":8192,"active_bytes":5000,"inactive_split_bytes":0,"peak_allocated_bytes":6000,"segments":1,"alloc_retries":0,"ooms":0}
{"type":"torch","t_ns":1002000000,"gpu":0,"pid":7,"rank":0,"allocated_bytes":5000,"reserved_bytes":8192,"active_bytes":5000,"inactive_split_bytes":0,"peak_allocated_bytes":7000,"segments":1,"alloc_retries":0,"ooms":0,"params_bytes":1024,"grads_bytes":1024,"optimizer_bytes":2048,"buffers_bytes":32,"params":256,"trainable":256,"autocast":false,"grads_at_forward":false,"optimizer":"AdamW","optimizer_state":"exp_avg,exp_avg_sq","dtype":"float32"}
{"type":"torch","t_ns":1003000000,"gpu":0,"pid":7,"rank":0,"allocated_bytes":5000,"reserved_bytes":8192,"active_bytes":5000,"inactive_split_bytes":0,"peak_allocated_bytes":7000,"segments":1,"alloc_retries":0,"ooms":0,"params_bytes":1024,"grads_bytes":0,"optimizer_bytes":2048,"buffers_bytes":32,"params":256,"trainable":256,"autocast":true}
{"type":"torch","t_ns":1003000000,"gpu":0,"pid":8,"allocated_bytes":10,"reserved_bytes":20,"active_bytes":10,"inactive_split_bytes":0,"peak_allocated_bytes":10,"segments":1,"alloc_retries":0,"ooms":0}
`

// TestBudgetCSV: a run with a budget has its four columns per GPU, each
// holding the last value of each process's budget, summed over the GPU's
// processes (here one, watched from its second sample on).
func TestBudgetCSV(t *testing.T) {
	db := openTestDB(t)
	runs, err := importString(db, "budget.jsonl", budgetRun, storage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Export(&out, db, runs[0], Options{}); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	head := strings.Split(lines[0], ",")
	at := map[string]int{}
	for i, h := range head {
		at[h] = i
	}
	cols := []string{"gpu0_params_bytes", "gpu0_grads_bytes", "gpu0_optimizer_bytes", "gpu0_buffers_bytes"}
	// One row per allocator sample time (no device samples): before the
	// watch, then the two watched samples (the second with the other process).
	for i, want := range [][]string{{"", "", "", ""}, {"1024", "1024", "2048", "32"}, {"1024", "0", "2048", "32"}} {
		row := strings.Split(lines[1+i], ",")
		if len(row) != len(head) {
			t.Fatalf("row %d has %d cells, the header %d", i+1, len(row), len(head))
		}
		for k, c := range cols {
			j, ok := at[c]
			if !ok {
				t.Fatalf("header %v lacks %s", head, c)
			}
			if row[j] != want[k] {
				t.Errorf("row %d %s = %q, want %q", i+1, c, row[j], want[k])
			}
		}
	}
}

// openTestDB opens a fresh database in a temporary folder and checks on
// cleanup that every chunk in it decodes.
func openTestDB(t testing.TB) *storage.DB {
	t.Helper()
	db, err := storage.Open(filepath.Join(t.TempDir(), "test.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Check(); err != nil {
			t.Errorf("consistency check: %v", err)
		}
		db.Close()
	})
	return db
}

func importString(db *storage.DB, name, s string, opts storage.ImportOptions) ([]storage.Run, error) {
	return db.Import([]storage.Source{{Name: name, R: strings.NewReader(s)}}, opts)
}
