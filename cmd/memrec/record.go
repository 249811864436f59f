package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/python"
	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
)

type recordOptions struct {
	*globals
	name        string
	tags        []string
	interval    time.Duration
	gpus        string
	procs       bool
	procsEvery  time.Duration
	duration    time.Duration
	source      string
	simScenario string
	simGPUs     int
	simRankBase int
	simClock    string
	simSpeed    float64
	command     []string
	sampler     string
	cpuProfile  string
	torch       bool
	jax         bool
	metricsAddr string
	viewAddr    string
	job         string
	host        string
	sites       bool
	allocTrace  bool
	// allocTraceAsked: --alloc-trace given on the command line (not only
	// its default).
	allocTraceAsked bool
	// metricsLegacyHostname spells the host label "Hostname" (dcgm-exporter before its rename).
	metricsLegacyHostname bool
	// openNVML opens NVML; tests open go-nvml's mocks.
	openNVML func() (*recorder.NVML, error)
}

// newRecordCmd makes the record command. runF, when not nil, runs instead
// of runRecord, so tests can check what the flags parse into without
// recording (the pattern of GitHub's CLI).
func newRecordCmd(g *globals, runF func(context.Context, *recordOptions) error) *cobra.Command {
	if runF == nil {
		runF = runRecord
	}
	o := &recordOptions{globals: g, openNVML: func() (*recorder.NVML, error) { return recorder.OpenNVML(recorder.DefaultNVMLPath) }}
	cmd := &cobra.Command{
		Use:   "record [flags] [-- COMMAND ARGS...]",
		Short: "Record GPU memory while a command runs (or for --duration)",
		Long: `Record the memory of every GPU through NVML on an absolute schedule, run the
command with MEMREC_SOCKET and MEMREC_RUN in its environment, take marks and
allocator samples from its probe (or from memrec annotate), and stop when it
exits. memrec exits with the command's exit code; SIGINT and SIGTERM are passed
on to it. Without a command, record until --duration or Ctrl-C.

With --source sim a simulated training job stands in for the GPUs: use it on a
machine without a GPU.`,
		Example: `  memrec record --name bs64 --tag batch_size=64 -- python train.py --bs 64
  memrec record --interval 1ms --gpus 0 --procs --duration 60s
  memrec record --source sim --sim-scenario leak --duration 10s
  memrec record --metrics-addr :9471 -- python train.py`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				o.command = args[dash:]
				args = args[:dash]
			}
			if len(args) > 0 {
				return fmt.Errorf("unexpected argument %q: put the command after --", args[0])
			}
			o.allocTraceAsked = cmd.Flags().Changed("alloc-trace") && o.allocTrace
			return runF(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.name, "name", "", "run name (default: run-DATE-TIME)")
	f.StringArrayVar(&o.tags, "tag", nil, "tag KEY=VALUE (repeatable)")
	durationVar(f, &o.interval, "interval", 10*time.Millisecond, "sampling interval, 1ms to minutes (down to 100µs allowed)")
	f.StringVar(&o.gpus, "gpus", "", "GPU indices to record, e.g. 0,2 (default: all)")
	f.BoolVar(&o.procs, "procs", false, "also record per-process memory (listed when a GPU's used memory changes)")
	durationVar(f, &o.procsEvery, "procs-every", time.Second, "with --procs: list processes at least this often while memory holds still (0: at every tick)")
	durationVar(f, &o.duration, "duration", 0, "stop recording after this long (0: until the command exits or Ctrl-C)")
	f.StringVar(&o.source, "source", "nvml", "where memory is read: nvml, or sim (a simulated job on 140 GiB GPUs whose activations grow with its batch_size and seq_len tags)")
	f.StringVar(&o.simScenario, "sim-scenario", "none", "with --source sim: none, leak, fragmentation or oom")
	f.IntVar(&o.simGPUs, "sim-gpus", 2, "with --source sim: number of simulated GPUs")
	f.StringVar(&o.simClock, "sim-clock", "real", "with --source sim: real, or fake to record --duration of simulated time as fast as it can be computed (benchmarks)")
	f.MarkHidden("sim-clock")
	f.IntVar(&o.simRankBase, "sim-rank-base", 0, "with --source sim: global rank of the first simulated GPU, to simulate one node of a multi-node job")
	f.Float64Var(&o.simSpeed, "sim-speed", 1, "with --source sim: run the simulated job this many times faster than real time (--duration and the stored times are the job's, every tick of it recorded: a machine that cannot keep pace takes longer), to record hours in minutes")
	f.StringVar(&o.job, "job", "", "the job this run belongs to, the same on every node of a multi-node job (default: $TORCHELASTIC_RUN_ID, $SLURM_JOB_ID, or torchrun's --rdzv-id in the command)")
	f.StringVar(&o.host, "host", "", "name of this node (default: the host name); nodes that share a host name need their own")
	f.StringVar(&o.metricsAddr, "metrics-addr", "", "serve live Prometheus metrics at http://ADDR/metrics while recording: :9471 on the loopback interface only, 0.0.0.0:9471 on every interface (off by default)")
	f.StringVar(&o.viewAddr, "view-addr", "", "serve the live page (memrec view's, of this recording, from memory) at http://ADDR/ while recording, e.g. 127.0.0.1:0 for a free port; --metrics-addr serves it too, at /")
	f.BoolVar(&o.metricsLegacyHostname, "metrics-legacy-hostname", false, "label the metrics' host \"Hostname\", as dcgm-exporter did before it renamed the label \"hostname\" (for older dashboards)")
	f.BoolVar(&o.torch, "torch", false, "load memrec's PyTorch probe into a Python command without changing it (allocator samples on a timer, OOMs)")
	f.BoolVar(&o.jax, "jax", false, "load memrec's probe into a Python command and read JAX's allocators (jax.Device.memory_stats) instead of PyTorch's")
	f.BoolVar(&o.sites, "sites", false, "have the probe record allocation sites (MEMREC_SITES=1): which lines of code hold GPU memory, summarised at epoch ends, OOMs and exit; it costs the job more than the other modes (the probe holds its history to about 1 % of a step and its trace windows to 1 % of the time, by recording fewer steps): use it to find a leak's line")
	f.BoolVar(&o.allocTrace, "alloc-trace", true, "have the probe trace PyTorch's allocator from CUDA's start to the third step (MEMREC_ALLOC_TRACE=1; with --torch or a job that imports memrec; off with --alloc-trace=false, and unless given with --sites or --jax): compare --by and memrec fit replay the traces of runs at two values to find the largest that fits")
	f.StringVar(&o.sampler, "sampler", "native", "how to sample NVML: native (a thread outside the Go runtime), go (a Go loop with nanosleep) or plain (a Go loop with time.Sleep); the last two for comparison")
	f.MarkHidden("sampler")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the recorder to this file")
	f.MarkHidden("cpuprofile")
	return cmd
}

