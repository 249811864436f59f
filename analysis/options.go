package analysis

import "github.com/memrec/memrec/storage"

// Options tune the analysis.
type Options struct {
	// Width is the number of timeline buckets kept for charts (0: 1600).
	Width int
	// Lines, when set, is given every device and allocator sample the
	// analysis reads, a block at a time, each series in time order (the
	// report builds its page's index from them rather than read the run a
	// second time). It must be safe for concurrent use: GPUs are analysed
	// side by side.
	Lines Lines
	// Budget bounds what reading the run keeps beyond its samples: its
	// allocator traces decoded, its marks other than steps, its site
	// snapshots. A command passes one budget to everything it reads, all
	// its runs (nil: one of storage.DefaultDecodeBudget for this run
	// alone). What is past it is left out, and a note says so.
	Budget *storage.DecodeBudget
}

// Lines receives the samples of a run's device and allocator series
// (series.Index has these methods).
type Lines interface {
	// SizeHint is told, before any sample, how many a line of a device
	// series and of an allocator series will get.
	SizeHint(device, allocator int64)
	AddDeviceColumns(gpu int, ts, used, reserved []int64)
	AddTorchColumns(gpu, pid int, ts, allocated, reserved []int64)
}
