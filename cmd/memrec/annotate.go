package main

import (
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

var errNoSocket = errors.New("no marks socket: MEMREC_SOCKET is not set (run inside memrec record, or pass --socket)")

type annotateOptions struct {
	*globals
	kind   string
	epoch  int
	step   int
	rank   int
	socket string
	// timeout is how long the recorder has to take the mark.
	timeout time.Duration
}

func newAnnotateCmd(g *globals) *cobra.Command {
	o := &annotateOptions{globals: g, timeout: recorder.SendTimeout}
	cmd := &cobra.Command{
		Use:   "annotate [TEXT]",
		Short: "Send a mark to the recording that runs this command",
		Example: `  memrec annotate "checkpoint saved"
  memrec annotate --kind epoch_start --epoch 3`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			text := ""
			if len(args) == 1 {
				text = args[0]
			}
			return runAnnotate(o, text)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.kind, "kind", "event", "event, epoch_start, epoch_end, step or oom")
	f.IntVar(&o.epoch, "epoch", -1, "epoch number")
	f.IntVar(&o.step, "step", -1, "step number")
	f.IntVar(&o.rank, "rank", -1, "rank of the process")
	f.StringVar(&o.socket, "socket", os.Getenv("MEMREC_SOCKET"), "the recorder's socket (env MEMREC_SOCKET)")
	return cmd
}

func runAnnotate(o *annotateOptions, text string) error {
	kind := storage.MarkKind(o.kind)
	switch kind {
	case wire.MarkEvent, wire.MarkEpochStart, wire.MarkEpochEnd, wire.MarkStep, wire.MarkOOM:
	default:
		return fmt.Errorf("--kind %q: want event, epoch_start, epoch_end, step or oom", o.kind)
	}
	if (kind == wire.MarkEpochStart || kind == wire.MarkEpochEnd) && o.epoch < 0 {
		return fmt.Errorf("--kind %s needs --epoch", o.kind)
	}
	if kind == wire.MarkStep && o.step < 0 {
		return errors.New("--kind step needs --step")
	}
	if o.socket == "" {
		return errNoSocket
	}
	m := storage.NewMark(time.Now().UnixNano(), kind)
	m.Epoch, m.Step, m.Rank, m.Text = o.epoch, o.step, o.rank, text
	if err := recorder.SendWithin(o.socket, m, o.timeout); err != nil {
		return fmt.Errorf("%w (is memrec record still running?)", err)
	}
	return nil
}