// jobID is the job a recording belongs to: --job, else the launcher's:
// TORCHELASTIC_RUN_ID (torchrun sets it from --rdzv-id; its default
// "none" says nothing), SLURM_JOB_ID, or a --rdzv-id / --rdzv_id in the
// command memrec runs (torchrun under memrec). "" if none.
func jobID(flag string, getenv func(string) string, command []string) string {
	if flag != "" {
		return flag
	}
	if id := getenv("TORCHELASTIC_RUN_ID"); id != "" && id != "none" {
		return id
	}
	if id := getenv("SLURM_JOB_ID"); id != "" {
		return id
	}
	for i, a := range command {
		for _, f := range []string{"--rdzv-id", "--rdzv_id"} {
			switch {
			case a == f && i+1 < len(command) && command[i+1] != "none":
				return command[i+1]
			case strings.HasPrefix(a, f+"=") && a != f+"=none":
				return strings.TrimPrefix(a, f+"=")
			}
		}
	}
	return ""
}

func parseGPUs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--gpus %q: want indices like 0,2", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func runRecord(ctx context.Context, o *recordOptions) error {
	if err := checkRecordFlags(o); err != nil {
		return err
	}
	gpus, err := parseGPUs(o.gpus)
	if err != nil {
		return err
	}
	tags, err := parseTags(o.tags)
	if err != nil {
		return fmt.Errorf("--tag: %w", err)
	}
	now := time.Now()
	src, err := openSource(o, now)
	if err != nil {
		return err
	}
	defer src.Close()

	opts := recorderOptions(o, src, now, gpus, tags)
	cleanup, err := probeEnv(o, &opts)
	defer cleanup()
	if err != nil {
		return err
	}
	if err := samplingClock(o, now, &opts); err != nil {
		return err
	}
	// The ports first: a busy one ends the command before the database
	// is opened (or created).
	if opts.Metrics, err = listenMetrics(o); err != nil {
		return err
	}
	if opts.Metrics != nil {
		defer opts.Metrics.Close() // Record closes it; this covers its early errors
		fmt.Fprintf(o.io.Err, "memrec: live page at http://%s/\n", opts.Metrics.Addr())
	}
	stopView, err := liveView(o, &opts)
	if err != nil {
		return err
	}
	defer stopView()
	closeDB, dbErr, err := openRecordStore(o, &opts)
	closeDB = sync.OnceFunc(closeDB)
	defer closeDB()
	if err != nil {
		return err
	}
	stop, err := startCPUProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	status := newStatusWriter(o.io.Err)
	if status != nil && o.simClock != "fake" {
		opts.Status = status.show
	}
	res, err := recorder.Record(ctx, opts)
	if opts.Status != nil {
		status.clear()
	}
	switch {
	case errors.Is(err, recorder.ErrNoSuchGPU):
		return fmt.Errorf("--gpus: %w", err)
	case errors.Is(err, recorder.ErrBadInterval):
		return fmt.Errorf("--interval: %w", err)
	case err != nil:
		return err
	}
	closeDB()
	printRecordSummary(o, res, dbErr)
	if res.DBOpened {
		compactAfterRecord(o)
	}
	if dbErr != nil && !res.DBOpened && len(o.command) == 0 {
		return fmt.Errorf("nothing was recorded: %w", dbErr)
	}
	if res.ExitCode != 0 {
		return exitError{code: res.ExitCode}
	}
	if code := simExit(src); code != 0 {
		_, step, _ := src.(*recorder.Sim).OOM()
		fmt.Fprintf(o.io.Err, "memrec: the simulated job ran out of memory at step %d (memrec analyze shows the OOM)\n", step)
		return exitError{code: code}
	}
	return nil
}

