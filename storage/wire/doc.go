// Package wire is memrec's interchange format: the records that move
// between programs (device, process and allocator samples, and marks) and
// the JSON line each is written as.
//
// Three programs speak it: `memrec import` reads files of these lines,
// `memrec export` writes them, and the recorder's marks socket reads the
// lines a probe sends (untrusted input: every field is checked, nothing
// panics). docs/format.md describes the lines for users.
//
// The records are defined here, not in storage, so that both the import
// pipeline (in storage) and the recorder's socket share one parser without
// an import cycle; storage re-exports them under the same names.
//
// A Parser is not safe for concurrent use; the Append functions are.
package wire
