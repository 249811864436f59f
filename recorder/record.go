package recorder

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// Errors of Record that a caller can test with errors.Is.
var (
	ErrBadInterval = errors.New("the sampling interval must be positive")
	ErrNoSuchGPU   = errors.New("no such GPU")
)

// Options describe one recording.
type Options struct {
	// Open opens where the recording goes, once the run (its GPUs and
	// start) is known; nil: Discard. If it fails, Record fails without a
	// command, and with one says so on Log and runs it anyway.
	Open     func(run storage.Run) (Store, error)
	Run      storage.Run // name, tags, host; GPUs and interval are filled in
	Source   Source
	GPUs     []int // nil: every GPU of the source
	Interval time.Duration
	Procs    bool
	// ProcsEvery is the longest gap between process lists while a GPU's
	// used memory holds still (see Sampler); 0 lists them at every tick.
	ProcsEvery time.Duration
	Duration   time.Duration // 0: until the command exits, or until interrupted
	Command    []string      // nil: no child
	Env        []string      // more KEY=VALUE for the child's environment
	Log        io.Writer     // memrec's own messages (stderr)
	Clock      Clock         // nil: RealClock
	GoLoop     bool          // sample from Go, never on a native thread (see Sampler)
	// SocketDir is where the private socket directory is made ("" = $TMPDIR).
	SocketDir string
	Limits    Limits // of the socket; zero: DefaultLimits
	// Signals, if set, replaces the process's SIGINT/SIGTERM: each signal
	// sent on it is passed on to the command's process group (tests, and
	// memrec fit, which ends a trial by sending one).
	Signals <-chan os.Signal
	// Started, if set, is called with the command's process id, which is
	// also the id of its process group, once it has started; from the
	// goroutine that called Record.
	Started func(pid int)
	// Metrics, if set, is where the live metrics are served (see Live)
	// while recording; Record closes it.
	Metrics net.Listener
	// Watch, if set, is fed everything recorded, for the live page.
	Watch *Watch
	// Live says what the live metrics carry (version, host label); a nil
	// ProcName is the source's, where it names processes (ProcNamer).
	Live LiveOptions
	// Status, if set, is called with the recording's status every second
	// while it samples, from a goroutine of its own; never after Record
	// returns.
	Status func(Status)
}

// Result is what a recording did.
type Result struct {
	Run      storage.Run
	Sampler  SamplerStats
	Listener ListenerStats
	// ExitCode is the child's exit status (128+signal if it was killed);
	// 0 without a command.
	ExitCode  int
	Child     bool
	Marks     int64         // marks stored, from every source
	Torch     int64         // allocator samples stored, from every source
	CPU       time.Duration // recorder's own CPU time, user+system
	CPUSys    time.Duration // of which system
	MaxRSS    int64         // bytes
	Wall      time.Duration
	DBErrors  int64 // failed commits
	LastDBErr error
	// DBLost is what was dropped unwritten, to bound memory, while the
	// database could not be written (or was never opened).
	DBLost storage.Counts
	// DBWait is how long the recording waited for a database that another
	// process held locked (samples were held in memory meanwhile); DBHeld
	// is how many samples and marks were written late when it opened.
	// DBOpened says whether it opened at all.
	DBWait   time.Duration
	DBHeld   int64
	DBOpened bool
	// DBUnstored is what was recorded but is not in the file because the
	// last commits failed (a full disk), and DBUnstoredSpan the part of the
	// recording at its end that the file lacks. DBLost comes on top.
	DBUnstored     storage.Counts
	DBUnstoredSpan time.Duration
	// Stopped says a bug stopped the recording before its end (said on
	// Log); the command ran to its end all the same.
	Stopped bool
}

