package main

import (
	"context"
	"fmt"
	"io"
)

// untilDone runs f, which only computes (reads the database, analyses,
// draws), and returns its error, or ctx's at once when ctx is done first
// (the first Ctrl-C): f is left to finish on its own, and since it writes
// nothing, the process may exit under it.
func untilDone(ctx context.Context, f func() error) error {
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stoppedSaying is interrupted(ctx, err), and says on w what the signal
// left undone (said: "nothing was imported"), since the exit status alone
// prints nothing.
func stoppedSaying(ctx context.Context, w io.Writer, err error, said string) error {
	e := interrupted(ctx, err)
	if _, ok := e.(exitError); ok && err != nil {
		fmt.Fprintf(w, "memrec: stopped (%v): %s\n", context.Cause(ctx), said)
	}
	return e
}
