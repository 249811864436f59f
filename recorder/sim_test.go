package recorder

import (
	"strings"
	"testing"
	"time"
)

// TestSimScalesWithBatchAndSeqLen: the step's peak allocation grows in
// proportion to batch × length beyond the model's fixed memory, from the
// tags; a bad tag names itself.
func TestSimScalesWithBatchAndSeqLen(t *testing.T) {
	peak := func(tags map[string]string) int64 {
		t.Helper()
		var cfg SimConfig
		if err := cfg.SetTags(tags); err != nil {
			t.Fatal(err)
		}
		cfg.GPUs = 1
		s, err := NewSim(cfg, time.Unix(0, 0))
		if err != nil {
			t.Fatal(err)
		}
		return s.job.Peak(0, 5)
	}
	ref := peak(nil)
	fixed := ref - 4<<30 // the reference job holds 4 GiB of activations
	for _, tc := range []struct {
		tags   map[string]string
		factor float64
	}{
		{map[string]string{"batch_size": "64"}, 1},
		{map[string]string{"batch_size": "16"}, 0.25},
		{map[string]string{"batch_size": "128", "seq_len": "256"}, 1},
		{map[string]string{"seq_len": "2048"}, 4},
		{map[string]string{"batch_size": "1e30"}, float64(1<<50) / (4 << 30)}, // capped, not wrapped round
	} {
		want := fixed + int64(tc.factor*(4<<30))/512*512
		if got := peak(tc.tags); got != want {
			t.Errorf("%v: peak %d, want %d", tc.tags, got, want)
		}
	}
	for _, bad := range []string{"0", "-1", "NaN", "Inf", "x"} {
		var cfg SimConfig
		err := cfg.SetTags(map[string]string{"seq_len": bad})
		if err == nil || !strings.Contains(err.Error(), "seq_len="+bad) {
			t.Errorf("seq_len=%s: %v", bad, err)
		}
	}
}

// TestSimSpeedHint: a recording that ran slower than asked says how fast
// it ran and a speed with a fifth to spare; one that kept pace says nothing.
func TestSimSpeedHint(t *testing.T) {
	for _, tc := range []struct {
		speed, achieved float64
		want            string
	}{
		{2000, 400, "ran the simulated job at 400× where --sim-speed 2000 asked, so it took 5× as long in real time; every tick of the job's --duration was recorded: --sim-speed 320 or lower keeps pace"},
		{100, 96, ""},
		{1, 0.5, ""},
		{2, 1.1, "at real time (--sim-speed 1)"},
	} {
		got := SpeedHint(tc.speed, tc.achieved)
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("SpeedHint(%g, %g) = %q, want %q", tc.speed, tc.achieved, got, tc.want)
		}
	}
}