// simExit is the simulated job's exit status: 1 once it ran out of
// memory, as an uncaught error ends a Python job; 0 for any other source.
func simExit(src recorder.Source) int {
	if sim, ok := src.(*recorder.Sim); ok {
		if _, _, oom := sim.OOM(); oom {
			return 1
		}
	}
	return 0
}

// compactAfterRecord rewrites the database without its free pages when
// they are a tenth of the file or more: a recording commits every second,
// and the pages each commit replaces make a live file up to several times
// the size of the same run imported (storage/compact.go). Failing to is
// not an error of the recording: the file is as it was.
func compactAfterRecord(o *recordOptions) {
	res, err := storage.Compact(o.dbPath, storage.CompactOptions{MinFree: 0.1})
	switch {
	case err != nil:
		fmt.Fprintf(o.io.Err, "  compaction  not done (%v); memrec compact does it later\n", err)
	case res.Rewritten:
		fmt.Fprintf(o.io.Err, "  compaction  %s -> %s (free pages left by the commits)\n", mib(res.Before), mib(res.After))
	}
}

// recorderOptions returns the recorder's options from the flags: the run
// named (by default after the time now) and tagged, and the sampling asked
// for.
func recorderOptions(o *recordOptions, src recorder.Source, now time.Time, gpus []int, tags map[string]string) recorder.Options {
	name := o.name
	if name == "" {
		name = "run-" + now.Format("20060102-150405")
	}
	if o.source == "sim" {
		tags["source"] = "sim"
		if o.simScenario != "none" {
			tags["scenario"] = o.simScenario
		}
	}
	return recorder.Options{
		Run:        storage.Run{Name: name, Tags: tags, Job: jobID(o.job, os.Getenv, o.command), Host: o.host},
		Source:     src,
		GPUs:       gpus,
		Interval:   o.interval,
		Procs:      o.procs,
		ProcsEvery: o.procsEvery,
		Duration:   o.duration,
		Command:    o.command,
		Log:        o.io.Err,
		Live:       recorder.LiveOptions{Version: version, LegacyHostname: o.metricsLegacyHostname},
	}
}

