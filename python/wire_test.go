package python

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"slices"
	"sort"
	"testing"

	"github.com/memrec/memrec/storage/wire"
)

// probeLines has the probe format one allocator sample, one step mark and
// one epoch mark, each field a distinct value, and prints them. Its
// argument is the allocator counters' memory_stats() keys and values.
const probeLines = `
import json, sys
sys.path.insert(0, ".")
from memrec import _probe
def st(v):
    return {"all": {"current": v, "peak": v}}
stats = {"allocated_bytes": st(11), "reserved_bytes": st(12), "active_bytes": st(13),
         "inactive_split_bytes": st(14), "segment": st(16)}
stats.update(json.loads(sys.argv[1]))
sys.stdout.write(_probe.stats_line(1764430000000000000, 1, 4242, 3, stats, peak=15, largest_segment=1 << 30))
sys.stdout.write(_probe.step_line(1764430000000000001, 7, 3, 4242))
sys.stdout.write(_probe.mark_line(1764430000000000002, "epoch_end", {"epoch": 2, "rank": 3, "text": "t"}))
`

// TestProbeLinesFollowWireTables holds the probe's hand-written line
// formats to the wire tables: every field of the allocator sample is sent,
// under the table's name, and no name is sent that the tables do not know.
func TestProbeLinesFollowWireTables(t *testing.T) {
	t.Parallel()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	// Each counter row of the table gets its own value, 17 on, which the
	// probe must read from memory_stats() under the row's Stat.
	counters := map[string]int64{}
	want := wire.TorchSample{T: 1764430000000000000, GPU: 1, PID: 4242, Rank: 3, Allocated: 11, Reserved: 12,
		Active: 13, InactiveSplit: 14, PeakAllocated: 15, Segments: 16, LargestSegment: 1 << 30}
	for _, f := range wire.TorchFields {
		if f.Stat != "" {
			v := int64(17 + len(counters))
			counters[f.Stat] = v
			f.Set(&want, v)
		}
	}
	arg, err := json.Marshal(counters)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", probeLines, string(arg))
	cmd.Env = append(cmd.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("probe printed %d lines, want 3:\n%s", len(lines), out)
	}
	head := []string{"type", "t_ns", "gpu"}
	torchNames := append(slices.Clone(head), wire.FieldNames(wire.TorchFields)...)
	if got := keys(t, lines[0]); !slices.Equal(got, sorted(torchNames)) {
		t.Errorf("torch line sends %v,\nthe table has %v", got, sorted(torchNames))
	}
	markNames := append([]string{"type", "t_ns", "kind", "text"}, wire.FieldNames(wire.MarkFields)...)
	for _, l := range lines[1:] {
		for _, k := range keys(t, l) {
			if !slices.Contains(markNames, k) {
				t.Errorf("mark line %s sends %q, which the table does not have", l, k)
			}
		}
	}
	var p wire.Parser
	r, err := p.Parse(lines[0])
	if err != nil {
		t.Fatalf("torch line %s: %v", lines[0], err)
	}
	if r.Torch != want {
		t.Errorf("torch line reads %+v, want %+v", r.Torch, want)
	}
	for i, want := range []wire.Mark{
		{T: 1764430000000000001, Kind: wire.MarkStep, Epoch: wire.None, Step: 7, Rank: 3, GPU: wire.None, PID: 4242, Code: wire.None},
		{T: 1764430000000000002, Kind: wire.MarkEpochEnd, Epoch: 2, Step: wire.None, Rank: 3, GPU: wire.None, PID: wire.None, Code: wire.None, Text: "t"},
	} {
		r, err := p.Parse(lines[1+i])
		if err != nil || r.Mark != want {
			t.Errorf("mark line %s reads %+v (%v), want %+v", lines[1+i], r.Mark, err, want)
		}
	}
}

func keys(t *testing.T, line []byte) []string {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("%s: %v", line, err)
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return sorted(ks)
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}
