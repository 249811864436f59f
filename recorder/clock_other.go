//go:build !linux

package recorder

import "time"

func preciseSleep(d time.Duration) { time.Sleep(d) }

func prepareThread() {}
