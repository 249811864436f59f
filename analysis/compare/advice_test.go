package compare

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/budget"
	"github.com/memrec/memrec/analysis/replay"
	"github.com/memrec/memrec/internal/jobmodel"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// TestAdviceFromTheNeedCurve: three watched runs at batches 16, 32 and 64
// whose activations are 1 GiB that does not grow with the batch (a
// workspace) and 64 MiB a sample. compare --by gives the advice of the
// run at 64 again with a sample's cost from the need curve: accumulation
// over 2 halves only the part that grows, and each batch that would fit
// keeps the workspace whole; the run's own advice, which divides all its
// activations by the batch, promises more.
func TestAdviceFromTheNeedCurve(t *testing.T) {
	const workspace, perSample = 1 * GiB, 64 * MiB
	j := analysistest.Job(1)
	by, runs := byBatchOfWatchedRuns(t, j, workspace, perSample, nil)
	if by.HelpRun != "b64" || by.Need == nil || by.Need.MarginalBytesPerUnit != perSample {
		t.Fatalf("help of %q, curve %+v", by.HelpRun, by.Need)
	}
	s := j.Split(29, 1)
	fixed := s.Params + s.Grads + j.Optimizer
	unseen := j.Idle + j.Context
	// The runs' probe saw the inactive split: the room stranded a sample
	// (SplitLine) and the segments' rounding come off as compare's rule has it.
	var split float64
	if l := by.SplitLine; l != nil {
		split = l.SlopeBytesPerUnit
	}
	room := float64(j.Total-1000-unseen)/(1+by.AllowanceFraction) - by.RoundingBytes - float64(fixed) - workspace
	want := map[string][2]float64{ // saved at the peak, batch that would fit
		"gradient_accumulation/2":  {perSample * 64 / 2, 2 * math.Floor(room/(perSample+split))},
		"gradient_accumulation/4":  {perSample * 64 * 3 / 4, 4 * math.Floor(room/(perSample+split))},
		"activation_checkpointing": {(budget.CheckpointLow + budget.CheckpointHigh) / 2 * float64(workspace+perSample*64), math.Floor(room / (perSample*(1-(budget.CheckpointLow+budget.CheckpointHigh)/2) + split))},
	}
	for _, r := range by.Help {
		key := r.Kind.String()
		if r.N > 0 {
			key += fmt.Sprintf("/%d", r.N)
		}
		w, ok := want[key]
		if !ok {
			continue
		}
		delete(want, key)
		if math.Abs(float64(r.SavedBytes)-w[0]) > 1 || r.FitsBatch == nil || *r.FitsBatch != w[1] || !strings.Contains(r.FitsWhy, "need curve of 3 runs") {
			t.Errorf("%s: saves %d, batch %v (%s); want %.0f and %v", key, r.SavedBytes, analysistest.Deref(r.FitsBatch), r.FitsWhy, w[0], w[1])
		}
	}
	if len(want) > 0 {
		t.Errorf("remedies missing: %v", want)
	}
	// The run alone takes its 5 GiB of activations as 80 MiB a sample.
	own := runs[2].GPUs[0].Budget
	for _, r := range own.Help {
		if r.Kind == budget.RemedyAccumulation && r.N == 2 && r.SavedBytes != (workspace+perSample*64)/2 {
			t.Errorf("the run's own accumulation saves %d, want half of all its activations", r.SavedBytes)
		}
	}
}

// TestAdviceWithTheLargestSegment: where the probe measured the
// allocator's largest segment, the batch that fits follows compare --by's
// rule: two more segments, grown with the batch, and the segments'
// rounding beyond the peak, not AllocatorAllowance of it.
func TestAdviceWithTheLargestSegment(t *testing.T) {
	j := analysistest.Job(1)
	const seg = 640 * MiB // at the run's batch of 64
	in := strings.ReplaceAll(analysistest.WatchedRun(j, 30, "float32", "false", true), `"segments":`, fmt.Sprintf(`"largest_segment_bytes":%d,"segments":`, int64(seg)))
	g := analyzeJSONL(t, in)["w"].GPUs[0]
	b := g.Budget
	if g.LargestSegmentBytes == nil || *g.LargestSegmentBytes != seg || g.MostSegments == nil || b == nil {
		t.Fatalf("largest segment %v, most segments %v, budget %v", analysistest.Deref(g.LargestSegmentBytes), analysistest.Deref(g.MostSegments), b)
	}
	s := j.Split(29, 1)
	unseen, _ := b.Part(budget.PartUnseen) // one GPU: no NCCL buffers
	fixed := s.Params + s.Grads + j.Optimizer
	rounding := *g.MostSegments * replay.SegmentRounding
	// Two segments a batch of 64 beyond its activations.
	want := math.Floor(float64(j.Total-1000-unseen-rounding-fixed) / (float64(j.Activations+replay.StrandedSegments*seg) / 64))
	byShare := math.Floor((float64(j.Total-1000-unseen)/(1+replay.AllocatorAllowance) - float64(fixed)) / (float64(j.Activations) / 64))
	if want == byShare {
		t.Fatalf("%v either way: the test does not tell the segments from the default", want)
	}
	if b.FitsBatch == nil || *b.FitsBatch != want {
		t.Errorf("batch that fits %v, want %v (by the default share %v)", analysistest.Deref(b.FitsBatch), want, byShare)
	}
}

