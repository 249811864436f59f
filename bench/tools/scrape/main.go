// Command scrape fetches a /metrics URL every -every for -for and prints the
// answer times (median, p99, max) and how many scrapes failed.
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:9471/metrics", "metrics URL")
	every := flag.Duration("every", 100*time.Millisecond, "scrape interval")
	dur := flag.Duration("for", 30*time.Second, "how long to scrape")
	wait := flag.Duration("wait", 10*time.Second, "how long to wait for the first answer")
	flag.Parse()
	client := &http.Client{Timeout: time.Second}
	get := func() (time.Duration, int, error) {
		t0 := time.Now()
		resp, err := client.Get(*url)
		if err != nil {
			return 0, 0, err
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return time.Since(t0), int(n), err
	}
	for deadline := time.Now().Add(*wait); ; time.Sleep(20 * time.Millisecond) {
		if _, _, err := get(); err == nil {
			break
		} else if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "scrape:", err)
			os.Exit(1)
		}
	}
	var lat []time.Duration
	failed, size := 0, 0
	tick := time.NewTicker(*every)
	defer tick.Stop()
	for end := time.Now().Add(*dur); time.Now().Before(end); <-tick.C {
		d, n, err := get()
		if err != nil {
			failed++
			continue
		}
		lat = append(lat, d)
		size = n
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		fmt.Println("no scrape answered")
		os.Exit(1)
	}
	q := func(f float64) time.Duration { return lat[min(len(lat)-1, int(f*float64(len(lat))))] }
	fmt.Printf("scrapes %d every %v, %d failed; answer p50 %v p99 %v max %v; %d bytes\n",
		len(lat), *every, failed, q(0.5).Round(time.Microsecond), q(0.99).Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), size)
}
