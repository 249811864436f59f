// Package tensorboard writes an analysed run as a TensorBoard event file, so
// that memory shows beside the losses in TensorBoard (and in tools that sync
// TensorBoard logs).
//
// An event file is a sequence of TFRecords (record.go) each holding one
// tensorflow.Event protocol buffer (event.go); only the few fields that
// scalars need are written. Export (export.go) turns an analysis.Report into
// scalars: the timelines, which analysis already downsampled with M4 so no
// peak is lost, the per-step peaks, fragmentation and the per-epoch deltas.
//
// Writers are not safe for concurrent use. Nothing here reads the database:
// the caller analyses the run with analysis.Options.Width = Buckets(points).
package tensorboard
