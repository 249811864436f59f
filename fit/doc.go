// Package fit finds, by trial, the largest value of a job's parameter (a
// batch size, a sequence length) whose training steps fit on the GPU.
//
// A Search owns a bracket: the largest value known to run and the
// smallest known to fail. Each trial runs the job at one value, recorded
// as a run of its own through a Launcher that the caller supplies (the
// command line, or the simulated job); a watch between the recording and
// its store counts each rank's step marks and OOM marks and ends the
// trial's process group once every rank has done its steps, or once a rank
// is stalled after an OOM. A trial that ran moves the bracket's low end,
// one that ran out of memory its high end; any other failure ends the
// search.
//
// The values tried come from what the runs so far say, in this order: the
// need curve's prediction over earlier runs and trials (its pessimistic,
// then optimistic end); the value where the allocator's reserved memory at
// the largest value that ran, grown by the cost of a unit, fills the GPU
// (held); the value the allocator's state at an OOM puts the limit at
// (guess); then steps of the prediction's width, doubling, until the limit
// is bracketed, and bisection to the precision. Where several processes
// share a GPU the largest value that ran is run again, SharedRuns times,
// since whether it fits varies from run to run.
//
// The result recommends the largest value whose projected need, with the
// whole run's growth and the headroom, fits under what the largest value
// that ran used. A Search is used by one goroutine; it writes nothing but
// its trials' runs.
package fit
