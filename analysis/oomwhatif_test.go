package analysis

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// TestOOMWhatIfs: a sequence whose outcome follows by hand (the one of
// TestReplaySettings): a 60 MiB segment freed, then 20 and 30 MiB taken
// from it, leave 10 MiB free inside it; 45 MiB more fails in 100 MiB by
// default, and fits with expandable segments (95 MiB on five 20 MiB
// pages).
func TestOOMWhatIfs(t *testing.T) {
	mib := int64(1 << 20)
	tr := storage.AllocTrace{Ops: []storage.AllocOp{{Size: 60 * mib}, {Free: true, Of: 0}, {Size: 20 * mib}, {Size: 30 * mib}, {Size: 45 * mib, Failed: true}}}
	gr := &GPUReport{AllocTrace: &tr}
	o := &OOM{ReservedBytes: i64(60 * mib), FreeBytes: i64(40 * mib)}
	gr.oomWhatIfs(o)
	if len(o.WhatIf) != 1+len(replay.WhatIfSettings) || o.WhatIf[0].Fits || o.WhatIf[0].StrandedBytes != 10*mib || !o.WhatIf[1].Fits {
		t.Fatalf("what-ifs %+v", o.WhatIf)
	}
	lines := strings.Join(WhatIfLines(*o), "\n")
	if want := "with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True this request would have fitted: the allocator held 10.0 MiB in split blocks"; !strings.Contains(lines, want) {
		t.Errorf("lines lack %q:\n%s", want, lines)
	}
	// Without a trace, or without the room at the OOM, nothing is said.
	for _, c := range []struct {
		gr *GPUReport
		o  *OOM
	}{{&GPUReport{}, &OOM{ReservedBytes: i64(1), FreeBytes: i64(1)}}, {gr, &OOM{ReservedBytes: i64(1)}}} {
		c.gr.oomWhatIfs(c.o)
		if c.o.WhatIf != nil || WhatIfLines(*c.o) != nil {
			t.Errorf("what-ifs %+v without what they need", c.o.WhatIf)
		}
	}
}

// TestOOMWhatIfsOnTheH200: the fatal OOMs of testdata/h200-oom on the
// room the allocator had (the device's capacity for segments): the
// default allocator fails there as the job did, and the lines name each
// setting.
func TestOOMWhatIfsOnTheH200(t *testing.T) {
	dir := filepath.Join("testdata", "h200-oom")
	raw, err := os.ReadFile(filepath.Join(dir, "about.json"))
	if err != nil {
		t.Fatal(err)
	}
	var about struct {
		Capacity int64 `json:"capacity_bytes"`
	}
	if err := json.Unmarshal(raw, &about); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"regnet_y_3_2gf-bs1424", "regnet_y_3_2gf-bs1472", "vit_b_16-bs2144"} {
		tr := readTraceFile(t, filepath.Join(dir, name+".trace.gz"))
		o := &OOM{ReservedBytes: i64(about.Capacity - replay.CapacityKnown), FreeBytes: i64(0)}
		(&GPUReport{AllocTrace: &tr}).oomWhatIfs(o)
		if len(o.WhatIf) == 0 || o.WhatIf[0].Fits {
			t.Errorf("%s: what-ifs %+v, want the default to fail as the job did", name, o.WhatIf)
			continue
		}
		lines := WhatIfLines(*o)
		for _, s := range replay.WhatIfSettings {
			if !strings.Contains(strings.Join(lines, "\n"), s) {
				t.Errorf("%s: no line names %s: %q", name, s, lines)
			}
		}
		t.Logf("%s: %q", name, lines)
	}
}

func readTraceFile(t testing.TB, path string) storage.AllocTrace {
	t.Helper()
	tr, err := storage.DecodeAllocTrace(fixtures.Gunzip(t, path))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return tr
}
