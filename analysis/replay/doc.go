// Package replay models PyTorch's caching allocator from a job's recorded
// requests.
//
// ReplayAllocator replays a trace (storage.AllocTrace) on a device of a
// given capacity with the allocator's rules (rounding, splitting, the
// small and large pools, freeing its cache and retrying at the limit;
// AllocSettings for PYTORCH_CUDA_ALLOC_CONF's options) and says whether
// it fits and what it reserved and stranded. ReplayScale grows one run's
// requests to any value of a setting (a batch size, a sequence length)
// from two runs' traces; NeedCurve projects what a job needs at a value
// from the peaks of runs at a few. allowance.go holds what the allocator
// may hold beyond the peak where no trace says (AllocatorAllowance,
// StrandedSegments) and how well a replay is known to match.
//
// Everything here works on values passed in: nothing reads the store or a
// Report. Values are plain data; functions are safe for concurrent use.
package replay
