// Package recorder takes a training run's memory as it happens and hands it
// to a Store that its caller opens: DBStore (a storage.Appender over an
// open database), HeldStore (memory, until a database another process
// holds is free) or Discard.
//
// A Source is the machine's GPUs: NVML (NewNVML over any nvml.Interface,
// OpenNVML for the driver's library) or the simulator (NewSim), which also
// produces the marks and allocator samples a probe would send. A Sampler
// reads every selected GPU on an absolute schedule, tick k at t0 + k·interval:
// a tick that cannot start within one interval of its deadline is counted as
// missed, never shifted. Where the source is NVML opened with OpenNVML, the
// ticks run on a native thread outside the Go runtime (nvloop_linux.c), which
// calls the library directly and leaves its readings in a ring that Go drains
// once a second; otherwise a Go loop on a locked OS thread samples. Process
// lists are read when a GPU's used memory moved, and at least every
// ProcsEvery.
//
// A Listener takes marks and allocator samples from probes over a private
// Unix socket; a malformed line is counted and dropped. Record ties the
// three to a child command: it starts the command with MEMREC_SOCKET,
// MEMREC_RUN and MEMREC_GPUS, passes SIGINT and SIGTERM on, stores its exit
// status as a mark, and never stops or fails the command for its own
// trouble (a database that cannot be written is reported, not fatal).
//
// Sinks must be safe for concurrent use: the sampler and the listener append
// together. Sampler.Run and Record block until their context is done (or the
// command exits); Sources must be closed by their opener.
package recorder