// byBatchOfWatchedRuns is compare --by batch_size of three watched runs
// of j at batches 16, 32 and 64 whose activations are workspace and
// perSample a sample, each with the lines more(b) appends (nil: none).
func byBatchOfWatchedRuns(t *testing.T, j jobmodel.Job, workspace, perSample int64, more func(b int64) string) (*ByTag, []*analysis.Report) {
	t.Helper()
	var runs []*analysis.Report
	for _, b := range []int64{16, 32, 64} {
		j.Activations = workspace + perSample*b
		name := fmt.Sprintf("b%d", b)
		run := strings.Replace(analysistest.WatchedRun(j, 30, "float32", "false", true), `"name":"w"`, `"name":"`+name+`"`, 1)
		run = strings.Replace(run, `"batch_size":"64"`, fmt.Sprintf(`"batch_size":"%d"`, b), 1)
		if more != nil {
			run += more(b)
		}
		runs = append(runs, analyzeJSONL(t, run)[name])
	}
	c, err := Compare(runs, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := FitByTag(c, "batch_size", 0.05); err != nil {
		t.Fatal(err)
	}
	return c.By, runs
}

// stepsTrace is the allocator trace of a job whose model's tensors take
// fixed bytes (allocated once) and whose steps each take a workspace and
// act bytes of activations in four requests, freed at the step's end.
// With failed, the job ran out of memory at its first step's last
// request, and the trace ends there.
func stepsTrace(t *testing.T, fixed, workspace, act int64, steps int, failed bool) storage.AllocTrace {
	t.Helper()
	tr := storage.AllocTrace{GPU: 0, PID: 100, Steps: steps, Ops: []storage.AllocOp{{Size: fixed}}}
	for step := 0; step < steps; step++ {
		first := int32(len(tr.Ops))
		tr.Ops = append(tr.Ops, storage.AllocOp{Size: workspace})
		for i := 0; i < 4; i++ {
			tr.Ops = append(tr.Ops, storage.AllocOp{Size: act / 4, Failed: failed && i == 3})
		}
		if failed {
			break
		}
		for i := int32(0); i < 5; i++ {
			tr.Ops = append(tr.Ops, storage.AllocOp{Free: true, Of: first + i})
		}
	}
	r, err := replay.ReplayAllocator(tr.Ops, 0)
	if err != nil {
		t.Fatal(err)
	}
	tr.Segments, tr.SegmentBytes = r.Segments, r.PeakReserved
	return tr
}

// traceLines is tr as the probe's marks, JSON lines.
func traceLines(t *testing.T, tr storage.AllocTrace) string {
	var lines string
	for _, m := range tr.Marks(t0 + 2e9) {
		lines += fmt.Sprintf(`{"type":"mark","t_ns":%d,"kind":"alloc_trace","gpu":0,"pid":100,"text":%q}`+"\n", m.T, m.Text)
	}
	return lines
}

// TestReplayCheckedByAFailure: the runs of TestAdviceFromTheReplay and
// one that ran out of memory at its first step, with its trace to the
// request that failed. Far above the replay's limit the replay refuses
// that request too and nothing changes; far below it the replay serves
// it, the room it had to spare is taken off the GPU, and the value falls
// below the failure.
func TestReplayCheckedByAFailure(t *testing.T) {
	const workspace, perSample = 1 * GiB, 64 * MiB
	j := analysistest.Job(1)
	s := j.Split(29, 1)
	fixed := s.Params + s.Grads + j.Optimizer
	by, runs := byBatchOfWatchedRuns(t, j, workspace, perSample, func(b int64) string {
		return traceLines(t, stepsTrace(t, fixed, workspace, perSample*b, 3, false))
	})
	if by.Basis != "allocator_replay" || by.MaxFittingValueNoHeadroom == nil {
		t.Fatalf("basis %q", by.Basis)
	}
	base := *by.MaxFittingValueNoHeadroom
	failedAt := func(v float64) *ByTag {
		var o strings.Builder
		fmt.Fprintf(&o, `{"type":"run","name":"oom","start_ns":%d,"tags":{"batch_size":"%v"}}`+"\n", t0, v)
		fmt.Fprintf(&o, `{"type":"gpu","gpu":0,"name":"Test GPU","total_bytes":%d}`+"\n", j.Total)
		fmt.Fprintf(&o, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", t0+1e9, j.Total-GiB)
		fmt.Fprintf(&o, `{"type":"mark","t_ns":%d,"kind":"oom","gpu":0,"pid":100,"text":"CUDA out of memory. Tried to allocate 2.00 GiB"}`+"\n", t0+2e9)
		o.WriteString(traceLines(t, stepsTrace(t, fixed, workspace, int64(perSample*v), 1, true)))
		fmt.Fprintf(&o, `{"type":"mark","t_ns":%d,"kind":"exit","code":1}`+"\n", t0+3e9)
		c, err := Compare(append(runs[:3:3], analyzeJSONL(t, o.String())["oom"]), "", "")
		if err != nil {
			t.Fatal(err)
		}
		if err := FitByTag(c, "batch_size", 0.05); err != nil {
			t.Fatal(err)
		}
		if c.By.Replay == nil || len(c.By.Replay.FailureChecks) != 1 {
			t.Fatalf("at %v: %+v", v, c.By.Replay)
		}
		return c.By
	}
	if by := failedAt(2 * base); by.Replay.MarginBytes != 0 || *by.MaxFittingValueNoHeadroom != base || !strings.Contains(by.BasisWords, "the replay refuses") {
		t.Errorf("above: margin %d, value %v (%v): %s", by.Replay.MarginBytes, *by.MaxFittingValueNoHeadroom, base, by.BasisWords)
	}
	below := math.Floor(base / 2)
	by = failedAt(below)
	if m := by.Replay.MarginBytes; m < 10*GiB || *by.MaxFittingValueNoHeadroom >= below || !strings.Contains(by.BasisWords, "taken off the GPU") {
		t.Errorf("below: margin %d, value %v (failed at %v): %s", m, *by.MaxFittingValueNoHeadroom, below, by.BasisWords)
	}
}

// TestAdviceFromTheReplay is TestAdviceFromTheNeedCurve's runs with an
// allocator trace each (the model's tensors allocated once, then three
// steps of a 1 GiB workspace and 64 MiB a sample): the replay is the
// basis, and each remedy's batch that fits is the replay's with what the
// remedy frees at each batch added to the GPU. Accumulation over k holds
// the same micro-batch as nothing (its gradients are held at the peak
// already), so its effective batch is k of it; checkpointing frees a share
// of every sample and fits more.
func TestAdviceFromTheReplay(t *testing.T) {
	const workspace, perSample = 1 * GiB, 64 * MiB
	j := analysistest.Job(1)
	s := j.Split(29, 1)
	by, _ := byBatchOfWatchedRuns(t, j, workspace, perSample, func(b int64) string {
		return traceLines(t, stepsTrace(t, s.Params+s.Grads+j.Optimizer, workspace, perSample*b, 3, false))
	})
	if by.Basis != "allocator_replay" || by.HelpRun != "b64" || by.MaxFittingValueNoHeadroom == nil {
		t.Fatalf("basis %q, help of %q, %v", by.Basis, by.HelpRun, by.leftOut)
	}
	base := *by.MaxFittingValueNoHeadroom
	got := map[string]float64{}
	for _, r := range by.Help {
		if r.FitsBatch == nil {
			continue
		}
		if !strings.Contains(r.FitsWhy, "allocator replayed") {
			t.Errorf("%s: %s", r.Title, r.FitsWhy)
		}
		key := r.Kind.String()
		if r.N > 0 {
			key += fmt.Sprintf("/%d", r.N)
		}
		got[key] = *r.FitsBatch
	}
	if got["gradient_accumulation/2"] != 2*base || got["gradient_accumulation/4"] != 4*base {
		t.Errorf("accumulation fits %v and %v, want 2 and 4 times %v", got["gradient_accumulation/2"], got["gradient_accumulation/4"], base)
	}
	if got["activation_checkpointing"] <= base*1.2 {
		t.Errorf("checkpointing fits %v, no more than %v", got["activation_checkpointing"], base)
	}
}
