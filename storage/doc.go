// Package storage keeps memrec's runs in one bbolt database file.
//
// A file holds many runs. Each run has metadata (name, host, times, tags,
// GPUs, counts) stored as JSON under its id, and five kinds of data:
// device samples (NVML, per GPU), process samples (NVML, per GPU and pid),
// allocator samples (the PyTorch probe, per GPU and pid), marks, and
// allocation-site snapshots (one row per site, per GPU and pid; a snapshot
// is the rows of one time, its untracked row first; sites.go).
//
// The records themselves (DeviceSample, ProcSample, TorchSample, Mark,
// SiteSample) are
// defined in the subpackage wire, with their JSON line form, and named here
// by aliases. schema.go maps each kind to its stored columns, once.
//
// The files by job: store.go opens the file, lists and checks runs;
// types.go is the run metadata; writer.go and series.go buffer samples into
// chunks; schema.go maps kinds to columns; iter.go reads series back;
// import.go and export.go move runs in and out as JSON Lines, csv.go as
// CSV; merge.go joins the runs of a multi-node job; compact.go rewrites a
// file without its free pages; limits.go bounds what is accepted
// (docs/limits.md). The chunk bytes are the subpackage
// internal/chunk (its doc.go is the grammar).
//
// Data is stored in compressed chunks, never one key per sample;
// internal/chunk explains the bytes. A chunk holds the rows of one group of series: marks
// are one group, the device and process series (sampled on the same NVML
// tick) another, each allocator and site series its own. Chunk keys are
// group | first time | sequence, big endian, so a time-range read is a
// cursor Seek.
//
// Writing: an Appender buffers samples and commits on a timer (default 1 s)
// and on Close. Each commit writes the chunks sealed since the last one and
// rewrites the group's open chunk, so a writer that dies loses at most one
// interval; its run stays listed as incomplete. The pages each commit
// replaces stay in the file as free pages; Compact rewrites the file
// without them (memrec record does at its end). Import writes a whole input
// in one transaction: all or nothing.
//
// Reading: Iter decodes one chunk at a time, opening a short read
// transaction per chunk and copying values out before it ends, so reading
// a run of any length takes constant memory and blocks no writer for long.
//
// Locking: the file is opened with a lock timeout. A writer holds it
// exclusively, readers share it; whoever cannot get it gets ErrLocked
// after the timeout rather than waiting forever.
//
// Times are Unix nanoseconds in the API and stored to 1 µs: a stored time
// is the sample's time rounded down to the microsecond.
package storage
