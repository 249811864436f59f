// Package jsonl writes a stored run as JSON Lines, the format of package
// wire (docs/format.md): its run and gpu lines, then every series merged
// by time.
//
// It reads the store as every export under formats/ does, through
// storage's public reader (DB.Series and the per-kind iterators), a block
// (a decoded chunk) at a time: Iter.NextBlock gives a block's times,
// Iter.BlockAt its samples, and Iter.Repeats lets a line equal to the one
// before be copied instead of formatted. The iterators need no Close; the
// export uses one per series, from one goroutine.
//
// The import of JSON Lines stays in storage for now (storage/import.go): it
// writes through the store's transaction and is what every package's tests
// load their runs with. It uses no more of storage than the public Loader
// the merge of runs uses. The bounds on what an input may hold
// (storage/limits.go) stay with the store whichever way the import goes:
// the store checks them on every row whoever writes it (a recording, an
// import, a merge), so no writer can skip them.
package jsonl
