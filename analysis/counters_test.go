package analysis

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// countersRun is two epochs of steps on GPU 0; pid 10 counts from its
// first sample on, pid 11 joins in the second epoch. Its counts are
// chosen so that each expected figure below can be worked out by hand.
const countersRun = `{"type":"run","name":"c","start_ns":1000000000}
{"type":"gpu","gpu":0,"total_bytes":1000000}
{"type":"mark","t_ns":1000000000,"kind":"epoch_start","epoch":0}
{"type":"torch","t_ns":1050000000,"gpu":0,"pid":10,"allocated_bytes":10,"reserved_bytes":20,"segments":3,"device_allocs":100}
{"type":"mark","t_ns":1100000000,"kind":"step","step":0}
{"type":"torch","t_ns":1150000000,"gpu":0,"pid":10,"allocated_bytes":10,"reserved_bytes":20,"segments":3,"device_allocs":150}
{"type":"mark","t_ns":1200000000,"kind":"step","step":1}
{"type":"torch","t_ns":1250000000,"gpu":0,"pid":10,"allocated_bytes":10,"reserved_bytes":20,"segments":3,"device_allocs":180}
{"type":"mark","t_ns":1300000000,"kind":"step","step":2}
{"type":"mark","t_ns":1350000000,"kind":"epoch_end","epoch":0}
{"type":"mark","t_ns":1400000000,"kind":"epoch_start","epoch":1}
{"type":"torch","t_ns":1450000000,"gpu":0,"pid":10,"allocated_bytes":10,"reserved_bytes":20,"segments":3,"device_allocs":200}
{"type":"mark","t_ns":1500000000,"kind":"step","step":3}
{"type":"torch","t_ns":1520000000,"gpu":0,"pid":11,"allocated_bytes":10,"reserved_bytes":20,"segments":2,"device_allocs":7}
{"type":"torch","t_ns":1550000000,"gpu":0,"pid":10,"allocated_bytes":10,"reserved_bytes":20,"segments":3,"device_allocs":202}
{"type":"mark","t_ns":1600000000,"kind":"step","step":4}
{"type":"torch","t_ns":1650000000,"gpu":0,"pid":10,"allocated_bytes":10,"reserved_bytes":20,"segments":3,"device_allocs":204,"alloc_retries":1}
{"type":"mark","t_ns":1700000000,"kind":"step","step":5}
{"type":"torch","t_ns":1720000000,"gpu":0,"pid":11,"allocated_bytes":10,"reserved_bytes":20,"segments":2,"device_allocs":9}
{"type":"torch","t_ns":1750000000,"gpu":0,"pid":10,"allocated_bytes":10,"reserved_bytes":20,"segments":3,"device_allocs":206,"alloc_retries":1}
{"type":"mark","t_ns":1800000000,"kind":"step","step":6}
{"type":"torch","t_ns":1850000000,"gpu":0,"pid":10,"allocated_bytes":10,"reserved_bytes":20,"segments":3,"device_allocs":210,"alloc_retries":1}
{"type":"mark","t_ns":1850000000,"kind":"epoch_end","epoch":1}
`

// TestCounters: each counter of the field table is totalled over the GPU
// (the rise from its first sample, pid 11's count added whole as it
// joins) and taken a step from the end of the first epoch (the warm-up) to
// the last step mark. By hand: device_allocs ends at 210 + 9 from 100:
// 119; at the warm-up's end (1.35 s) 180, at the last step (1.8 s)
// 206 + 9 = 215, over the 4 steps marked between: 8.75 a step.
// alloc_retries rises once, after the warm-up: 1, 0.25 a step.
func TestCounters(t *testing.T) {
	rep := analyzeJSONL(t, countersRun)["c"]
	g := rep.GPUs[0]
	want := map[string][2]float64{"device_allocs": {119, 8.75}, "alloc_retries": {1, 0.25}}
	if len(g.Counters) != len(wire.Counters(wire.TorchFields)) {
		t.Fatalf("%d counters, want one per counter of the table: %+v", len(g.Counters), g.Counters)
	}
	for _, c := range g.Counters {
		w := want[c.Name]
		if float64(c.Total) != w[0] || c.PerStep == nil || *c.PerStep != w[1] || c.Steps != 4 {
			t.Errorf("%s: total %d, %v a step over %d steps; want %v, %v over 4", c.Name, c.Total, analysistest.Deref(c.PerStep), c.Steps, w[0], w[1])
		}
		if c.Help == "" {
			t.Errorf("%s: no help", c.Name)
		}
	}
	// gpupass sums alloc_retries on its own: the two agree.
	if i := slices.IndexFunc(g.Counters, func(c Counter) bool { return c.Name == "alloc_retries" }); g.AllocRetries == nil || g.Counters[i].Total != *g.AllocRetries {
		t.Errorf("alloc_retries %d, the allocator pass's %v", g.Counters[i].Total, analysistest.Deref(g.AllocRetries))
	}
}

