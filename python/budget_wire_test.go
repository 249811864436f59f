package python

import (
	"bytes"
	"os/exec"
	"slices"
	"testing"

	"github.com/memrec/memrec/storage/wire"
)

// probeBudgetLine has the probe format one allocator sample of a watched
// model (memrec.watch), each budget field a distinct value.
const probeBudgetLine = `
import sys
sys.path.insert(0, ".")
from memrec import _budget, _probe
def st(v):
    return {"all": {"current": v, "peak": v}}
stats = {"allocated_bytes": st(11), "reserved_bytes": st(12), "active_bytes": st(13),
         "inactive_split_bytes": st(14), "segment": st(16), "num_alloc_retries": 17, "num_ooms": 18}
w = _budget.Watch(None, None)
w.has_optimizer, w.opt_name, w.state_keys, w.autocast, w.grads_at_forward = True, "AdamW", "exp_avg,exp_avg_sq", True, False
f = _budget.Figures()
f.params, f.grads, f.state, f.buffers, f.n_params, f.n_trainable, f.dtype = 21, 22, 23, 24, 25, 26, "float32"
sys.stdout.write(_probe.stats_line(1764430000000000000, 1, 4242, 3, stats, peak=15, extra=w.fields(f), largest_segment=1 << 30))
`

// TestProbeBudgetFollowsWireTables holds the budget fields the probe adds
// to a torch line to the wire's budget table: every field is sent under
// the table's name, nothing else is, and the parsed budget has each value.
func TestProbeBudgetFollowsWireTables(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	cmd := exec.Command(py, "-c", probeBudgetLine)
	cmd.Env = append(cmd.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	line := bytes.TrimSpace(out)
	names := append([]string{"type", "t_ns", "gpu", "autocast", "grads_at_forward"}, wire.FieldNames(wire.TorchFields)...)
	names = append(names, wire.FieldNames(wire.BudgetFields)...)
	for _, s := range wire.BudgetStrings {
		names = append(names, s.Name)
	}
	if got := keys(t, line); !slices.Equal(got, sorted(names)) {
		t.Errorf("torch line with budget sends %v,\nthe tables have %v", got, sorted(names))
	}
	var p wire.Parser
	r, err := p.Parse(line)
	if err != nil || r.Budget == nil {
		t.Fatalf("%s: %v, budget %v", line, err, r.Budget)
	}
	want := wire.BudgetSample{T: 1764430000000000000, GPU: 1, PID: 4242, Rank: 3, Params: 21, Grads: 22, OptimizerState: 23,
		Buffers: 24, ParamCount: 25, Trainable: 26, Autocast: wire.AutocastOn, GradsAtForward: wire.FlagNo, Optimizer: "AdamW",
		OptimizerKeys: "exp_avg,exp_avg_sq", DType: "float32"}
	if *r.Budget != want {
		t.Errorf("budget reads %+v, want %+v", *r.Budget, want)
	}
}
