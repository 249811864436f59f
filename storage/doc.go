// Package storage keeps memrec's runs in one bbolt database file.
//
// A file holds many runs. Each run has metadata (name, host, times, tags,
// GPUs, counts) stored as JSON under its id, and six kinds of data: device
// samples (NVML, per GPU), process samples (NVML, per GPU and pid),
// allocator samples (the PyTorch probe, per GPU and pid), marks,
// allocation-site snapshots (one row per site, per GPU and pid; a snapshot
// is the rows of one time, its untracked row first; sites.go) and the
// budget of a watched model (per GPU and pid; budget.go).
//
// The records themselves (DeviceSample, ProcSample, TorchSample, Mark,
// SiteSample, BudgetSample) are defined in the subpackage wire, with their
// JSON line form, and named here by aliases. schema.go maps each kind to
// its stored columns, once.
//
// The files by job:
//   - store.go: opening the file (its lock, its format version, the trim at
//     close), listing, deleting and tagging runs, a run's series table, and
//     Check, which decodes every chunk and verifies its checksum.
//   - types.go: the run metadata (Run, GPU, HostInfo, Counts, Recorder) and
//     the aliases of wire's record types (their constants, such as
//     wire.MarkStep, are used from wire).
//   - schema.go: each kind of series mapped to its stored columns, once.
//   - series.go: chunk groups and keys, and the buffer of one group that
//     sorts its rows and seals them into chunks.
//   - writer.go: the run writer under Loader and AddSites, and the
//     Appender of a live recording, committing on its timer.
//   - iter.go: Iter, reading one series back over a time range (sample by
//     sample, or a block at a time for the exports), and the list of a
//     run's series: the one reader every export under formats/ uses.
//   - load.go: Loader, whole runs written in one transaction, row by row,
//     for the import and the merge of runs.
//   - budget.go: the budget series (memrec.watch), stored apart from the
//     torch series it rides with on the wire, and read back beside it.
//   - sites.go: AddSites, site snapshots added to an existing run.
//   - import.go: JSON Lines into the database, parsed in parallel, applied
//     in order, through one Loader.
//   - summary.go: each sealed chunk's summary of its device and allocator
//     series (pieces of at most PieceSamples samples: first and last time,
//     count, and per drawn column first, last, lowest, highest), and
//     Overview's reading of them; Compact adds those a file lacks.
//   - compact.go: the file rewritten without its free pages, checked, then
//     renamed over the original.
//   - limits.go: bounds on times, runs, GPUs and pids (docs/limits.md),
//     checked on every row whoever writes it.
//   - doc.go: this overview.
//
// The chunk bytes are the subpackage internal/chunk (its doc.go is the
// grammar).
//
// Data is stored in compressed chunks, never one key per sample;
// internal/chunk explains the bytes. A chunk holds the rows of one group of series: marks
// are one group, the device and process series (sampled on the same NVML
// tick) another, each allocator, site and budget series its own. Chunk keys are
// group | first time | sequence, big endian, so a time-range read is a
// cursor Seek.
//
// Writing: an Appender buffers samples and commits on a timer (default 1 s)
// and on Close. Each commit writes the chunks sealed since the last one and
// rewrites the group's open chunk, so a writer that dies loses at most one
// interval; its run stays listed as incomplete. The pages each commit
// replaces stay in the file as free pages; Compact rewrites the file
// without them (memrec record does at its end). A Loader (Load) writes
// whole runs in one transaction, all or nothing: Import and package merge
// write through it.
//
// Reading: Iter decodes one chunk at a time, opening a short read
// transaction per chunk and copying values out before it ends, so reading
// a run of any length takes constant memory and blocks no writer for long.
//
// Locking: the file is opened with a lock timeout. A writer holds it
// exclusively, readers share it; whoever cannot get it gets ErrLocked
// after the timeout rather than waiting forever. A recording's writer
// (Options.ShortLock) takes the lock only around each transaction, so
// readers open the file between its commits and see the live run as its
// last commit left it.
//
// Times are Unix nanoseconds in the API and stored to 1 µs: a stored time
// is the sample's time rounded down to the microsecond.
package storage