// checkRecordFlags refuses flags that do not go together, and gives a
// simulated recording without a command its default duration.
func checkRecordFlags(o *recordOptions) error {
	if o.interval < 100*time.Microsecond {
		return fmt.Errorf("--interval %v: the shortest is 100µs (1ms and up is the range memrec is built for)", o.interval)
	}
	if o.interval > storage.MaxInterval {
		return fmt.Errorf("--interval %v: the longest is %v", o.interval, storage.MaxInterval)
	}
	if o.duration < 0 {
		return fmt.Errorf("--duration %v: want a length of time, or 0 to record until the command exits or Ctrl-C", o.duration)
	}
	if o.procsEvery < 0 {
		return fmt.Errorf("--procs-every %v: want 0 (every tick) or more", o.procsEvery)
	}
	if o.source == "sim" && (o.simGPUs < 1 || o.simGPUs > storage.MaxGPUs) {
		return fmt.Errorf("--sim-gpus %d: want 1 to %d GPUs", o.simGPUs, storage.MaxGPUs)
	}
	if len(o.command) == 0 && o.duration == 0 && o.source == "sim" {
		o.duration = 10 * time.Second
	}
	if o.simSpeed <= 0 || (o.simSpeed != 1 && (o.source != "sim" || len(o.command) > 0)) {
		return fmt.Errorf("--sim-speed %g: want a speed above 0, with --source sim and no command", o.simSpeed)
	}
	switch o.simClock {
	case "real", "":
	case "fake":
		if o.source != "sim" || o.duration == 0 || len(o.command) > 0 {
			return errors.New("--sim-clock fake needs --source sim and --duration, and no command")
		}
	default:
		return fmt.Errorf("--sim-clock %q: want real or fake", o.simClock)
	}
	return nil
}

// openSource opens what --source names; the caller closes it.
func openSource(o *recordOptions, now time.Time) (recorder.Source, error) {
	switch o.source {
	case "nvml":
		src, err := o.openNVML()
		if errors.Is(err, recorder.ErrNoDriver) {
			err = fmt.Errorf("%w; on a machine without a GPU use --source sim", err)
		}
		return src, err
	case "sim":
		cfg := recorder.SimConfig{GPUs: o.simGPUs, Scenario: o.simScenario, RankBase: o.simRankBase}
		tags, err := parseTags(o.tags)
		if err == nil {
			err = cfg.SetTags(tags) // the job's shape: batch_size, seq_len
		}
		if err != nil {
			return nil, fmt.Errorf("--tag: %w", err)
		}
		return recorder.NewSim(cfg, now)
	}
	return nil, fmt.Errorf("--source %q: want nvml or sim", o.source)
}