// Record records until the command exits (or Duration passes, or SIGINT or
// SIGTERM arrives, which is passed on to the command). It never stops or
// fails the command because of its own trouble: a database that cannot be
// written is reported on Log and the command runs on. The run is flushed
// and closed on every way out.
func Record(ctx context.Context, o Options) (Result, error) {
	var res Result
	if o.Clock == nil {
		o.Clock = RealClock{}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	all, gpus, run, err := newRun(o)
	if err != nil {
		return res, err
	}
	cost := startCost()

	store, err := openStore(o, run)
	if err != nil {
		return res, err
	}
	g := &guard{log: o.Log}
	store = &guardedStore{s: store, g: g}
	sink, counted, live, ln, stopServing := startListening(o, &run, store)
	defer stopServing()

	// With a command, a signal (which cancels ctx in memrec) is passed on
	// to it and the recording goes on until it exits.
	if len(o.Command) > 0 {
		ctx = context.WithoutCancel(ctx)
	}
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	if o.Duration > 0 && !scheduled(o.Clock) {
		var cancel context.CancelFunc
		sctx, cancel = context.WithTimeout(sctx, o.Duration)
		defer cancel()
	}
	sampler := newSampler(o, gpus, run, sink, live)
	var stats SamplerStats
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		defer g.catch("sampler")
		stats = sampler.Run(sctx)
	}()
	statusDone := make(chan struct{})
	go func() {
		defer close(statusDone)
		defer g.catch("status line")
		if o.Status != nil {
			clock := o.Clock
			if sc, ok := clock.(*ScaledClock); ok {
				clock = sc.Watch()
			}
			reportStatus(sctx, o.Status, live, clock)
		}
	}()

	sigs := o.Signals
	if sigs == nil {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM)
		defer signal.Stop(ch)
		sigs = ch
	}

	if len(o.Command) > 0 {
		res.Child = true
		var notStarted error
		res.ExitCode, notStarted = runCommand(o, ln, all, run.Name, sigs, sink)
		if notStarted != nil {
			run.Recorder.NotStarted = notStarted.Error()
		}
		stop() // the child is gone; with --duration left, stop sampling now too
	} else {
		select {
		case <-sctx.Done():
		case <-sigs:
		case <-sampled: // reached Until
		}
		stop()
	}
	<-sampled
	<-statusDone
	if ln != nil {
		ln.Close(time.Second)
		res.Listener = ln.Stats()
	}

	cost.into(&res)
	res.finishRun(run, stats, counted, store)
	res.Stopped = g.tripped.Load()
	return res, nil
}

// finishRun puts the sampler's and the listener's figures into res and
// into the run's record, then finishes the store with that record.
func (res *Result) finishRun(run storage.Run, stats SamplerStats, counted *countingSink, store Store) {
	res.Sampler = stats
	res.Marks, res.Torch = counted.marks.Load(), counted.torch.Load()
	run.Recorder.Ticks = stats.Ticks
	run.Recorder.MissedTicks = stats.Missed
	run.Recorder.AchievedHz = stats.AchievedHz()
	run.Recorder.Dropped = res.Listener.Dropped
	run.Recorder.Invalid = stats.Invalid
	res.Run = run
	res.finish(store.Finish(run.Recorder))
}

// newRun checks o's interval, lists the source's GPUs and returns them,
// the indexes of those to record, and the run's record as it starts.
func newRun(o Options) (all []storage.GPU, gpus []int, run storage.Run, err error) {
	if o.Interval <= 0 {
		return nil, nil, run, ErrBadInterval
	}
	all, err = o.Source.GPUs()
	if err != nil {
		return nil, nil, run, err
	}
	gpus, run, err = selectGPUs(all, o.GPUs, o.Run)
	if err != nil {
		return nil, nil, run, err
	}
	run.IntervalNS = o.Interval.Nanoseconds()
	run.StartNS = o.Clock.Now().UnixNano()
	run.Recorder.Source = sourceName(o.Source)
	run.Recorder.Driver = o.Source.Driver()
	return all, gpus, run, nil
}

// newSampler returns the sampler of the run's device memory, writing to
// sink and counting on live (which may be nil).
func newSampler(o Options, gpus []int, run storage.Run, sink Sink, live *Live) *Sampler {
	// With a command, the command is the job: its probe sends the marks
	// and allocator samples, and a simulated job's would be mixed with them.
	sampler := &Sampler{Source: o.Source, GPUs: gpus, Interval: o.Interval, Procs: o.Procs, ProcsEvery: o.ProcsEvery, Clock: o.Clock, GoLoop: o.GoLoop, Sink: sink,
		OnError: rateLimited(o.Log, "sampling"), NoEvents: len(o.Command) > 0}
	if o.Duration > 0 && scheduled(o.Clock) {
		// The clock's time is the sampler's schedule: the duration is of
		// its time, whatever real time it takes.
		sampler.Until = time.Unix(0, run.StartNS).Add(o.Duration)
	}
	if live != nil {
		sampler.Progress = live.Progress()
	}
	return sampler
}

