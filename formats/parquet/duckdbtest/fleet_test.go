package duckdbtest

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/formats/parquet"
	"github.com/memrec/memrec/storage"
)

// FleetViews name the tables of an export folder DIR for the fleet
// queries (docs/interop.md): hive_types_autocast off, so a run named
// 20261207 stays a string.
const FleetViews = `
CREATE VIEW runs AS SELECT * FROM read_parquet('DIR/runs/*/*/*.parquet', hive_partitioning = true, hive_types_autocast = false);
CREATE VIEW gpus AS SELECT * FROM read_parquet('DIR/gpus/*/*/*.parquet', hive_partitioning = true, hive_types_autocast = false);
CREATE VIEW device AS SELECT * FROM read_parquet('DIR/device/*/*/*.parquet', hive_partitioning = true, hive_types_autocast = false);
CREATE VIEW allocator AS SELECT * FROM read_parquet('DIR/allocator/*/*/*.parquet', hive_partitioning = true, hive_types_autocast = false);`

// FleetQueries are docs/interop.md's fleet queries, in DuckDB's SQL (the
// Spark SQL forms are beside them there).
var FleetQueries = []struct{ Name, SQL string }{
	// The peak of each model and batch size over its runs: each run's
	// highest device memory on any GPU, then their median and highest.
	{"peak by model and batch size", `
WITH peak AS (SELECT host_name, run_name, max(used_bytes) AS peak FROM device GROUP BY ALL)
SELECT json_extract_string(r.tags_json, '$.model') AS model,
       json_extract_string(r.tags_json, '$.batch_size')::BIGINT AS batch_size,
       count(*) AS runs, median(p.peak)::BIGINT AS median_peak_bytes, max(p.peak) AS max_peak_bytes
FROM peak p JOIN runs r USING (host_name, run_name)
GROUP BY ALL ORDER BY model, batch_size`},
	// Runs whose allocated memory grew: the last epoch's lowest against
	// epoch 1's (epoch 0 holds the warm-up), by more than 64 MiB on a GPU.
	// The lowest is allocated between steps (the probe samples at each
	// step's end); the highest is whichever sample caught a step's
	// activation peak, and moves with where the samples fall in the step.
	{"runs that grew", `
WITH e AS (SELECT host_name, run_name, gpu, epoch, min(allocated_bytes) AS lo FROM allocator WHERE epoch >= 1 GROUP BY ALL),
     g AS (SELECT host_name, run_name, gpu, arg_max(lo, epoch) - arg_min(lo, epoch) AS grew_bytes, max(epoch) AS epochs
           FROM e GROUP BY ALL HAVING count(*) >= 2)
SELECT host_name, run_name, max(grew_bytes) AS grew_bytes FROM g
GROUP BY ALL HAVING max(grew_bytes) > 64 * 1024 * 1024 ORDER BY grew_bytes DESC`},
	// Runs near their GPU's limit: device memory at 90 % of the GPU's or more.
	{"runs near the limit", `
SELECT d.host_name, d.run_name, d.gpu, max(d.used_bytes) AS peak_bytes, any_value(g.total_bytes) AS total_bytes,
       round(max(d.used_bytes) / any_value(g.total_bytes), 3) AS share
FROM device d JOIN gpus g USING (host_name, run_name, gpu)
GROUP BY ALL HAVING max(d.used_bytes) >= 0.9 * any_value(g.total_bytes) ORDER BY share DESC`},
	// Memory PyTorch does not see, per host: at each step of each GPU, the
	// highest device memory less the highest the allocator reserved.
	{"not seen by PyTorch per host", `
WITH dv AS (SELECT host_name, run_name, gpu, step, max(used_bytes) AS used FROM device WHERE step >= 0 GROUP BY ALL),
     al AS (SELECT host_name, run_name, gpu, step, max(reserved_bytes) AS reserved FROM allocator WHERE step >= 0 GROUP BY ALL)
SELECT host_name, count(DISTINCT run_name) AS runs, avg(used - reserved)::BIGINT AS avg_unseen_bytes,
       max(used - reserved) AS max_unseen_bytes
FROM dv JOIN al USING (host_name, run_name, gpu, step) GROUP BY ALL ORDER BY host_name`},
}

