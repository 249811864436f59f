package analysis

import (
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// heapBound is the heap every command stays under (docs/limits.md, cmd's
// softMemoryLimit).
const heapBound = 440 << 20

// hostileTraceRun is a run of one GPU whose marks carry hostile
// allocator traces (see the cases in TestAnalyzeOfHostileTracesStaysUnderTheHeapBound).
func hostileTraceRun(marks func(g *analysistest.Gen, t0 int64)) string {
	g := &analysistest.Gen{}
	const t0 = 1764430000000000000
	g.Line(`{"type":"run","name":"bomb","start_ns":%d,"end_ns":%d,"interval_ns":10000000}`, t0, t0+int64(60e9))
	g.Line(`{"type":"gpu","gpu":0,"uuid":"GPU-0","name":"G","total_bytes":80000000000}`)
	g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":1073741824}`, t0+int64(1e9))
	marks(g, t0)
	return g.String()
}

// TestAnalyzeOfHostileTracesStaysUnderTheHeapBound analyses runs whose
// allocator traces claim far more than they hold: one trace whose few
// dozen KiB of marks inflate to 64 Mi ops, 16 times MaxTraceOps (the old
// analysis decoded them all, at 17 bytes an op: past heapBound), three
// at MaxTraceOps, and 20 000 marks each announcing a trace of 65 536
// pieces (the old one made a slot for each). Each is analysed within the heap bound, counted as every byte
// allocated, with one note that says what was left out.
func TestAnalyzeOfHostileTracesStaysUnderTheHeapBound(t *testing.T) {
	bomb := func(g *analysistest.Gen, at int64, claim uint64) {
		var head []byte
		ops := int(claim)
		for _, v := range []uint64{1, 0, 1, 1, 0, 0, claim} {
			head = binary.AppendUvarint(head, v)
		}
		var z bytes.Buffer
		w, _ := zlib.NewWriterLevel(&z, zlib.BestSpeed) // zeros shrink about as far, in a quarter of the time
		w.Write(head)
		zero := make([]byte, 1<<20)
		for left := ops; left > 0; left -= min(left, len(zero)) {
			w.Write(zero[:min(left, len(zero))])
		}
		w.Close()
		b := z.Bytes()
		n := (len(b) + 2999) / 3000
		for i := 0; i < n; i++ {
			g.Line(`{"type":"mark","t_ns":%d,"kind":"alloc_trace","gpu":0,"pid":1,"text":"%d/%d %s"}`, at, i, n,
				base64.StdEncoding.EncodeToString(b[i*3000:min(len(b), (i+1)*3000)]))
		}
	}
	for _, c := range []struct {
		name  string
		marks func(g *analysistest.Gen, t0 int64)
		note  string
	}{
		{"inflating trace", func(g *analysistest.Gen, t0 int64) { bomb(g, t0+int64(2e9), 64<<20) }, "ops, more than"},
		// Each at the most ops a trace may have: the third is past the budget.
		{"three inflating traces", func(g *analysistest.Gen, t0 int64) {
			for i := int64(0); i < 3; i++ {
				bomb(g, t0+int64(2e9)+i*int64(1e9), storage.MaxTraceOps)
			}
		}, "past the decoding budget"},
		{"20 000 announced pieces", func(g *analysistest.Gen, t0 int64) {
			for i := int64(0); i < 20000; i++ {
				g.Line(`{"type":"mark","t_ns":%d,"kind":"alloc_trace","gpu":0,"pid":1,"text":"0/65536 AAAA"}`, t0+int64(2e9)+i*int64(1e6))
			}
		}, "20000 malformed pieces or traces, the first: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			runs, err := jsonl.Import(db, []jsonl.Source{{Name: "bomb.jsonl", R: strings.NewReader(hostileTraceRun(c.marks))}}, jsonl.ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			rep, err := Analyze(db, runs[0], Options{})
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > heapBound {
				t.Errorf("allocated %d MiB, past the heap bound of %d MiB", got>>20, heapBound>>20)
			}
			var notes []string
			for _, n := range rep.Notes {
				if strings.Contains(n, "allocator trace") {
					notes = append(notes, n)
				}
			}
			if len(notes) != 1 || !strings.Contains(notes[0], c.note) {
				t.Errorf("notes about the traces: %q, want one saying %q", notes, c.note)
			}
		})
	}
}
