package torchsnap

import (
	"errors"
	"fmt"

	"github.com/memrec/memrec/storage"
)

// Limits bound what reading one snapshot may build, so that no pickle,
// however small or however it shares its objects, makes Read take
// unbounded memory or time. docs/limits.md lists them with their reasons.
//
// The pickle decoder counts what the program builds (Elements, String,
// StringBytes); Read then bounds what it expands from that (Blocks,
// Entries, Frames) and Snapshots what it keeps (Sites). A list that many
// blocks share (a memo reference) is one list to the decoder but one
// frame list per block to a naive reader: Read converts each shared list
// once, and counts every block and entry it yields.
type Limits struct {
	// Elements bounds the values the pickle program builds: every value
	// pushed, mark set, memo entry and list or dict slot filled.
	Elements int64
	// String bounds one string's bytes; StringBytes all strings' together.
	String      int
	StringBytes int64
	// Blocks and Entries bound the blocks and the trace entries of all
	// devices together.
	Blocks, Entries int
	// Frames bounds one stack: past it the outer frames are left out (a
	// site is the innermost user frame, MaxStack callers are kept).
	Frames int
	// Sites bounds the sites one site snapshot keeps: past it the sites
	// with the fewest live bytes are added up as one "other" row.
	Sites int
}

// DefaultLimits are scaled to real snapshots: they hold the trace of
// PyTorch's own example (max_entries=100 000) at the values a trace entry
// takes in the real snapshots in testdata (about 38), and as many blocks,
// 5 M values in all. The costliest value is an empty list (an object and
// its stack slot); 5 M of them stay near memrec's soft heap limit
// (GOMEMLIMIT), where ten times as many would not finish (see
// bench/perf/pickle_bombs.sh and bench/README.md, "Figures behind the
// code's constants"). One string may be 1 MiB, all of them 64 MiB.
// Python's recursion limit is 1 000 frames.
var DefaultLimits = Limits{
	Elements:    5_000_000,
	String:      1 << 20,
	StringBytes: 64 << 20,
	Blocks:      100_000,
	Entries:     100_000,
	Frames:      1_000,
	Sites:       4_096,
}

// ErrTooLarge is returned (as a *LimitError) for a snapshot past one of
// its Limits.
var ErrTooLarge = errors.New("snapshot past memrec's limits")

// LimitError says which limit a snapshot went past.
type LimitError struct {
	What  string // "values", "blocks", ...
	Limit int64
	Got   int64 // when known, else 0
}

func (e *LimitError) Error() string {
	if e.Got > 0 {
		return fmt.Sprintf("%d %s, more than the %d memrec reads (docs/limits.md)", e.Got, e.What, e.Limit)
	}
	return fmt.Sprintf("more than %d %s, the most memrec reads (docs/limits.md)", e.Limit, e.What)
}

// Is makes errors.Is(err, ErrTooLarge) true for a *LimitError.
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// Trace times must lie in memrec's span of valid times, 1970..2200
// (storage's bound), in microseconds: checked before any arithmetic, so
// that a time_us of ±2^63 cannot wrap when turned into nanoseconds.
var maxTimeUS = storage.LatestTime / 1000
