// Package csv writes a stored run as CSV, one row per NVML tick and a
// column per GPU and figure, for pandas and spreadsheets (docs/interop.md
// has the columns). It reads the store through storage's public iterators
// (DB.Series and the per-kind sample iterators), merged by time, as every
// export under formats/ does, and streams: memory grows with the number of
// processes and ranks, never with the run's length.
package csv
