// Package units writes bytes and durations for people (512 B, 3.4 MiB,
// 1m30s), the one spelling every analysis, report and command uses. Its
// functions are pure and safe for concurrent use.
package units
