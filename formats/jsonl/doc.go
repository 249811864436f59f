// Package jsonl reads and writes JSON Lines, the format of package wire
// (docs/format.md). Export writes a stored run: its run and gpu lines,
// then every series merged by time. Import reads files of such lines into
// the store in one transaction.
//
// It reads the store as every export under formats/ does, through
// storage's public reader (DB.Series and the per-kind iterators), a block
// (a decoded chunk) at a time: Iter.NextBlock gives a block's times,
// Iter.BlockAt its samples, and Iter.Repeats lets a line equal to the one
// before be copied instead of formatted. The iterators need no Close; the
// export uses one per series, from one goroutine.
//
// Import writes through storage's public Loader (DB.Load), as the merge of
// runs does: parsed in parallel, applied in order, in one transaction. The
// bounds on what an input may hold (storage/limits.go) stay with the
// store: it checks them on every row whoever writes it (a recording, an
// import, a merge), so no writer can skip them. Only the length of a line
// (MaxLineBytes) is the reader's own bound.
package jsonl
