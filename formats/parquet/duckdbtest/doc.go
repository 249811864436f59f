// Package duckdbtest reads memrec's Parquet export back with DuckDB, an
// engine that shares no code with memrec or parquet-go, through its Go
// bindings. It is a module of its own so that memrec itself does not
// depend on DuckDB's C++ library; CI runs its test (.ci/run).
package duckdbtest
