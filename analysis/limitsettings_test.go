package analysis

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/analysistest"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/storage"
)

// fragmentingBatch is a job at batch b whose allocator strands room by
// default: per step a block of 6b MiB freed, then 2b, 3b and 4.5b MiB
// taken and freed. By default step 1 takes a segment A of 6b and, for the
// 4.5b, B of 4.5b; step 2's 2b goes to B (the smallest free block that
// holds it), its 3b to A, and its 4.5b fits in neither: a third segment of
// 4.5b. So the default holds 15b MiB of segments for 9.5b MiB of live
// blocks. With expandable segments the three live blocks lie end to end
// from the start of the range each step, on 20 MiB pages.
func fragmentingBatch(b int64) storage.AllocTrace {
	var ops []storage.AllocOp
	alloc := func(n int64) int32 { ops = append(ops, storage.AllocOp{Size: n}); return int32(len(ops) - 1) }
	free := func(i int32) { ops = append(ops, storage.AllocOp{Free: true, Of: i}) }
	for range 3 {
		free(alloc(6 * b << 20))
		x, y, z := alloc(2*b<<20), alloc(3*b<<20), alloc(9*b<<19)
		free(z)
		free(y)
		free(x)
	}
	return storage.AllocTrace{Steps: 3, Ops: ops}
}

// TestCompareByLimitPerSetting: compare --by over two traced runs of the
// fragmenting job gives a limit per allocator setting, the default's the
// fit's own. Both two runs' needs lie on one line, so the pessimistic end
// is the replay on the room the fit had, and the limits follow from the
// rules in fragmentingBatch's comment: the default's the largest b with
// round2(6b) + 2·round2(4.5b) MiB in the room, expandable segments' the
// largest with the 20 MiB pages under 9.5b MiB in it.
func TestCompareByLimitPerSetting(t *testing.T) {
	g := &analysistest.Gen{}
	for _, b := range []int64{64, 128} {
		tr := fragmentingBatch(b)
		r, _ := replay.ReplayAllocator(tr.Ops, 0)
		tracedRun(g, "b", "batch_size", b, tr, r.PeakAllocated)
	}
	by := byTagOf(t, g.String(), "batch_size", "b64", "b128")
	if by.Basis != "allocator_replay" || len(by.LimitBySetting) != 1+len(replay.WhatIfSettings) {
		t.Fatalf("basis %q, limits %+v: %v", by.Basis, by.LimitBySetting, by.leftOut)
	}
	def, exp := by.LimitBySetting[0], by.LimitBySetting[1]
	if def.Setting != "default" || def.Value == nil || *def.Value != *by.MaxFittingValue {
		t.Errorf("the default's limit %+v, the fit's %v", def, *by.MaxFittingValue)
	}
	if exp.Setting != "expandable_segments:True" || exp.Value == nil {
		t.Fatalf("expandable segments: %+v", exp)
	}
	room := int64(by.replayRoom(by.Available(by.Headroom)))
	ceil := func(n, to int64) int64 { return (n + to - 1) / to * to }
	largest := func(fits func(b int64) bool) float64 {
		b := int64(128)
		for fits(b + 1) {
			b++
		}
		return float64(b)
	}
	wantDef := largest(func(b int64) bool { return ceil(6*b<<20, 2<<20)+2*ceil(9*b<<19, 2<<20) <= room })
	wantExp := largest(func(b int64) bool { return ceil(19*b<<19, 20<<20) <= room })
	if *def.Value != wantDef || *exp.Value != wantExp {
		t.Errorf("the default up to %v, expandable segments %v; by the rules %v and %v", *def.Value, *exp.Value, wantDef, wantExp)
	}
	for _, l := range by.LimitBySetting {
		cfg, _ := replay.ParseAllocSettings(l.Setting)
		if r, err := replay.ReplayAllocatorWith(fragmentingBatch(int64(*l.Value)).Ops, room, cfg); err != nil || !r.OK {
			t.Errorf("%s: batch %v does not replay on %d bytes: %+v %v", l.Setting, *l.Value, room, r, err)
		}
	}
	words := LimitBySettingWords(by)
	for _, want := range []string{"batch_size up to " + fmtNum(*def.Value) + " with the default allocator", fmtNum(*exp.Value) + " with expandable_segments:True"} {
		if !strings.Contains(words, want) {
			t.Errorf("words %q lack %q", words, want)
		}
	}
	if raw, _ := json.Marshal(by); !strings.Contains(string(raw), `"limit_by_setting":[{"setting":"default","value":`+fmtNum(wantDef)) {
		t.Errorf("--json lacks limit_by_setting: %.300s", raw)
	}
	// Without a replay (no trace), no limit per setting and no words.
	if LimitBySettingWords(&ByTag{Tag: "batch_size"}) != "" {
		t.Error("words without limits")
	}
}