// scheduled reports whether the clock's time moves by the sampler's
// schedule (a fake clock, a simulated job's scaled clock).
func scheduled(c Clock) bool {
	switch c.(type) {
	case *FakeClock, *ScaledClock:
		return true
	}
	return false
}

// startListening puts the live figures (for the metrics and the status
// line) and the counting of marks in front of the store, and opens the
// marks socket (nil if it cannot be made: then device memory only).
// stopServing stops serving the metrics.
func startListening(o Options, run *storage.Run, store Store) (sink Sink, counted *countingSink, live *Live, ln *Listener, stopServing func()) {
	sink, stopServing = store, func() {}
	if o.Metrics != nil || o.Status != nil {
		if run.Host == "" {
			run.Host, _ = os.Hostname()
		}
		lo := o.Live
		if n, ok := o.Source.(ProcNamer); ok && lo.ProcName == nil {
			lo.ProcName = n.ProcName
		}
		live = NewLive(*run, o.ProcsEvery, lo)
		sink = live.Wrap(sink)
	}
	if o.Watch != nil {
		if run.Host == "" {
			run.Host, _ = os.Hostname()
		}
		o.Watch.start(*run)
		sink = o.Watch.wrap(sink)
	}
	counted = &countingSink{Sink: sink}
	sink = counted
	ln, err := Listen(o.SocketDir, sink, o.Limits)
	if err != nil {
		fmt.Fprintf(o.Log, "memrec: WARNING: no marks socket (%v); recording device memory only\n", err)
		ln = nil
	}
	if live != nil && o.Metrics != nil {
		if ln != nil {
			live.SetDropped(func() int64 { return ln.Stats().Dropped })
		}
		if o.Watch != nil {
			live.page = o.Watch.Page
		}
		stopServing = live.Serve(o.Metrics)
	}
	return sink, counted, live, ln, stopServing
}

// finish takes in what the store did.
func (res *Result) finish(sr StoreResult) {
	if sr.Written {
		res.Run = sr.Run
	}
	res.DBErrors, res.LastDBErr, res.DBLost = sr.Errors, sr.LastErr, sr.Lost
	res.DBWait, res.DBHeld, res.DBOpened = sr.Wait, sr.Held, sr.Written
	res.DBUnstored, res.DBUnstoredSpan = sr.Unstored, sr.UnstoredSpan
}

// cost measures the recorder's own CPU time, memory and wall time.
type cost struct {
	usage syscall.Rusage
	wall  time.Time
}

func startCost() cost {
	var c cost
	syscall.Getrusage(syscall.RUSAGE_SELF, &c.usage)
	c.wall = time.Now()
	return c
}

// into writes what was spent since startCost into res.
func (c cost) into(res *Result) {
	var u syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	res.CPU = cpuTime(u) - cpuTime(c.usage)
	res.CPUSys = time.Duration(u.Stime.Nano() - c.usage.Stime.Nano())
	res.MaxRSS = u.Maxrss * 1024
	res.Wall = time.Since(c.wall)
}

// runCommand runs the recording's command to its end, with the socket's
// path and the GPU table in its environment, stores its exit as a mark and
// returns its exit status, and why it could not be started (nil if it was).
func runCommand(o Options, ln *Listener, all []storage.GPU, run string, sigs <-chan os.Signal, sink Sink) (int, error) {
	socket := ""
	if ln != nil {
		socket = ln.Path
	}
	env := append(slices.Clip(o.Env), "MEMREC_GPUS="+gpuTable(all))
	code, err := runChild(o.Command, env, socket, run, sigs, o.Log, o.Started)
	exit := storage.NewMark(o.Clock.Now().UnixNano(), wire.MarkExit)
	exit.Code = code
	if err != nil {
		exit.Text = err.Error()
	}
	sink.AppendMark(exit)
	if errors.Is(err, errNotStarted) {
		fmt.Fprintf(o.Log, "memrec: %v; the run is stored as not started\n", err)
		return code, err
	}
	return code, nil
}

// errNotStarted is runChild's for a command it could not start.
var errNotStarted = errors.New("the command could not be started")

// openStore opens the recording's store; without one, or when it cannot be
// opened and a command runs, the recording is discarded.
func openStore(o Options, run storage.Run) (Store, error) {
	if o.Open == nil {
		return Discard, nil
	}
	store, err := o.Open(run)
	if err != nil {
		if len(o.Command) == 0 {
			return nil, err
		}
		fmt.Fprintf(o.Log, "memrec: WARNING: NOT RECORDING: %v; the command runs anyway\n", err)
		return Discard, nil
	}
	return store, nil
}

