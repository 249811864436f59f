// Package compare sets analysed runs side by side and projects memory
// against a numeric tag: memrec compare, compare --by and fit read it.
//
// It works on analysis.Reports alone and imports analysis, never the
// reverse. Summarize reduces one report to its worst GPU's figures
// (summary.go); Compare sets several side by side with each figure's ratio
// to a baseline's (compare.go). FitByTag adds a ByTag (bytag.go): the runs
// as points of a tag's value, the runs that ran out of memory as bounds,
// and the largest value that fits the GPU. Its basis (basis.go) is the
// job's per-step peak allocated where every run has allocator samples,
// with an allowance for what the caching allocator holds beyond it at the
// limit (measured where a run reached it, else from the largest segment
// and the inactive split, traceless.go, else replay.AllocatorAllowance);
// where the two largest values' runs have allocator traces, the allocator
// replayed over the job's requests (replay.go), checked against every
// traced run and against the runs that failed, and under each allocator
// setting (limitsettings.go). Without allocator samples it falls back to
// peak device memory, which holds the allocator's cache and errs low. The
// need curve and its interval are package replay's NeedCurve; what would
// help at the largest value comes from package budget (advice.go).
//
// Nothing here reads the store: Compare and FitByTag fill a Comparison,
// plain data, safe to copy and to encode as JSON. docs/analysis.md
// gives the definitions.
package compare