// probeEnv sets the command's environment for --torch and --jax (the
// probe installed in a temporary folder that cleanup removes), --sites and
// the allocator trace.
func probeEnv(o *recordOptions, opts *recorder.Options) (cleanup func(), err error) {
	cleanup = func() {}
	if o.torch || o.jax {
		flag := "--torch"
		if o.jax {
			flag = "--jax"
			opts.Env = append(opts.Env, "MEMREC_JAX=1")
		}
		if len(o.command) == 0 {
			return cleanup, fmt.Errorf("%s needs a command to load the probe into", flag)
		}
		dir, err := recorder.MakeOwnedDir("", "probe")
		if err != nil {
			return cleanup, fmt.Errorf("%s: %w", flag, err)
		}
		cleanup = func() { dir.Remove() }
		entries, err := installProbe(dir)
		if err != nil {
			return cleanup, fmt.Errorf("%s: %w", flag, err)
		}
		opts.Env = append(opts.Env, "PYTHONPATH="+python.PythonPath(entries, os.Getenv("PYTHONPATH")))
	}
	if o.sites {
		if len(o.command) == 0 {
			return cleanup, errors.New("--sites needs a command whose probe records them")
		}
		opts.Env = append(opts.Env, "MEMREC_SITES=1")
	}
	switch {
	case o.allocTraceAsked && len(o.command) == 0:
		return cleanup, errors.New("--alloc-trace needs a command whose probe traces the allocator")
	case o.allocTrace && len(o.command) > 0 && (!o.sites && !o.jax || o.allocTraceAsked):
		// On unless turned off; --sites uses the allocator's history for
		// itself and --jax reads JAX's allocators, so they go without
		// unless asked (with --sites the probe then says why).
		opts.Env = append(opts.Env, "MEMREC_ALLOC_TRACE=1")
	}
	return cleanup, nil
}

// installProbe writes the probe's files into dir and records each in its
// marker, so that removing dir removes exactly them.
func installProbe(dir *recorder.OwnedDir) ([]string, error) {
	entries, err := python.Install(dir.Path)
	if err != nil {
		return nil, err
	}
	var files []string
	err = filepath.WalkDir(dir.Path, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == recorder.MarkerName {
			return err
		}
		rel, err := filepath.Rel(dir.Path, p)
		files = append(files, rel)
		return err
	})
	if err != nil {
		return nil, err
	}
	return entries, dir.Own(files...)
}

// samplingClock sets how the recording samples and keeps time: --sampler,
// --sim-clock and --sim-speed.
func samplingClock(o *recordOptions, now time.Time, opts *recorder.Options) error {
	switch o.sampler {
	case "native", "":
	case "go":
		opts.GoLoop = true
	case "plain":
		opts.GoLoop, opts.Clock = true, recorder.PlainClock{}
	default:
		return fmt.Errorf("--sampler %q: want native, go or plain", o.sampler)
	}
	if o.simClock == "fake" {
		opts.Clock = recorder.NewFakeClock(now)
	}
	if o.simSpeed != 1 {
		// The job's time runs faster: a Go loop sleeps on the scaled clock
		// (the native loop keeps the system's), and --duration is the
		// job's, all of it recorded however long the machine takes.
		opts.Clock, opts.GoLoop = recorder.NewScaledClock(o.simSpeed), true
	}
	return nil
}

// openRecordStore opens the database and sets where the recording goes.
// dbErr is why the database did not open (the recording then goes on
// without it, or waits for it); err ends the command, before it starts.
// closeDB closes what was opened.
//
// A name given with --name that a run has already is refused here, before
// the command runs; a name memrec made up (run-DATE-TIME) never is: it
// gets the first free suffix (-2, -3, ...), so that two recordings started
// in the same second both run and are both stored.
func openRecordStore(o *recordOptions, opts *recorder.Options) (closeDB func(), dbErr, err error) {
	closeDB = func() {}
	db, dbErr := openRecordDB(o)
	switch {
	case dbErr == nil:
		closeDB = func() { db.Close() }
		if err := checkRunName(o, db, &opts.Run); err != nil {
			return closeDB, nil, err
		}
		opts.Open = func(run storage.Run) (recorder.Store, error) { return recorder.DBStore(db, run, o.io.Err) }
	case errors.Is(dbErr, storage.ErrLocked):
		// A reader (memrec export | less) holds the file: record anyway,
		// hold the samples in memory and write them once it is free. A
		// reader lets another reader look at the names.
		if r, err := storage.Open(o.dbPath, storage.Options{ReadOnly: true, LockTimeout: 100 * time.Millisecond}); err == nil {
			err := checkRunName(o, r, &opts.Run)
			r.Close()
			if err != nil {
				return closeDB, nil, err
			}
		}
		fmt.Fprintf(o.io.Err, "memrec: WARNING: %s\n", dbErr.Error()+hint(dbErr))
		opts.Open = func(run storage.Run) (recorder.Store, error) {
			return recorder.HeldStore(func() (*storage.DB, error) { return openRecordDB(o) }, run, 0, o.io.Err), nil
		}
	case len(o.command) == 0:
		return closeDB, dbErr, dbErr
	default:
		opts.Open = func(storage.Run) (recorder.Store, error) { return nil, dbErr }
	}
	return closeDB, dbErr, nil
}

