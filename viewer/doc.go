// Package viewer serves memrec's web viewer: one page that draws a run's
// memory per GPU with uPlot, and a read-only JSON API the page asks for
// each window it shows (/api/runs, /api/window, /api/at, /api/marks, and
// /api/sites for the stacked chart of a GPU's allocation sites).
//
// The data comes from a Source: DBSource reads a database file, holding
// its lock only while it reads; the recorder's live index feeds the same
// page while it records (cmd wires either). A run's lines are summarised
// once into pyramids of min/max buckets (series/), so a window of
// any width is answered from at most a few thousand buckets, and a window
// of fewer than series.Base samples per pixel is read sample by sample:
// the points drawn are M4 (first, last, lowest, highest per pixel column),
// so the line is the one every sample would draw.
//
// The server is safe for concurrent use. It serves GET only; every bad
// parameter is a 4xx with a message (server.go, request.go).
package viewer
