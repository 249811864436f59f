package storage

import (
	"errors"
	"fmt"
	"time"
)

// Bounds on what the store accepts, so that no input makes a later reader
// loop for ever, overflow a time computation or grow without end. They
// are listed in docs/limits.md with what happens past each.
var (
	// EarliestTime and LatestTime bound every time stored (samples, marks,
	// a run's start and end): 1970-01-01 to 2200-01-01 UTC. Differences of
	// such times fit an int64 with room to spare, so no arithmetic over a
	// run's span overflows.
	EarliestTime int64 = 0
	LatestTime         = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
)

const (
	// StartSlack is how long before its run's start a sample or mark may
	// be dated (a probe's clock a little behind, a mark sent just before
	// the recorder started).
	StartSlack = 24 * time.Hour
	// MaxInterval bounds a run's sampling interval.
	MaxInterval = time.Hour
	// MaxTextBytes bounds a run's name, host and job, and each tag's key
	// and value; MaxTags the number of tags.
	MaxTextBytes = 1024
	MaxTags      = 256
	// MaxGPUs bounds the GPUs of a run, and MaxGPUIndex their indices.
	MaxGPUs     = 1024
	MaxGPUIndex = 65535
	// MaxPIDsPerGPU bounds the processes of one kind (NVML's per-process
	// samples, allocator samples, sites) kept apart on one GPU: the
	// samples of later processes are kept together under OtherPID.
	MaxPIDsPerGPU = 256
	// OtherPID is the process id under which the processes past
	// MaxPIDsPerGPU are kept.
	OtherPID = 0
	// MaxSeries bounds the series of a run: past it, a new process's
	// samples are kept under OtherPID of their GPU too.
	MaxSeries = 1 << 16
	// MaxFigure bounds each byte figure and count of a budget and of a
	// site row: 1 PiB is past any GPU's memory, and a budget's four
	// categories, or the rows of one snapshot (wire.MaxSites), add up far
	// inside an int64.
	MaxFigure = 1 << 50
	// MaxSiteText bounds a site row's file, function, snapshot name and
	// reason (a path of PATH_MAX); MaxStackText its stack, a few callers.
	MaxSiteText  = 4 << 10
	MaxStackText = 64 << 10
)

// ErrLimit is an input past one of the bounds above.
var ErrLimit = errors.New("past memrec's limits (docs/limits.md)")

// checkTime bounds a time of a run whose start is start (MinTime: not
// known yet).
func checkTime(what string, t, start int64) error {
	if t < EarliestTime || t >= LatestTime {
		return fmt.Errorf("%s %d is outside 1970..2200: %w", what, t, ErrLimit)
	}
	if start != MinTime && t < start-int64(StartSlack) {
		return fmt.Errorf("%s %d is more than %v before the run's start %d: %w", what, t, StartSlack, start, ErrLimit)
	}
	return nil
}

// checkRun bounds a run's own fields before it is created.
func checkRun(r Run) error {
	for _, f := range []struct{ name, v string }{{"name", r.Name}, {"host", r.Host}, {"job", r.Job}} {
		if len(f.v) > MaxTextBytes {
			return fmt.Errorf("run %s of %d bytes (at most %d): %w", f.name, len(f.v), MaxTextBytes, ErrLimit)
		}
	}
	if len(r.Tags) > MaxTags {
		return fmt.Errorf("%d tags (at most %d): %w", len(r.Tags), MaxTags, ErrLimit)
	}
	for k, v := range r.Tags {
		if len(k) > MaxTextBytes || len(v) > MaxTextBytes {
			return fmt.Errorf("tag of %d+%d bytes (at most %d each): %w", len(k), len(v), MaxTextBytes, ErrLimit)
		}
	}
	if r.StartNS != MinTime {
		if err := checkTime("start_ns", r.StartNS, MinTime); err != nil {
			return err
		}
	}
	if r.EndNS < 0 {
		return fmt.Errorf("end_ns is negative (%d)", r.EndNS)
	}
	if r.EndNS != 0 {
		if err := checkTime("end_ns", r.EndNS, MinTime); err != nil {
			return err
		}
	}
	if r.IntervalNS < 0 || r.IntervalNS > int64(MaxInterval) {
		return fmt.Errorf("interval_ns %d is outside 0..%d: %w", r.IntervalNS, int64(MaxInterval), ErrLimit)
	}
	if len(r.GPUs) > MaxGPUs {
		return fmt.Errorf("%d GPUs (at most %d): %w", len(r.GPUs), MaxGPUs, ErrLimit)
	}
	for _, g := range r.GPUs {
		if err := checkGPU(g); err != nil {
			return err
		}
	}
	return nil
}

func checkGPU(g GPU) error {
	if g.Index < 0 || g.Index > MaxGPUIndex {
		return fmt.Errorf("gpu index %d is outside 0..%d: %w", g.Index, MaxGPUIndex, ErrLimit)
	}
	if g.TotalBytes < 0 {
		return fmt.Errorf("gpu %d: total_bytes is negative", g.Index)
	}
	if len(g.Name) > MaxTextBytes || len(g.UUID) > MaxTextBytes {
		return fmt.Errorf("gpu %d: name or uuid longer than %d bytes: %w", g.Index, MaxTextBytes, ErrLimit)
	}
	return nil
}

// checkFigure refuses a figure of a budget or site row past MaxFigure
// (a negative one is refused by checkBytes).
func checkFigure(name string, v int64) error {
	if v > MaxFigure {
		return fmt.Errorf("%s %d is past %d (1 PiB): %w", name, v, int64(MaxFigure), ErrLimit)
	}
	return nil
}

// checkText refuses a string field longer than max bytes.
func checkText(name, v string, max int) error {
	if len(v) > max {
		return fmt.Errorf("%s of %d bytes (at most %d): %w", name, len(v), max, ErrLimit)
	}
	return nil
}

func checkPID(pid int) error {
	if pid < 0 {
		return fmt.Errorf("pid is negative (%d)", pid)
	}
	return nil
}
