// Command memrec records the GPU memory of a training run and explains it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	limitMemory(os.Getenv)
	os.Exit(execute(context.Background(), os.Args[1:], defaultIO()))
}

// signalContext is canceled by the first SIGINT or SIGTERM, which commands
// that run long (record, demo, export) take as the signal to stop; the
// context's cause is then a signalCause naming the signal (for the exit
// status 128+N). It then stops catching them, so a second one ends any
// command at once. (record passes both on to its child command as well,
// through its own channel.)
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			signal.Stop(ch)
			cancel(signalCause{s})
		case <-ctx.Done():
			signal.Stop(ch)
		}
	}()
	return ctx, func() { cancel(context.Canceled) }
}

// signalCause is the cause of signalContext's end by a signal.
type signalCause struct{ sig os.Signal }

func (s signalCause) Error() string { return s.sig.String() + " signal received" }

// number is the signal's number (2 for SIGINT, 15 for SIGTERM).
func (s signalCause) number() int {
	if n, ok := s.sig.(syscall.Signal); ok {
		return int(n)
	}
	return int(syscall.SIGINT)
}
