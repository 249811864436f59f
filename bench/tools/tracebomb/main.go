// Command tracebomb writes a run in memrec's JSONL whose alloc_trace marks
// are hostile, for bench/perf/trace_bombs.sh:
//
//	tracebomb inflate > a.jsonl   # one trace whose few pieces inflate to
//	                              # 256 MiB of zero-byte allocations
//	tracebomb pieces > b.jsonl    # 20 000 marks "0/65536 AAAA", each of its
//	                              # own trace (its own time)
//	tracebomb atcap > c.jsonl     # three traces of 4 Mi zero-byte
//	                              # allocations each (storage.MaxTraceOps)
package main

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
)

const start = 1764430000000000000

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tracebomb inflate|pieces|atcap")
		os.Exit(2)
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	fmt.Fprintf(w, `{"type":"run","name":"bomb","start_ns":%d,"end_ns":%d,"interval_ns":10000000}`+"\n", start, start+int64(60e9))
	fmt.Fprintln(w, `{"type":"gpu","gpu":0,"uuid":"GPU-0","name":"G","total_bytes":80000000000}`)
	fmt.Fprintf(w, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":1073741824}`+"\n", start+int64(1e9))
	switch os.Args[1] {
	case "inflate":
		inflate(w, start+int64(2e9), 256<<20-16)
	case "atcap":
		for i := int64(0); i < 3; i++ {
			inflate(w, start+int64(2e9)+i*int64(1e9), 1<<22)
		}
	case "pieces":
		for i := 0; i < 20000; i++ {
			fmt.Fprintf(w, `{"type":"mark","t_ns":%d,"kind":"alloc_trace","gpu":0,"pid":1,"text":"0/65536 AAAA"}`+"\n", start+int64(2e9)+int64(i)*1e6)
		}
	default:
		fmt.Fprintln(os.Stderr, "usage: tracebomb inflate|pieces|atcap")
		os.Exit(2)
	}
}

// inflate writes a trace at time at: version 1 on GPU 0, pid 1, one
// step, no segments, ops allocations of 0 bytes (each op one zero byte),
// zlib-compressed at its best, in pieces of 3 000 bytes (the probe's).
func inflate(w *bufio.Writer, at int64, ops uint64) {
	var head []byte
	for _, v := range []uint64{1, 0, 1, 1, 0, 0, ops} {
		head = binary.AppendUvarint(head, v)
	}
	var z bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&z, zlib.BestCompression)
	zw.Write(head)
	zero := make([]byte, 1<<20)
	for left := ops; left > 0; left -= min(left, uint64(len(zero))) {
		zw.Write(zero[:min(left, uint64(len(zero)))])
	}
	zw.Close()
	b := z.Bytes()
	n := (len(b) + 2999) / 3000
	for i := 0; i < n; i++ {
		piece := base64.StdEncoding.EncodeToString(b[i*3000 : min(len(b), (i+1)*3000)])
		fmt.Fprintf(w, `{"type":"mark","t_ns":%d,"kind":"alloc_trace","gpu":0,"pid":1,"text":"%d/%d %s"}`+"\n", at, i, n, piece)
	}
}