// openRecordDB opens the database for a recording: to write, creating it,
// with the file's lock held only around each commit, so that every other
// command can read the database while the recording runs (ShortLock).
func openRecordDB(o *recordOptions) (*storage.DB, error) {
	return storage.Open(o.dbPath, storage.Options{ShortLock: true})
}

// checkRunName refuses a --name a run in db has, and moves a made-up name
// on to the first free one.
func checkRunName(o *recordOptions, db *storage.DB, run *storage.Run) error {
	if o.name == "" {
		name, err := db.FreeName(run.Name)
		run.Name = name
		return err
	}
	if _, err := db.Run(o.name); err == nil {
		return fmt.Errorf("--name %q: %w in %s; the command was not run (memrec rm it, or choose another name)", o.name, storage.ErrExists, o.dbPath)
	}
	return nil
}

// listenMetrics opens --metrics-addr (nil without it), on the loopback
// interface unless it names a host.
func listenMetrics(o *recordOptions) (net.Listener, error) {
	if o.metricsAddr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", loopbackUnlessNamed(o.metricsAddr))
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr %q: %w", o.metricsAddr, err)
	}
	fmt.Fprintf(o.io.Err, "memrec: metrics at http://%s/metrics\n", ln.Addr())
	return ln, nil
}

// loopbackUnlessNamed is addr, or with no host in it (":9471") the same
// port on the loopback interface: what the metrics and the live page show
// (process names, run names, tags) is not for every network the machine
// is on unless the user says so ("0.0.0.0:9471", "node1:9471").
func loopbackUnlessNamed(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "" {
		return addr
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// startCPUProfile writes a CPU profile to path until stop ("" profiles
// nothing).
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}

// writeHeapProfile writes the heap profile to path ("" writes nothing).
func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	if err := errors.Join(pprof.WriteHeapProfile(f), f.Close()); err != nil {
		return fmt.Errorf("--memprofile: %w", err)
	}
	return nil
}

