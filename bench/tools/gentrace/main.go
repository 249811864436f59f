// Command gentrace generates a synthetic training run (see internal/tracegen):
// by default 8 GPUs at 100 Hz for 10 minutes, about a million lines, of the
// "steady" mix.
//
//	gentrace > run.jsonl                          # JSON Lines on stdout
//	gentrace -mix realistic > run.jsonl           # another mix
//	gentrace -duration 24h -gpus 8 -db runs.db    # straight into a database
//
// With -db the run goes through the recorder's appender, with no JSON in
// between (a 24-hour run of 8 GPUs at 100 Hz is 150 M lines that take long
// to write and import), in one commit at the end as an import does, so the
// file is laid out as the import of the same lines would be.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
)

func main() {
	mix := flag.String("mix", "steady", fmt.Sprintf("trace mix, one of %v", tracegen.Mixes))
	db := flag.String("db", "", "write the run into this database instead of JSON Lines to stdout")
	c := tracegen.Config{}
	flag.StringVar(&c.Name, "name", "gen", "run name")
	flag.IntVar(&c.GPUs, "gpus", 8, "GPUs")
	flag.DurationVar(&c.Duration, "duration", 10*time.Minute, "length of the run")
	flag.DurationVar(&c.Interval, "interval", 10*time.Millisecond, "NVML sampling interval")
	flag.Uint64Var(&c.Seed, "seed", 1, "random seed")
	flag.Parse()
	m, err := tracegen.Mix(*mix)
	if err != nil {
		fail(fmt.Errorf("-mix: %w", err))
	}
	m.Name, m.GPUs, m.Duration, m.Interval, m.Seed = c.Name, c.GPUs, c.Duration, c.Interval, c.Seed
	if m.LeakPerStep != nil { // the mix leaks on every GPU, however many
		m.LeakPerStep = make([]int64, c.GPUs)
		for i := range m.LeakPerStep {
			m.LeakPerStep[i] = 256000
		}
	}
	start := time.Now()
	var truth tracegen.Truth
	if *db == "" {
		truth, err = tracegen.Write(os.Stdout, m)
	} else {
		truth, err = writeDB(*db, m)
	}
	if err != nil {
		fail(err)
	}
	fmt.Fprintf(os.Stderr, "gentrace: %d lines, %d steps in %.1f s\n", truth.Lines, truth.Steps, time.Since(start).Seconds())
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "gentrace:", err)
	os.Exit(1)
}

// writeDB appends the run to the database at path.
func writeDB(path string, c tracegen.Config) (tracegen.Truth, error) {
	db, err := storage.Open(path, storage.Options{})
	if err != nil {
		return tracegen.Truth{}, err
	}
	defer db.Close()
	s := &dbSink{db: db}
	truth := tracegen.Generate(s, c)
	if s.err == nil && s.a == nil {
		s.open()
	}
	if s.a != nil {
		if err := s.a.Close(); err != nil && s.err == nil {
			s.err = err
		}
	}
	if s.err != nil {
		return truth, fmt.Errorf("%s: %w", path, s.err)
	}
	return truth, db.Close()
}

// dbSink appends a generated run through a storage.Appender. It keeps the
// first error and ignores the rest of the run after it.
type dbSink struct {
	db  *storage.DB
	run storage.Run
	a   *storage.Appender
	err error
}

func (s *dbSink) Run(r tracegen.RunInfo) {
	s.run = storage.Run{Name: r.Name, Host: "gen", StartNS: r.StartNS, IntervalNS: r.IntervalNS, Tags: r.Tags}
}

func (s *dbSink) GPU(g tracegen.GPUInfo) {
	s.run.GPUs = append(s.run.GPUs, storage.GPU{Index: g.Index, UUID: g.UUID, Name: "NVIDIA H200", TotalBytes: g.TotalBytes})
}

func (s *dbSink) open() {
	s.a, s.err = s.db.NewAppender(s.run, storage.AppendOptions{CommitInterval: -1})
}

// at is called before each append; it reports whether to append.
func (s *dbSink) at(int64) bool {
	if s.err == nil && s.a == nil {
		s.open()
	}
	return s.err == nil
}

func (s *dbSink) Device(t int64, gpu int, used, reserved int64) {
	if s.at(t) {
		s.err = s.a.AppendDevice(storage.DeviceSample{T: t, GPU: gpu, Used: used, Reserved: reserved})
	}
}

func (s *dbSink) Proc(t int64, gpu, pid int, used int64) {
	if s.at(t) {
		s.err = s.a.AppendProc(storage.ProcSample{T: t, GPU: gpu, PID: pid, Used: used})
	}
}

func (s *dbSink) Torch(x tracegen.Torch) {
	if s.at(x.T) {
		s.err = s.a.AppendTorch(storage.TorchSample{T: x.T, GPU: x.GPU, PID: x.PID, Rank: x.Rank,
			Allocated: x.Allocated, Reserved: x.Reserved, Active: x.Active, InactiveSplit: x.InactiveSplit,
			PeakAllocated: x.Peak, Segments: x.Segments})
	}
}

func (s *dbSink) Mark(m tracegen.Mark) {
	if s.at(m.T) {
		mk := storage.NewMark(m.T, storage.MarkKind(m.Kind))
		if m.Epoch >= 0 {
			mk.Epoch = m.Epoch
		}
		if m.Step >= 0 {
			mk.Step, mk.Rank = m.Step, m.Rank
		}
		s.err = s.a.AppendMark(mk)
	}
}