// TestCountersFollowTheTable: a row added to the table is totalled
// without a change here (a throwaway row reading the segments: 3 of pid
// 10 at first, 3 + 2 at the end).
func TestCountersFollowTheTable(t *testing.T) {
	fs := append(wire.Counters(wire.TorchFields), wire.Field[storage.TorchSample]{Name: "throwaway_counts", Stat: "num_throwaway",
		Help: "A row of a test.", Get: func(s storage.TorchSample) int64 { return s.Segments }})
	db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := jsonl.Import(db, []jsonl.Source{{Name: "c", R: strings.NewReader(countersRun)}}, jsonl.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Analyze(db, runs[0], Options{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := allocatorCounters(db, runs[0], 0, []int{10, 11}, &rep.GPUs[0], growthWarmup(t, db, runs[0]), fs)
	if err != nil {
		t.Fatal(err)
	}
	last := got[len(got)-1]
	if last.Name != "throwaway_counts" || last.Total != 2 || last.Help != "A row of a test." {
		t.Errorf("the throwaway row: %+v, want throwaway_counts 2", last)
	}
}

// TestCountersWithoutSteps: without step marks there is no rate a step,
// only the total.
func TestCountersWithoutSteps(t *testing.T) {
	var b strings.Builder
	for _, l := range strings.SplitAfter(countersRun, "\n") {
		if !strings.Contains(l, `"kind":"step"`) {
			b.WriteString(l)
		}
	}
	for _, c := range analyzeJSONL(t, b.String())["c"].GPUs[0].Counters {
		if c.PerStep != nil || c.Steps != 0 {
			t.Errorf("%s: %v a step over %d steps without step marks", c.Name, *c.PerStep, c.Steps)
		}
		if c.Name == "device_allocs" && c.Total != 119 {
			t.Errorf("device_allocs %d, want 119", c.Total)
		}
	}
}

func growthWarmup(t *testing.T, db *storage.DB, r storage.Run) growth.Warmup {
	t.Helper()
	mi, err := loadMarks(db, r, storage.NewDecodeBudget(storage.DefaultDecodeBudget), nil)
	if err != nil {
		t.Fatal(err)
	}
	return mi.warm
}

// TestCounterLogAgreesWithSecondRead: the counters the allocator pass
// keeps as it reads (counterLog) are those of a second read of the series
// (allocatorCounters, which sums every sample on its own), on runs where
// two processes start at the same time, one falls silent past
// allocatorLife (the allocator pass retires it) and comes back, and
// counters change at every sample; on one process alone (its chunks taken
// as columns, its counters moving at every sample or now and then); and
// where the log gives up (a bound of 2 changes), the second read's
// counters are what analyze reports.
func TestCounterLogAgreesWithSecondRead(t *testing.T) {
	run := func(silent, alone bool, every int) string {
		var b strings.Builder
		b.WriteString(`{"type":"run","name":"c","start_ns":1000000000}` + "\n" + `{"type":"gpu","gpu":0,"total_bytes":1000000}` + "\n")
		b.WriteString(`{"type":"mark","t_ns":1000000000,"kind":"epoch_start","epoch":0}` + "\n")
		for i := range 40 {
			tn := 1_000_000_000 + int64(i)*250_000_000
			fmt.Fprintf(&b, `{"type":"torch","t_ns":%d,"gpu":0,"pid":10,"allocated_bytes":10,"reserved_bytes":20,"device_allocs":%d,"device_frees":%d,"alloc_retries":%d}`+"\n", tn, 100+3*(i/every), i/(2*every), i/10)
			if !alone && (!silent || i < 8 || i > 25) {
				fmt.Fprintf(&b, `{"type":"torch","t_ns":%d,"gpu":0,"pid":11,"allocated_bytes":5,"reserved_bytes":20,"device_allocs":%d,"ooms":%d}`+"\n", tn, 7+i, i/20)
			}
			fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"step","step":%d}`+"\n", tn+1, i)
			if i == 12 {
				fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":0}`+"\n"+`{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":1}`+"\n", tn+2, tn+3)
			}
		}
		return b.String()
	}
	for _, tc := range []struct {
		name  string
		data  string
		bound int
	}{
		{"together", run(false, false, 1), maxCounterChanges},
		{"one retired and back", run(true, false, 1), maxCounterChanges},
		{"too many changes", run(true, false, 1), 2},
		{"one process, read a chunk at a time", run(false, true, 1), maxCounterChanges},
		{"one process, counters moving now and then", run(false, true, 7), maxCounterChanges},
		{"one process, too many changes", run(false, true, 1), 2},
		{"the fixture", countersRun, maxCounterChanges},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer func(n int) { maxCounterChanges = n }(maxCounterChanges)
			maxCounterChanges = tc.bound
			db, err := storage.Open(filepath.Join(t.TempDir(), "a.db"), storage.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			runs, err := jsonl.Import(db, []jsonl.Source{{Name: "c", R: strings.NewReader(tc.data)}}, jsonl.ImportOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Analyze(db, runs[0], Options{})
			if err != nil {
				t.Fatal(err)
			}
			g := &rep.GPUs[0]
			want, err := allocatorCounters(db, runs[0], 0, []int{10, 11}, g, growthWarmup(t, db, runs[0]), torchCounters)
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 || want[0].Total == 0 && want[2].Total == 0 {
				t.Fatalf("the second read counted nothing: %+v", want)
			}
			if !reflect.DeepEqual(g.Counters, want) {
				t.Errorf("analyze's counters\n%s\nwant the second read's\n%s", counterText(g.Counters), counterText(want))
			}
		})
	}
}

func counterText(cs []Counter) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "%s total %d, %v a step over %d\n", c.Name, c.Total, analysistest.Deref(c.PerStep), c.Steps)
	}
	return b.String()
}
