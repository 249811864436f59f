package replay

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/storage"
)

// Each setting on a short sequence whose outcome follows by hand from the
// rules in allocsettings.go (the comment of each case says how).
func TestReplaySettings(t *testing.T) {
	mib := int64(1 << 20)
	alloc := func(n int64) storage.AllocOp { return storage.AllocOp{Size: n} }
	free := func(of int32) storage.AllocOp { return storage.AllocOp{Free: true, Of: of} }
	// A 60 MiB segment freed, then 20 and 30 MiB taken from it leave
	// 10 MiB free inside a segment with live blocks: 45 MiB more needs a
	// 46 MiB segment, 106 MiB in all. With expandable segments the three
	// lie at 0, 20 and 50 MiB of one range: 95 MiB touch five 20 MiB pages.
	fragmenting := []storage.AllocOp{alloc(60 * mib), free(0), alloc(20 * mib), alloc(30 * mib), alloc(45 * mib)}
	// A 64 MiB segment freed: 16 MiB splits it by default; with
	// max_split_size_mb:32 a request below 32 MiB may not take it (a
	// 16 MiB segment of its own), and 60 MiB then takes it whole (less
	// than 20 MiB more than asked), where by default the 48 MiB left is
	// too small for it: 64 + 60 MiB.
	oversize := []storage.AllocOp{alloc(64 * mib), free(0), alloc(16 * mib), alloc(60 * mib)}
	// 40 MiB with max_split_size_mb:32 may not take the cached 64 MiB
	// block (60 MiB or more), and short of room that block alone is given
	// back: no release of the whole cache (no retry counted).
	releaseOversize := []storage.AllocOp{alloc(64 * mib), free(0), alloc(40 * mib)}
	// 30 and 40 MiB cached, then 50 MiB: above 30 % of 200 MiB the older
	// free segment (the 30 MiB one, searched past longer) is given back
	// before the new one is taken: 40 + 50 MiB, where by default 120.
	garbage := []storage.AllocOp{alloc(30 * mib), free(0), alloc(40 * mib), free(2), alloc(50 * mib)}
	// 5 MiB + 1 byte in four steps between 4 and 8 MiB is 6 MiB, in one
	// 20 MiB segment either way; two of them then need 12 MiB of it.
	rounding := []storage.AllocOp{alloc(5*mib + 1), alloc(5*mib + 1), alloc(5*mib + 1), alloc(5*mib + 1)}
	for _, c := range []struct {
		name, conf string
		ops        []storage.AllocOp
		capacity   int64
		ok         bool
		reserved   int64
		allocated  int64
		retries    int
	}{
		{"fragmenting, default", "", fragmenting, 100 * mib, false, 60 * mib, 60 * mib, 1},
		{"fragmenting, expandable", "expandable_segments:True", fragmenting, 100 * mib, true, 100 * mib, 95 * mib, 0},
		{"oversize, default", "", oversize, 0, true, 124 * mib, 76 * mib, 0},
		{"oversize, max_split_size", "max_split_size_mb:32", oversize, 0, true, 80 * mib, 80 * mib, 0},
		{"release oversize first", "max_split_size_mb:32", releaseOversize, 100 * mib, true, 64 * mib, 64 * mib, 0},
		{"release oversize, default", "", releaseOversize, 100 * mib, true, 64 * mib, 64 * mib, 0},
		{"garbage, default", "", garbage, 200 * mib, true, 120 * mib, 50 * mib, 0},
		{"garbage collected", "garbage_collection_threshold:0.3", garbage, 200 * mib, true, 90 * mib, 50 * mib, 0},
		{"garbage, no memory fraction", "garbage_collection_threshold:0.3", garbage, 0, true, 120 * mib, 50 * mib, 0},
		{"rounding, default", "", rounding, 0, true, 40 * mib, 20*mib + 4*512, 0},
		{"rounding in quarters", "roundup_power2_divisions:4", rounding, 0, true, 40 * mib, 24 * mib, 0},
	} {
		cfg, err := ParseAllocSettings(c.conf)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		r, err := ReplayAllocatorWith(c.ops, c.capacity, cfg)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if r.OK != c.ok || r.PeakReserved != c.reserved || r.PeakAllocated != c.allocated || r.Retries != c.retries {
			t.Errorf("%s: ok %v, %d MiB reserved, %.3f MiB allocated, %d retries; want %v, %d, %.3f, %d", c.name, r.OK, r.PeakReserved/mib, float64(r.PeakAllocated)/float64(mib), r.Retries,
				c.ok, c.reserved/mib, float64(c.allocated)/float64(mib), c.retries)
		}
	}
	// the fragmenting sequence's what-ifs: the default strands the 10 MiB
	// left in its segment, and could serve 40 MiB there (100 − 60).
	w, err := WhatIfs(fragmenting, 100*mib)
	if err != nil {
		t.Fatal(err)
	}
	if w[0].Setting != "default" || w[0].Fits || w[0].StrandedBytes != 10*mib || w[0].LargestBytes != 40*mib {
		t.Errorf("default: %+v", w[0])
	}
	if w[1].Setting != "expandable_segments:True" || !w[1].Fits {
		t.Errorf("expandable: %+v", w[1])
	}
}

