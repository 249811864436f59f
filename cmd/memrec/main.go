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
// that run long (record, demo) take as the signal to stop; it then stops
// catching them, so a second one ends any command at once. (record passes
// both on to its child command as well, through its own channel.)
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(ctx, stop)
	return ctx, stop
}
