// Command flood floods a recorder's marks socket ($MEMREC_SOCKET) with
// large marks from several connections at once, as fast as the socket
// takes them, for a while; it prints how many it sent. bench/perf/flood.sh runs
// it under memrec record.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

func main() {
	conns := flag.Int("conns", 4, "connections at once")
	size := flag.Int("size", 60<<10, "bytes of text per mark")
	dur := flag.Duration("duration", 10*time.Second, "how long to flood")
	flag.Parse()
	path := os.Getenv("MEMREC_SOCKET")
	if path == "" {
		fmt.Fprintln(os.Stderr, "flood: MEMREC_SOCKET is not set; run under memrec record")
		os.Exit(2)
	}
	m := storage.NewMark(0, wire.MarkEvent)
	m.Text = strings.Repeat("x", *size)
	var batch []byte
	for range 16 {
		batch = wire.AppendMark(batch, m) // t_ns 0: the recorder dates it
	}
	var sent atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(*dur)
	for range *conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("unix", path)
			if err != nil {
				fmt.Fprintln(os.Stderr, "flood:", err)
				return
			}
			defer c.Close()
			for time.Now().Before(end) {
				if _, err := c.Write(batch); err != nil {
					return
				}
				sent.Add(16)
			}
		}()
	}
	wg.Wait()
	fmt.Fprintf(os.Stderr, "flood: sent %d marks of %d bytes over %d connections in %v (%.0f MiB/s)\n",
		sent.Load(), *size, *conns, *dur, float64(sent.Load())*float64(*size)/(1<<20)/dur.Seconds())
}