func cpuTime(u syscall.Rusage) time.Duration {
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// selectGPUs picks the GPUs to record and declares them in the run.
func selectGPUs(all []storage.GPU, want []int, run storage.Run) ([]int, storage.Run, error) {
	byIndex := map[int]storage.GPU{}
	for _, g := range all {
		byIndex[g.Index] = g
	}
	var gpus []int
	if want == nil {
		for _, g := range all {
			gpus = append(gpus, g.Index)
		}
	} else {
		for _, i := range want {
			if _, ok := byIndex[i]; !ok {
				return nil, run, fmt.Errorf("%w: no GPU %d here (this machine has %d)", ErrNoSuchGPU, i, len(all))
			}
			gpus = append(gpus, i)
		}
	}
	gpus = sortedGPUs(gpus)
	if len(gpus) == 0 {
		return nil, run, errors.New("no GPU to record")
	}
	run.GPUs = nil
	for _, i := range gpus {
		run.GPUs = append(run.GPUs, byIndex[i])
	}
	return gpus, run, nil
}

func sourceName(s Source) string {
	switch s.(type) {
	case *NVML:
		return "nvml"
	case *Sim:
		return "sim"
	}
	return fmt.Sprintf("%T", s)
}

// rateLimited logs errors at most once every 10 s, with a count.
func rateLimited(w io.Writer, what string) func(error) {
	var mu sync.Mutex
	var last time.Time
	var n int
	return func(err error) {
		mu.Lock()
		defer mu.Unlock()
		n++
		if time.Since(last) > 10*time.Second {
			fmt.Fprintf(w, "memrec: %s: %v (%d so far)\n", what, err, n)
			last = time.Now()
		}
	}
}

// gpuTable lists the GPUs as "index=uuid,..." for the probe (MEMREC_GPUS),
// which finds by UUID the index of a CUDA device that CUDA_VISIBLE_DEVICES
// renumbered.
func gpuTable(gpus []storage.GPU) string {
	var parts []string
	for _, g := range gpus {
		if g.UUID != "" {
			parts = append(parts, strconv.Itoa(g.Index)+"="+g.UUID)
		}
	}
	return strings.Join(parts, ",")
}

// runChild runs the command with MEMREC_SOCKET and MEMREC_RUN set, passes
// SIGINT and SIGTERM on to it, and returns its exit status.
func runChild(argv, env []string, socket, run string, sigs <-chan os.Signal, log io.Writer, started func(int)) (int, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(append(os.Environ(), env...), "MEMREC_RUN="+run)
	if socket != "" {
		cmd.Env = append(cmd.Env, "MEMREC_SOCKET="+socket)
	}
	// Its own process group: a Ctrl-C reaches memrec, which passes it on
	// once (to the whole group, as the terminal would).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return 127, fmt.Errorf("%w: %s: %w", errNotStarted, argv[0], err)
	}
	if started != nil {
		started(cmd.Process.Pid)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-sigs:
			fmt.Fprintf(log, "memrec: passing %v to %s\n", sig, argv[0])
			if s, ok := sig.(syscall.Signal); ok {
				syscall.Kill(-cmd.Process.Pid, s)
			}
		case err := <-done:
			return exitStatus(cmd.ProcessState, err)
		}
	}
}

func exitStatus(ps *os.ProcessState, err error) (int, error) {
	if ps == nil {
		return 1, err
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal()), fmt.Errorf("killed by signal %v", ws.Signal())
	}
	return ps.ExitCode(), nil
}

// countingSink counts the marks and allocator samples that reach the store.
type countingSink struct {
	Sink
	marks, torch, sites atomic.Int64
}

func (c *countingSink) AppendMark(m storage.Mark) error {
	err := c.Sink.AppendMark(m)
	if err == nil {
		c.marks.Add(1)
	}
	return err
}

func (c *countingSink) AppendSites(rows []storage.SiteSample) error {
	err := c.Sink.AppendSites(rows)
	if err == nil {
		c.sites.Add(1)
	}
	return err
}

func (c *countingSink) AppendTorch(s storage.TorchSample) error {
	err := c.Sink.AppendTorch(s)
	if err == nil {
		c.torch.Add(1)
	}
	return err
}
