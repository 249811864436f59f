// Package analysis turns a stored run into numbers: per-epoch deltas, leak
// slopes with a verdict (the rules in package growth),
// fragmentation, the memory PyTorch never sees, peaks, OOM post-mortems,
// per-process figures, the budget at the peak with what would lower it
// (package budget, run by budgetpass.go) and where the memory is held by
// allocation site (package sites, run by sitespass.go).
//
// Analyze streams over a run's chunks once per GPU, so its memory grows with
// the number of marks and steps, not with the number of samples; it returns
// a Report, plain data that is safe to copy, to encode as JSON and to hand
// to package report. Package compare, which imports this one, sets Reports
// side by side and projects memory against a tag; how a run ended
// (outcome.go) is here, for fit's trials as well. The allocator replay and
// the need curve are in package replay. docs/analysis.md gives the
// definitions.
package analysis