func TestRoundupPower2Divisions(t *testing.T) {
	mib := int64(1 << 20)
	for _, c := range []struct{ size, d, want int64 }{
		{5*mib + 1, 4, 6 * mib},     // steps of 1 MiB between 4 and 8
		{3 * mib, 4, 3 * mib},       // on a step
		{4 * mib, 4, 4 * mib},       // a power of two
		{mib + 1, 8, mib + 128<<10}, // steps of 128 KiB between 1 and 2 MiB
		{1200 * mib, 2, 1536 * mib}, // halves between 1 and 2 GiB
		{1000, 4, 1024},             // below 512·4: 512 bytes
	} {
		a := newReplayAllocator(0, AllocSettings{})
		for i := range a.cfg.RoundupDivisions {
			a.cfg.RoundupDivisions[i] = int(c.d)
		}
		if got := a.round(c.size); got != c.want {
			t.Errorf("round(%d) in %d divisions = %d, want %d", c.size, c.d, got, c.want)
		}
	}
	// the per-range form: the first range named also sets those below it,
	// ">" sets from the last named on (that one included, as PyTorch).
	s, err := ParseAllocSettings("roundup_power2_divisions:[256:4,>:8],expandable_segments:False")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		size int64
		want int
	}{{mib, 4}, {100 * mib, 4}, {300 * mib, 8}, {40 << 30, 8}} {
		if got := s.divisions(c.size); got != c.want {
			t.Errorf("divisions(%d MiB) = %d, want %d", c.size/mib, got, c.want)
		}
	}
}

func TestParseAllocSettingsErrors(t *testing.T) {
	for _, conf := range []string{
		"expandable_segments", "expandable_segments:maybe", "max_split_size_mb:20", "max_split_size_mb:x",
		"garbage_collection_threshold:1", "garbage_collection_threshold:0", "roundup_power2_divisions:3",
		"roundup_power2_divisions:[100:4]", "roundup_power2_divisions:[256:4", "backend:cudaMallocAsync",
	} {
		if _, err := ParseAllocSettings(conf); !errors.Is(err, ErrAllocConf) {
			t.Errorf("%q: %v, want ErrAllocConf", conf, err)
		}
	}
	if s, err := ParseAllocSettings("max_split_size_mb:512, garbage_collection_threshold:0.6"); err != nil || s.MaxSplitSize != 512<<20 || s.GarbageCollectionThreshold != 0.6 {
		t.Errorf("%+v, %v", s, err)
	}
}

// TestWhatIfsOnTheH200sFatalOOMs replays the four real OOMs (testdata/
// h200-oom) under each setting: the default refuses each request as the
// GPU did; expandable segments, which strand only the pages live blocks
// share, serve each, holding less than a tenth of what the default
// stranded.
func TestWhatIfsOnTheH200sFatalOOMs(t *testing.T) {
	dir := filepath.Join("..", "testdata", "h200-oom")
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
	for _, name := range []string{"regnet_y_3_2gf-bs1424", "regnet_y_3_2gf-bs1440", "regnet_y_3_2gf-bs1472", "vit_b_16-bs2144"} {
		tr := readTraceFile(t, filepath.Join(dir, name+".trace.gz"))
		k := LastFailed(tr.Ops)
		ops := append(slices.Clone(tr.Ops[:k]), storage.AllocOp{Size: tr.Ops[k].Size})
		w, err := WhatIfs(ops, about.Capacity)
		if err != nil {
			t.Fatal(err)
		}
		def, exp := w[0], w[1]
		if def.Fits || def.LargestBytes >= tr.Ops[k].Size {
			t.Errorf("%s: the default serves %s: %+v", name, units.FormatBytes(tr.Ops[k].Size), def)
		}
		if !exp.Fits || exp.StrandedBytes*10 > def.StrandedBytes || exp.PeakReservedBytes > about.Capacity {
			t.Errorf("%s: expandable segments %+v, the default %+v", name, exp, def)
		}
		for _, x := range w {
			t.Logf("%s %s: fits %v, reserved %s, stranded %s, largest %s", name, x.Setting, x.Fits, units.FormatBytes(x.PeakReservedBytes), units.FormatBytes(x.StrandedBytes), units.FormatBytes(x.LargestBytes))
		}
	}
}
