package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/recorder"
)

// parseRecord runs the record command's flag parsing alone: what the
// options hold when runRecord would start, or the error before it.
func parseRecord(t *testing.T, args ...string) (*recordOptions, error) {
	t.Helper()
	var out, errb strings.Builder
	g := &globals{io: streams{In: strings.NewReader(""), Out: &out, Err: &errb}}
	var got *recordOptions
	cmd := newRecordCmd(g, func(_ context.Context, o *recordOptions) error {
		got = o
		return nil
	})
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.Execute()
	return got, err
}

// TestRecordFlagsParse holds what record's flags become, apart from
// recording: the command after --, the tags, the durations.
func TestRecordFlagsParse(t *testing.T) {
	t.Parallel()
	o, err := parseRecord(t, "--name", "bs64", "--tag", "batch_size=64", "--tag", "amp=on", "--interval", "1ms",
		"--gpus", "0,1", "--procs", "--duration", "90s", "--", "python", "train.py", "--bs", "64")
	if err != nil {
		t.Fatal(err)
	}
	if o.name != "bs64" || o.interval != time.Millisecond || o.duration != 90*time.Second || o.gpus != "0,1" || !o.procs {
		t.Errorf("options %+v", o)
	}
	if !slices.Equal(o.tags, []string{"batch_size=64", "amp=on"}) {
		t.Errorf("tags %v", o.tags)
	}
	if !slices.Equal(o.command, []string{"python", "train.py", "--bs", "64"}) {
		t.Errorf("command %v: the flags after -- are the command's", o.command)
	}
	if o, err := parseRecord(t); err != nil || o.interval != 10*time.Millisecond || o.source != "nvml" || len(o.command) != 0 {
		t.Errorf("defaults: %+v, %v", o, err)
	}
}

// TestRecordFlagErrors: a flag memrec cannot read is refused before
// anything starts, naming the flag.
func TestRecordFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--interval", "10"}, `"--interval"`},
		{[]string{"--interval", "10"}, "no unit"},
		{[]string{"--duration", "soon"}, `"--duration"`},
		{[]string{"extra", "--", "python"}, `unexpected argument "extra"`},
		{[]string{"--no-such-flag"}, "--no-such-flag"},
	} {
		o, err := parseRecord(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %s", tc.args, err, tc.want)
		}
		if o != nil {
			t.Errorf("%v: the command would have run", tc.args)
		}
	}
}

// TestAllocTraceByDefault: a command recorded gets the allocator trace
// unless --alloc-trace=false, or --sites (which uses the allocator's
// history) or --jax without --alloc-trace given; --alloc-trace given
// without a command is refused by name.
func TestAllocTraceByDefault(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"--", "python", "train.py"}, true},
		{[]string{"--alloc-trace=false", "--", "python", "train.py"}, false},
		{[]string{"--sites", "--", "python", "train.py"}, false},
		{[]string{"--sites", "--alloc-trace", "--", "python", "train.py"}, true},
		{[]string{"--jax", "--", "python", "train.py"}, false},
		{[]string{"--source", "sim"}, false},
	} {
		o, err := parseRecord(t, tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		var opts recorder.Options
		cleanup, err := probeEnv(o, &opts)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		cleanup()
		if got := slices.Contains(opts.Env, "MEMREC_ALLOC_TRACE=1"); got != tc.want {
			t.Errorf("%v: MEMREC_ALLOC_TRACE=1 in the env %v, want %v", tc.args, got, tc.want)
		}
	}
	o, err := parseRecord(t, "--source", "sim", "--alloc-trace")
	if err != nil {
		t.Fatal(err)
	}
	var opts recorder.Options
	if _, err := probeEnv(o, &opts); err == nil || !strings.Contains(err.Error(), "--alloc-trace needs a command") {
		t.Errorf("--alloc-trace without a command: %v", err)
	}
}
