package storage

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/memrec/memrec/internal/tracegen"
)

// benchRun imports a generated run (8 GPUs at 100 Hz with per-process and
// allocator samples and step marks) and returns the database, the run and
// the number of JSON lines.
func benchRun(b *testing.B, d time.Duration) (*DB, Run, int) {
	b.Helper()
	var buf bytes.Buffer
	c := tracegen.Default()
	c.Duration = d
	truth, err := tracegen.Write(&buf, c)
	if err != nil {
		b.Fatal(err)
	}
	db, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	runs, err := db.Import([]Source{{Name: "gen", R: &buf}}, ImportOptions{})
	if err != nil {
		b.Fatal(err)
	}
	return db, runs[0], truth.Lines
}

// BenchmarkDecodeRun reads every series of a stored run through the
// iterators, bbolt reads included. Run with -cpu 1 for one core.
func BenchmarkDecodeRun(b *testing.B) {
	db, r, _ := benchRun(b, 2*time.Minute)
	series, err := db.Series(r)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	var sum int64 // every sample is read out, not only counted
	for b.Loop() {
		for _, s := range series {
			switch s.Kind {
			case "device":
				it := db.DeviceSamples(r, s.GPU, MinTime, MaxTime)
				for it.Next() {
					sum += it.At().Used
					n++
				}
			case "proc":
				it := db.ProcSamples(r, s.GPU, s.PID, MinTime, MaxTime)
				for it.Next() {
					sum += it.At().Used
					n++
				}
			case "torch":
				it := db.TorchSamples(r, s.GPU, s.PID, MinTime, MaxTime)
				for it.Next() {
					sum += it.At().Allocated
					n++
				}
			}
		}
		it := db.Marks(r, MinTime, MaxTime)
		for it.Next() {
			sum += int64(it.At().Step)
			n++
		}
	}
	if sum == 0 {
		b.Fatal("nothing read")
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "Msamples/s")
}

// BenchmarkImport imports a 2-minute 8-GPU run from memory; it reports
// lines per second and stored bytes per line.
func BenchmarkImport(b *testing.B) {
	var buf bytes.Buffer
	c := tracegen.Default()
	c.Duration = 2 * time.Minute
	truth, err := tracegen.Write(&buf, c)
	if err != nil {
		b.Fatal(err)
	}
	var size int64
	for b.Loop() {
		db, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.Import([]Source{{Name: "gen", R: bytes.NewReader(buf.Bytes())}}, ImportOptions{}); err != nil {
			b.Fatal(err)
		}
		size, _ = db.Size()
		db.Close()
	}
	b.ReportMetric(float64(truth.Lines*b.N)/b.Elapsed().Seconds()/1e6, "Mlines/s")
	b.ReportMetric(float64(size)/float64(truth.Lines), "B/line")
}
