package tensorboard

import (
	"bufio"
	"io"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The protocol buffer fields written, from TensorFlow's
// core/util/event.proto and core/framework/summary.proto:
//
//	Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5; }
//	Summary { repeated Value value = 1; }
//	Value   { string tag = 1; float simple_value = 2; }
const (
	eventWallTime    protowire.Number = 1
	eventStep        protowire.Number = 2
	eventFileVersion protowire.Number = 3
	eventSummary     protowire.Number = 5
	summaryValue     protowire.Number = 1
	valueTag         protowire.Number = 1
	valueSimple      protowire.Number = 2
)

// FileVersion is the first event of every event file; TensorBoard reads
// version 2 without purging events whose steps go back.
const FileVersion = "brain.Event:2"

// Writer writes events into an event file. It is not safe for concurrent
// use; errors are sticky and returned by Flush.
type Writer struct {
	w   *bufio.Writer
	ev  []byte // the event being encoded
	rec []byte // the event framed as a record
	err error
}

// NewWriter starts an event file on w with the file_version event, dated
// wallTime (Unix seconds). Call Flush at the end.
func NewWriter(w io.Writer, wallTime float64) *Writer {
	ew := &Writer{w: bufio.NewWriterSize(w, 1<<20)}
	ev := protowire.AppendTag(nil, eventWallTime, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(wallTime))
	ev = protowire.AppendTag(ev, eventFileVersion, protowire.BytesType)
	ev = protowire.AppendString(ev, FileVersion)
	ew.write(ev)
	return ew
}

// Scalar writes one event holding one scalar value.
func (w *Writer) Scalar(tag string, step int64, wallTime float64, v float32) {
	valueLen := protowire.SizeTag(valueTag) + protowire.SizeBytes(len(tag)) +
		protowire.SizeTag(valueSimple) + protowire.SizeFixed32()
	summaryLen := protowire.SizeTag(summaryValue) + protowire.SizeBytes(valueLen)

	ev := w.ev[:0]
	ev = protowire.AppendTag(ev, eventWallTime, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(wallTime))
	ev = protowire.AppendTag(ev, eventStep, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(step))
	ev = protowire.AppendTag(ev, eventSummary, protowire.BytesType)
	ev = protowire.AppendVarint(ev, uint64(summaryLen))
	ev = protowire.AppendTag(ev, summaryValue, protowire.BytesType)
	ev = protowire.AppendVarint(ev, uint64(valueLen))
	ev = protowire.AppendTag(ev, valueTag, protowire.BytesType)
	ev = protowire.AppendString(ev, tag)
	ev = protowire.AppendTag(ev, valueSimple, protowire.Fixed32Type)
	ev = protowire.AppendFixed32(ev, math.Float32bits(v))
	w.ev = ev
	w.write(ev)
}

func (w *Writer) write(ev []byte) {
	if w.err != nil {
		return
	}
	w.rec = appendRecord(w.rec[:0], ev)
	_, w.err = w.w.Write(w.rec)
}

// Flush writes what is buffered and returns the first error.
func (w *Writer) Flush() error {
	if w.err != nil {
		return w.err
	}
	return w.w.Flush()
}
