package duckdbtest

import (
	"bytes"
	"compress/gzip"
	"context"
	"database/sql"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/formats/parquet"
	"github.com/memrec/memrec/storage"
)

// importFixture imports a real H200 run (the project's test data) into a
// new database.
func importFixture(t *testing.T, name string) (*storage.DB, storage.Run) {
	t.Helper()
	return importFile(t, filepath.Join("..", "..", "..", "storage", "testdata", name+".jsonl.gz"), name)
}

// importFile imports the gzipped JSON Lines file path into a new database.
func importFile(t *testing.T, path, name string) (*storage.DB, storage.Run) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	db, err := storage.Open(filepath.Join(t.TempDir(), "m.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	runs, err := db.Import([]storage.Source{{Name: name, R: bytes.NewReader(data)}}, storage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return db, runs[0]
}

func duck(t *testing.T) *sql.DB {
	t.Helper()
	d, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestDuckDBReadsTheExport: every table of two runs exported into one
// folder reads back in DuckDB as one dataset with hive partitions: row
// counts equal the stored counts, every device and allocator value equals
// the stored one, and the host/run partition columns name the runs.
func TestDuckDBReadsTheExport(t *testing.T) {
	db, r := importFixture(t, "real-resnet18-bs64-leak")
	db2, r2 := importFixture(t, "real-resnet18-bs128")
	dir := t.TempDir()
	st, err := parquet.Export(context.Background(), db, r, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := parquet.Export(context.Background(), db2, r2, dir); err != nil {
		t.Fatal(err)
	}
	d := duck(t)
	scan := func(table string) string {
		return "read_parquet('" + filepath.Join(dir, table, "*", "*", "*.parquet") + "', hive_partitioning = true)"
	}
	count := func(q string) int64 {
		var n int64
		if err := d.QueryRow(q).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	for table, want := range map[string]int64{"device": r.Counts.Samples, "process": r.Counts.ProcSamples,
		"allocator": r.Counts.TorchSamples, "marks": r.Counts.Marks, "runs": 1, "gpus": int64(len(r.GPUs))} {
		got := count("SELECT count(*) FROM " + scan(table) + " WHERE run = '" + r.Name + "'")
		if got != want || st.Rows[table] != want {
			t.Errorf("%s: DuckDB reads %d rows, export says %d, the database holds %d", table, got, st.Rows[table], want)
		}
	}
	if n := count("SELECT count(DISTINCT run) FROM " + scan("device") + " WHERE host = 'vm'"); n != 2 {
		t.Errorf("runs in the dataset: %d, want 2", n)
	}

	// Every device row, in time order, as stored.
	rows, err := d.Query("SELECT t_ns, epoch_ns(time), gpu, used_bytes, driver_reserved_bytes FROM " + scan("device") +
		" WHERE run = '" + r.Name + "' ORDER BY t_ns, gpu")
	if err != nil {
		t.Fatal(err)
	}
	it := db.DeviceSamples(r, 0, storage.MinTime, storage.MaxTime)
	n := 0
	for rows.Next() {
		var tns, tt, used int64
		var gpu int
		var resv sql.NullInt64
		if err := rows.Scan(&tns, &tt, &gpu, &used, &resv); err != nil {
			t.Fatal(err)
		}
		if !it.Next() {
			t.Fatal("DuckDB has more device rows than the database")
		}
		s := it.At()
		if tns != s.T || tt != s.T || gpu != s.GPU || used != s.Used || resv.Int64 != s.Reserved || resv.Valid != (s.Reserved != 0) {
			t.Fatalf("row %d: DuckDB (%d %d %d %d %v), stored %+v", n, tns, tt, gpu, used, resv, s)
		}
		n++
	}
	rows.Close()
	if it.Next() || n == 0 {
		t.Fatalf("DuckDB read %d device rows; the database has more", n)
	}

	// The allocator's values, summed by DuckDB and here.
	var alloc, peak, split int64
	if err := d.QueryRow("SELECT sum(allocated_bytes), max(step_peak_allocated_bytes), sum(inactive_split_bytes) FROM "+scan("allocator")+
		" WHERE run = '"+r.Name+"'").Scan(&alloc, &peak, &split); err != nil {
		t.Fatal(err)
	}
	var wa, wp, ws int64
	series, _ := db.Series(r)
	for _, s := range series {
		if s.Kind != storage.SeriesTorch {
			continue
		}
		ti := db.TorchSamples(r, s.GPU, s.PID, storage.MinTime, storage.MaxTime)
		for ti.Next() {
			x := ti.At()
			wa, wp, ws = wa+x.Allocated, max(wp, x.PeakAllocated), ws+x.InactiveSplit
		}
	}
	if alloc != wa || peak != wp || split != ws || wa == 0 {
		t.Errorf("allocator: DuckDB sum %d, max peak %d, sum split %d; stored %d, %d, %d", alloc, peak, split, wa, wp, ws)
	}
	var name, tags string
	if err := d.QueryRow("SELECT run_name, tags_json FROM "+scan("runs")+" WHERE run = '"+r.Name+"'").Scan(&name, &tags); err != nil {
		t.Fatal(err)
	}
	if name != r.Name || !strings.Contains(tags, `"leak":"yes"`) {
		t.Errorf("runs: %q %s", name, tags)
	}
}

// EpochDeltasSQL is docs/interop.md's DuckDB query: each epoch's change of
// device used and allocated memory, from the floor (lowest sample) after its
// first step to the floor after its last, as memrec analyze defines them
// (docs/analysis.md); a step's rows are those whose step column names it.
const EpochDeltasSQL = `
WITH du AS (SELECT run, step, arg_min(epoch, t_ns) AS epoch, min(used_bytes) AS lo
            FROM read_parquet('DIR/device/*/*/*.parquet', hive_partitioning = true) WHERE step >= 0 GROUP BY run, step),
     da AS (SELECT run, step, arg_min(epoch, t_ns) AS epoch, min(allocated_bytes) AS lo
            FROM read_parquet('DIR/allocator/*/*/*.parquet', hive_partitioning = true) WHERE step >= 0 GROUP BY run, step),
     eu AS (SELECT run, epoch, arg_max(lo, step) - arg_min(lo, step) AS delta FROM du WHERE epoch >= 0 GROUP BY run, epoch),
     ea AS (SELECT run, epoch, arg_max(lo, step) - arg_min(lo, step) AS delta FROM da WHERE epoch >= 0 GROUP BY run, epoch)
SELECT eu.run, eu.epoch, eu.delta AS delta_used_bytes, ea.delta AS delta_allocated_bytes
FROM eu JOIN ea USING (run, epoch) ORDER BY eu.run, eu.epoch`

// TestDuckDBEpochDeltasEqualAnalyze: the per-epoch deltas DuckDB computes
// from the Parquet tables equal memrec analyze's, epoch by epoch, on a real
// single-GPU run with a planted leak (the allocator grows 256 000 B a step).
func TestDuckDBEpochDeltasEqualAnalyze(t *testing.T) {
	db, r := importFixture(t, "real-resnet18-bs64-leak")
	dir := t.TempDir()
	if _, err := parquet.Export(context.Background(), db, r, dir); err != nil {
		t.Fatal(err)
	}
	rep, err := analysis.Analyze(db, r, analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := rep.GPUs[0].Epochs
	rows, err := duck(t).Query(strings.ReplaceAll(EpochDeltasSQL, "DIR", dir))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for ; rows.Next(); i++ {
		var run string
		var epoch int
		var du, da sql.NullInt64
		if err := rows.Scan(&run, &epoch, &du, &da); err != nil {
			t.Fatal(err)
		}
		if i >= len(want) {
			t.Fatalf("DuckDB has epoch %d; analyze has %d epochs", epoch, len(want))
		}
		e := want[i]
		// Device used exactly; allocated within 3 %: analyze sums each
		// process's last report at a step's floor, the query reads one row
		// at a time, so the two can pick floors a few steps apart.
		if epoch != e.Epoch || e.DeltaUsedBytes == nil || e.DeltaAllocatedBytes == nil ||
			du.Int64 != *e.DeltaUsedBytes || math.Abs(float64(da.Int64-*e.DeltaAllocatedBytes)) > 0.03*math.Abs(float64(*e.DeltaAllocatedBytes)) {
			t.Errorf("epoch %d: DuckDB Δused %v Δallocated %v; analyze epoch %d Δused %v Δallocated %v",
				epoch, du, da, e.Epoch, deref(e.DeltaUsedBytes), deref(e.DeltaAllocatedBytes))
		}
		t.Logf("epoch %d: Δused %d B, Δallocated %d B (DuckDB and analyze)", epoch, du.Int64, da.Int64)
	}
	if i != len(want) || i < 3 {
		t.Errorf("DuckDB gives %d epochs, analyze %d", i, len(want))
	}
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

// TestDuckDBTypesAndNames: DuckDB reads time as a UTC timestamp, epoch and
// step on every device and allocator row, and the exact run names from
// run_name; a numeric run name read from the partition is a string with
// hive_types_autocast = false (docs/interop.md), and an escaped name
// (bs 64/amp) keeps its own partition.
func TestDuckDBTypesAndNames(t *testing.T) {
	db, r := importFixture(t, "real-resnet18-bs64-leak")
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "storage", "testdata", "real-resnet18-bs128.jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	var runs []storage.Run
	for _, name := range []string{"20261207", "bs 64/amp", "bs_64_amp"} {
		zr, _ := gzip.NewReader(bytes.NewReader(data))
		rs, err := db.Import([]storage.Source{{Name: name, R: zr}}, storage.ImportOptions{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, rs[0])
	}
	dir := t.TempDir()
	d := parquet.NewDataset(dir)
	for _, x := range append(runs, r) {
		if _, err := d.Export(context.Background(), db, x); err != nil {
			t.Fatal(err)
		}
	}
	duckdb := duck(t)
	scan := func(table, opts string) string {
		return "read_parquet('" + filepath.Join(dir, table, "*", "*", "*.parquet") + "', hive_partitioning = true" + opts + ")"
	}
	var tt, rn, et, st string
	if err := duckdb.QueryRow("SELECT typeof(time), typeof(run_name), typeof(epoch), typeof(step) FROM "+scan("device", "")+" LIMIT 1").
		Scan(&tt, &rn, &et, &st); err != nil {
		t.Fatal(err)
	}
	if tt != "TIMESTAMP WITH TIME ZONE" || rn != "VARCHAR" || et != "INTEGER" || st != "BIGINT" {
		t.Errorf("device types: time %s, run_name %s, epoch %s, step %s", tt, rn, et, st)
	}
	for _, table := range []string{"device", "allocator"} {
		var nulls, epochs int64
		if err := duckdb.QueryRow("SELECT count(*) FILTER (epoch IS NULL OR step IS NULL), count(DISTINCT epoch) FROM "+scan(table, "")+
			" WHERE run_name = '"+r.Name+"'").Scan(&nulls, &epochs); err != nil {
			t.Fatal(err)
		}
		if nulls != 0 || epochs != 5 {
			t.Errorf("%s: %d rows without epoch or step, %d epochs (want 0; -1 and 0..3)", table, nulls, epochs)
		}
	}
	var runType string
	var n int64
	if err := duckdb.QueryRow("SELECT any_value(typeof(run)), count(*) FROM "+scan("device", ", hive_types_autocast = false")+
		" WHERE run = '20261207'").Scan(&runType, &n); err != nil {
		t.Fatal(err)
	}
	if runType != "VARCHAR" || n != runs[0].Counts.Samples {
		t.Errorf("run=20261207 with hive_types_autocast = false: %s, %d rows; want VARCHAR, %d", runType, n, runs[0].Counts.Samples)
	}
	for _, x := range runs {
		var part string
		if err := duckdb.QueryRow("SELECT any_value(run::VARCHAR), count(*) FROM "+scan("device", ", hive_types_autocast = false")+
			" WHERE run_name = ?", x.Name).Scan(&part, &n); err != nil {
			t.Fatal(err)
		}
		// DuckDB decodes the escaped value, as Spark and Hive do.
		if n != x.Counts.Samples || part != x.Name {
			t.Errorf("run_name %q: %d device rows in partition %q, want %d in %q", x.Name, n, part, x.Counts.Samples, x.Name)
		}
	}
}
