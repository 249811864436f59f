package compare

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// TestCompareByLimitPerSetting: compare --by over two traced runs of the
// fragmenting job gives a limit per allocator setting, the default's the
// fit's own. Both two runs' needs lie on one line, so the pessimistic end
// is the replay on the room the fit had, and the limits follow from the
// rules in analysistest.FragmentingTrace's comment: the default's the largest b with
// round2(6b) + 2·round2(4.5b) MiB in the room, expandable segments' the
// largest with the 20 MiB pages under 9.5b MiB in it.
func TestCompareByLimitPerSetting(t *testing.T) {
	g := &analysistest.Gen{}
	for _, b := range []int64{64, 128} {
		tr := analysistest.FragmentingTrace(b)
		r, _ := replay.ReplayAllocator(tr.Ops, 0)
		g.TracedRun("b", "batch_size", b, tr, r.PeakAllocated)
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
		if r, err := replay.ReplayAllocatorWith(analysistest.FragmentingTrace(int64(*l.Value)).Ops, room, cfg); err != nil || !r.OK {
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
