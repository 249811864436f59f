package storage

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// benchRun imports a generated run (8 GPUs at 100 Hz with per-process and
// allocator samples and step marks) and returns the database, the run and
// the number of JSON lines.
func benchRun(b *testing.B, d time.Duration) (*DB, Run, int) {
	b.Helper()
	c := tracegen.Default()
	c.Duration = d
	return importTrace(b, c)
}

// importTrace imports the run c generates into a fresh file, closed when
// the test ends, and returns the database, the run and its JSON lines.
func importTrace(tb testing.TB, c tracegen.Config) (*DB, Run, int) {
	tb.Helper()
	var buf bytes.Buffer
	truth, err := tracegen.Write(&buf, c)
	if err != nil {
		tb.Fatal(err)
	}
	db, err := Open(filepath.Join(tb.TempDir(), "gen.db"), Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	runs, err := loadLines(db, "gen", &buf, "")
	if err != nil {
		tb.Fatal(err)
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

// BenchmarkAppenderSecond is the recorder's storage cost for one second of
// recording: the device samples of that second appended, then the commit
// that writes them. Each case starts from a long run's steady state, where
// the open chunk is full. Its time per op is the share of a core storage
// takes: 10 ms/op = 1 %. The count-sealed cases are the baseline: open
// chunks sealed by count alone, as imports do.
func BenchmarkAppenderSecond(b *testing.B) {
	for _, c := range []struct {
		name       string
		gpus, rate int
	}{{"8gpu-1kHz", 8, 1000}, {"1gpu-1kHz", 1, 1000}, {"1gpu-100Hz", 1, 100}} {
		for _, countOnly := range []bool{false, true} {
			name := c.name
			if countOnly {
				name += "-count-sealed"
			}
			b.Run(name, func(b *testing.B) {
				db, err := Open(filepath.Join(b.TempDir(), "append.db"), Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				var gpus []GPU
				for g := 0; g < c.gpus; g++ {
					gpus = append(gpus, GPU{Index: g})
				}
				a, err := db.NewAppender(Run{Name: "bench", GPUs: gpus}, AppendOptions{CommitInterval: -1})
				if err != nil {
					b.Fatal(err)
				}
				defer a.Close()
				a.countSealOnly = countOnly
				t, step := int64(0), int64(time.Second)/int64(c.rate)
				second := func() {
					for k := 0; k < c.rate; k++ {
						t += step
						for g := 0; g < c.gpus; g++ {
							used := int64(20<<30) + int64(g)<<20 + (t/1e9%7)<<21 // moves every second
							if err := a.AppendDevice(DeviceSample{T: t, GPU: g, Used: used, Reserved: 512 << 20}); err != nil {
								b.Fatal(err)
							}
						}
					}
					if err := a.Commit(); err != nil {
						b.Fatal(err)
					}
				}
				for warm := 0; warm < 3*chunkEntries/(c.gpus*c.rate); warm++ {
					second()
				}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					second()
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/1e7, "%core")
			})
		}
	}
}

// BenchmarkMixes imports each generated mix (8 GPUs at 100 Hz for 10
// minutes, see tracegen.Mix) and each real H200 run, and reports the stored
// bytes per JSON line (the file as closed: bbolt's pages included) and the
// import speed. Each round imports into a new file.
func BenchmarkMixes(b *testing.B) {
	inputs := map[string]func() []byte{}
	var names []string
	for _, m := range tracegen.Mixes {
		names = append(names, m)
		inputs[m] = func() []byte {
			c, err := tracegen.Mix(m)
			if err != nil {
				b.Fatal(err)
			}
			var buf bytes.Buffer
			if _, err := tracegen.Write(&buf, c); err != nil {
				b.Fatal(err)
			}
			return buf.Bytes()
		}
	}
	for _, r := range []string{fixtures.CleanRun, fixtures.LeakRun} {
		names = append(names, r)
		inputs[r] = func() []byte { return fixtures.Read(b, r) }
	}
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			in := inputs[name]()
			lines := bytes.Count(in, []byte("\n"))
			var size int64
			for b.Loop() {
				db, err := Open(filepath.Join(b.TempDir(), "bench.db"), Options{})
				if err != nil {
					b.Fatal(err)
				}
				if _, err := loadLines(db, name, bytes.NewReader(in), ""); err != nil {
					b.Fatal(err)
				}
				if size, err = db.Size(); err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
			b.ReportMetric(float64(size)/float64(lines), "B/line")
			b.ReportMetric(float64(lines*b.N)/b.Elapsed().Seconds()/1e6, "Mlines/s")
		})
	}
}

// BenchmarkBlocksRun reads every series of a stored run as blocks, the
// way the analysis does (each device and process series on its own, though
// they share the device group's chunks), and reports samples a second.
func BenchmarkBlocksRun(b *testing.B) {
	db, r, _ := benchRun(b, 2*time.Minute)
	series, err := db.Series(r)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	var sum int64 // every block's times and first column are read
	for b.Loop() {
		for _, s := range series {
			var bl *Blocks
			switch s.Kind {
			case "device":
				bl = db.DeviceBlocks(r, s.GPU, MinTime, MaxTime)
			case "proc":
				bl = db.ProcBlocks(r, s.GPU, s.PID, MinTime, MaxTime)
			case "torch":
				bl = db.TorchBlocks(r, s.GPU, s.PID, MinTime, MaxTime)
			default:
				continue
			}
			for bl.Next() {
				ts, xs := bl.T(), bl.Ints(0)
				sum += ts[len(ts)-1] + xs[len(xs)-1]
				n += len(ts)
			}
			if err := bl.Err(); err != nil {
				b.Fatal(err)
			}
		}
	}
	if sum == 0 {
		b.Fatal("nothing read")
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds()/1e6, "Msamples/s")
}
