// Command scrapeload is a hostile scrape load: -loops goroutines each fetch
// a /metrics URL again and again, as fast as they are answered, for -for,
// each over its own keep-alive connection. It prints how many scrapes were
// answered (HTTP 200), refused (503) and failed (timeouts, resets).
package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:9471/metrics", "metrics URL")
	loops := flag.Int("loops", 200, "concurrent scrape loops")
	dur := flag.Duration("for", 20*time.Second, "how long to scrape")
	wait := flag.Duration("wait", 10*time.Second, "how long to wait for the first answer")
	flag.Parse()
	tr := &http.Transport{MaxIdleConns: *loops, MaxIdleConnsPerHost: *loops, DisableCompression: false}
	client := &http.Client{Timeout: 5 * time.Second, Transport: tr}
	get := func() (int, error) {
		resp, err := client.Get(*url)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, err
	}
	for deadline := time.Now().Add(*wait); ; time.Sleep(20 * time.Millisecond) {
		if _, err := get(); err == nil {
			break
		} else if time.Now().After(deadline) {
			fmt.Fprintln(os.Stderr, "scrapeload:", err)
			os.Exit(1)
		}
	}
	var ok, busy, failed atomic.Int64
	end := time.Now().Add(*dur)
	var wg sync.WaitGroup
	for range *loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				code, err := get()
				switch {
				case err != nil:
					failed.Add(1)
					time.Sleep(10 * time.Millisecond)
				case code == http.StatusOK:
					ok.Add(1)
				default:
					busy.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	fmt.Printf("scrapeload: %d loops for %v: %d answered (%.0f/s), %d refused busy, %d failed\n",
		*loops, *dur, ok.Load(), float64(ok.Load())/dur.Seconds(), busy.Load(), failed.Load())
}
