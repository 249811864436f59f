package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// fakeJAXScript imports a fake jax (one GPU whose bytes in use grow by
// 4096 B a step) and marks five steps, as a JAX training script would,
// without importing memrec itself: record --jax loads the probe.
const fakeJAXScript = `
import sys, types
jax = types.ModuleType("jax")
class Dev:
    platform = "gpu"; id = 0; local_hardware_id = 0; in_use = 0
    def memory_stats(self):
        return {"bytes_in_use": self.in_use, "peak_bytes_in_use": self.in_use, "pool_bytes": 1 << 30,
                "largest_free_block_bytes": (1 << 30) - self.in_use - 512}
dev = Dev()
jax.local_devices = lambda: [dev]
sys.modules["jax"] = jax
import memrec
for i in range(5):
    dev.in_use = 4096 * (i + 1)
    memrec.step(i)
memrec.flush()
`

// TestRecordJAX: record --jax runs a Python command with the probe loaded
// and reading JAX's allocator; each step's allocator sample carries the
// bytes in use at that step.
func TestRecordJAX(t *testing.T) {
	t.Parallel()
	db, script := pythonScript(t, fakeJAXScript)
	_, errs, code := run(t, db, "", "record", "--source", "sim", "--sim-gpus", "1", "--interval", "10ms", "--name", "j", "--jax",
		"--", "env", "MEMREC_STEP_SAMPLE_MS=0", "python3", script)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	out, _, _ := run(t, db, "", "export", "j")
	steps := map[int64]int{}
	var samples []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		switch {
		case m["type"] == "mark" && m["kind"] == "step":
			steps[int64(m["t_ns"].(float64))] = int(m["step"].(float64))
		case m["type"] == "torch":
			samples = append(samples, m)
		}
	}
	got := map[int]float64{}
	for _, s := range samples {
		if step, ok := steps[int64(s["t_ns"].(float64))]; ok {
			got[step] = s["allocated_bytes"].(float64)
			if s["reserved_bytes"].(float64) != 1<<30 || s["inactive_split_bytes"].(float64) != 512 {
				t.Errorf("step %d: reserved %v, inactive split %v; want the pool, 512", step, s["reserved_bytes"], s["inactive_split_bytes"])
			}
		}
	}
	for i := range 5 {
		if got[i] != float64(4096*(i+1)) {
			t.Errorf("step %d: allocated %v, want %d (bytes in use)", i, got[i], 4096*(i+1))
		}
	}
	if _, errs, code := run(t, db, "", "record", "--source", "sim", "--jax"); code != 1 || !strings.Contains(errs, "--jax needs a command") {
		t.Errorf("--jax without a command: %d %q", code, errs)
	}
}