func printRecordSummary(o *recordOptions, res recorder.Result, dbErr error) {
	w := o.io.Err
	s := res.Sampler
	fmt.Fprintf(w, "\nmemrec: recorded %s\n", units.FormatDuration(res.Wall.Seconds()))
	fmt.Fprintf(w, "  ticks       %d taken at %.2f Hz (interval %v), %d missed (%.3f%% on time); start late p50 %v, p99 %v, max %v\n",
		s.Ticks, s.AchievedHz(), o.interval, s.Missed, 100*s.OnTime(), s.LateP50, s.LateP99, s.LateMax.Round(time.Microsecond))
	if o.source == "sim" {
		if hint := recorder.SpeedHint(o.simSpeed, s.Elapsed.Seconds()/max(res.Wall.Seconds(), 1e-9)); hint != "" {
			fmt.Fprintf(w, "  WARNING     %s\n", hint)
		}
	}
	fmt.Fprintf(w, "  samples     %d device, %d process, %d allocator; %d readings dropped as invalid, %d failed or lost\n",
		s.Samples, s.Procs, res.Torch, s.Invalid, s.Errors+res.DBUnstored.Samples+res.DBLost.Samples)
	ls := res.Listener
	fmt.Fprintf(w, "  marks       %d (%d from the socket), %d socket messages dropped", res.Marks, ls.Marks, ls.Dropped)
	var extra []string
	if ls.Flooded > 0 {
		extra = append(extra, fmt.Sprintf("%d past the per-second bounds", ls.Flooded))
	}
	if ls.Refused > 0 {
		extra = append(extra, fmt.Sprintf("%d connections refused past the limit", ls.Refused))
	}
	if ls.AcceptErrors > 0 {
		extra = append(extra, fmt.Sprintf("%d failed accepts retried (out of file descriptors?)", ls.AcceptErrors))
	}
	if ls.DroppedBytes > 0 {
		extra = append(extra, fmt.Sprintf("%.1f MiB read and dropped (over-long or past the bounds)", float64(ls.DroppedBytes)/(1<<20)))
	}
	if ls.BadCounts > 0 {
		extra = append(extra, fmt.Sprintf("%d %s marks with an impossible count (below 0 or over %d) rejected", ls.BadCounts, recorder.ProbeDropped, recorder.MaxProbeDropped))
	}
	if ls.Cut > 0 {
		extra = append(extra, fmt.Sprintf("%d mark texts cut to %d bytes", ls.Cut, recorder.MaxMarkText))
	}
	if len(extra) > 0 {
		fmt.Fprintf(w, " (%s)", strings.Join(extra, "; "))
	}
	fmt.Fprintln(w)
	if ls.Sites > 0 || o.sites {
		fmt.Fprintf(w, "  sites       %d allocation-site snapshots\n", ls.Sites)
	}
	if res.Wall > 0 {
		where := "sampled in a Go loop"
		if s.Native {
			where = "sampled on a native thread"
		}
		fmt.Fprintf(w, "  recorder    %.2f%% of one core (%.2f%% in the kernel), max RSS %.1f MiB; %s\n",
			100*res.CPU.Seconds()/res.Wall.Seconds(), 100*res.CPUSys.Seconds()/res.Wall.Seconds(), float64(res.MaxRSS)/(1<<20), where)
	}
	switch {
	case dbErr != nil && res.DBOpened:
		fmt.Fprintf(w, "  database    %s, run %q (%s); it was locked by another process for the first %s: %d samples and marks were held in memory and written then",
			o.dbPath, res.Run.Name, status(res.Run), units.FormatDuration(res.DBWait.Seconds()), res.DBHeld)
		if n := res.DBLost.Total(); n > 0 {
			fmt.Fprintf(w, ", %d dropped unwritten to bound memory", n)
		}
		fmt.Fprintln(w)
	case dbErr != nil && errors.Is(dbErr, storage.ErrLocked):
		fmt.Fprintf(w, "  database    NOT RECORDED: %s stayed locked by another process for the whole %s; %d samples and marks held in memory are lost\n",
			o.dbPath, units.FormatDuration(res.DBWait.Seconds()), res.DBLost.Total())
	case dbErr != nil:
		fmt.Fprintf(w, "  database    NOT RECORDED: %v\n", dbErr)
	case res.LastDBErr != nil:
		fmt.Fprintf(w, "  database    %s, run %q: %d failed commits, last: %v\n", o.dbPath, res.Run.Name, res.DBErrors, res.LastDBErr)
		if n := res.DBUnstored.Total(); n > 0 {
			fmt.Fprintf(w, "              NOT STORED: the last %.1f s of the recording (%d samples and marks): kept in memory, but no commit succeeded before the end\n",
				res.DBUnstoredSpan.Seconds(), n)
		}
		if n := res.DBLost.Total(); n > 0 {
			fmt.Fprintf(w, "              %d samples and marks were dropped unwritten to bound memory\n", n)
		}
	default:
		fmt.Fprintf(w, "  database    %s, run %q (%s)\n", o.dbPath, res.Run.Name, status(res.Run))
	}
	if res.Run.Job != "" {
		fmt.Fprintf(w, "  job         %s, node %s (memrec merge joins the nodes' databases)\n", res.Run.Job, res.Run.Host)
	}
	if res.Stopped {
		fmt.Fprintf(w, "  STOPPED     the recording ended early on an internal error (said above); the command ran to its end\n")
	}
	if res.Child {
		fmt.Fprintf(w, "  command     exited with %d\n", res.ExitCode)
	}
}