func openFleet(t *testing.T, dir string) *sql.DB {
	t.Helper()
	d := duck(t)
	for _, v := range strings.Split(strings.TrimSpace(strings.ReplaceAll(FleetViews, "DIR", dir)), "\n") {
		if _, err := d.Exec(v); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
	}
	return d
}

func queryRows(t *testing.T, d *sql.DB, q string) [][]any {
	t.Helper()
	rows, err := d.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	cols, _ := rows.Columns()
	var out [][]any
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		out = append(out, vals)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFleetQueries: the fleet queries over two real runs (a leaking one
// and a clean one, both resnet18) give the figures worked out here from
// the database: each run's peak, the leaking run alone as grown. With
// MEMREC_FLEET_DIR set (bench/perf/fleet.sh) it times them over that
// folder instead.
func TestFleetQueries(t *testing.T) {
	if dir := os.Getenv("MEMREC_FLEET_DIR"); dir != "" {
		d := openFleet(t, dir)
		for _, q := range FleetQueries {
			queryRows(t, d, q.SQL) // warm-up: the file footers
			var times []time.Duration
			var n int
			for range 3 {
				start := time.Now()
				n = len(queryRows(t, d, q.SQL))
				times = append(times, time.Since(start))
			}
			slices.Sort(times)
			t.Logf("query %q: %.3f s (median of 3), %d rows", q.Name, times[1].Seconds(), n)
		}
		return
	}
	db, leak := importFixture(t, "real-resnet18-bs64-leak")
	db2, clean := importFixture(t, "real-resnet18-bs128")
	// memrec record --source sim --sim-gpus 4 --sim-clock fake --duration
	// 20s, exported: no leak, but its ranks step a little slower than the
	// samples come, so an epoch's highest sample moves through the step's
	// activations, higher in the last epoch than in the first on GPU 3.
	db3, sim := importFile(t, filepath.Join("testdata", "sim-4gpu-none.jsonl.gz"), "sim")
	dir := t.TempDir()
	ds := parquet.NewDataset(dir)
	for _, x := range []struct {
		db *storage.DB
		r  storage.Run
	}{{db, leak}, {db2, clean}, {db3, sim}} {
		if _, err := ds.Export(context.Background(), x.db, x.r); err != nil {
			t.Fatal(err)
		}
	}
	d := openFleet(t, dir)
	peakOf := func(db *storage.DB, r storage.Run) int64 {
		var p int64
		it := db.DeviceSamples(r, 0, storage.MinTime, storage.MaxTime)
		for it.Next() {
			p = max(p, it.At().Used)
		}
		return p
	}
	got := slices.DeleteFunc(queryRows(t, d, FleetQueries[0].SQL), func(r []any) bool { return r[0] == nil }) // the sim has no model tag
	want := [][]any{{"resnet18", int64(64), int64(1), peakOf(db, leak), peakOf(db, leak)},
		{"resnet18", int64(128), int64(1), peakOf(db2, clean), peakOf(db2, clean)}}
	if len(got) != 2 {
		t.Fatalf("peak by model and batch size: %v, want %v", got, want)
	}
	for i := range want {
		for j := range want[i] {
			if g, ok := got[i][j].(int64); ok && g != want[i][j] || !ok && got[i][j] != want[i][j] {
				t.Errorf("peak by model and batch size row %d: %v, want %v", i, got[i], want[i])
				break
			}
		}
	}
	grew := queryRows(t, d, FleetQueries[1].SQL)
	if len(grew) != 1 || grew[0][1] != leak.Name {
		t.Errorf("runs that grew: %v, want %s alone", grew, leak.Name)
	}
	if near := queryRows(t, d, FleetQueries[2].SQL); len(near) != 0 { // both peak far under an H200's 141 GB
		t.Errorf("runs near the limit: %v, want none", near)
	}
	hosts := queryRows(t, d, FleetQueries[3].SQL)
	if len(hosts) != 1 || hosts[0][0] != "vm" || hosts[0][1] != int64(3) {
		t.Errorf("not seen by PyTorch per host: %v, want host vm, 3 runs", hosts)
	}
}
