package storage

import (
	"errors"
	"fmt"
	"sync"
)

// A DecodeBudget bounds the memory that reading a run keeps: the bytes a
// run's encoded pieces (allocator traces) are kept in, unpacked to and
// decoded into, and what an analysis keeps of a run beyond its samples
// (its marks other than steps, its site snapshots; package analysis takes
// them with Take). Every decoder takes from it before it allocates, so a
// few bytes that claim to stand for a huge trace cost nothing. One command makes
// one budget and passes it to the reading of every run it touches: the
// bound is on the command's sum, whatever its runs and their pieces.
// What is taken is never given back (a failed trace's bytes count too),
// so the bound holds whatever order the pieces come in.
//
// A DecodeBudget is safe for concurrent use. The zero value and a nil
// *DecodeBudget allow nothing; use NewDecodeBudget.
type DecodeBudget struct {
	mu          sync.Mutex
	limit, used int64
}

// DefaultDecodeBudget is the budget of one command: room for many times
// the largest trace the probe sends (it caps its compressed bytes per
// process), and with the rest of an analysis under the commands' soft
// heap limit (cmd/memrec softMemoryLimit).
const DefaultDecodeBudget = 128 << 20

// ErrDecodeBudget is wrapped by the error of a decoder that would take
// more than its budget has left.
var ErrDecodeBudget = errors.New("past the decoding budget")

// NewDecodeBudget returns a budget of limit bytes.
func NewDecodeBudget(limit int64) *DecodeBudget { return &DecodeBudget{limit: limit} }

// take reserves n bytes, or returns an error wrapping ErrDecodeBudget
// (and reserves nothing) when fewer are left.
func (b *DecodeBudget) take(n int64, what string) error {
	if b == nil {
		return fmt.Errorf("%s: %d bytes, no budget: %w", what, n, ErrDecodeBudget)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if n < 0 || n > b.limit-b.used {
		return fmt.Errorf("%s would take %d bytes, %d of the command's %d left: %w", what, n, b.limit-b.used, b.limit, ErrDecodeBudget)
	}
	b.used += n
	return nil
}

// Take reserves n bytes for what (named in the error), or returns an
// error wrapping ErrDecodeBudget and reserves nothing when fewer are
// left. A caller takes before it keeps what it read.
func (b *DecodeBudget) Take(n int64, what string) error { return b.take(n, what) }

// Used is how many bytes were taken.
func (b *DecodeBudget) Used() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Limit is the budget's size in bytes.
func (b *DecodeBudget) Limit() int64 { return b.limit }
