// Package wire is memrec's interchange format: the records that move
// between programs (device, process and allocator samples, marks, site
// snapshots and the budget of a watched model) and the JSON line each is
// written as.
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
// A Parser and a SeriesFormat are not safe for concurrent use; the Append
// functions are.
//
// The files: types.go holds the records and the mark kinds and snapshot
// reasons; budget.go the budget, which rides in a torch line; fields.go
// each kind's integer fields, once, for the parser, the Append functions and
// storage's columns; line.go the line types, Parser, the Append
// functions and SeriesFormat (the export's faster Append).
package wire
