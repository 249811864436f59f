package analysis

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memrec/memrec/internal/jobmodel"
	"github.com/memrec/memrec/testsupport/fixtures"
)

// evalRun is jobmodel's H200 job on one GPU, emptying its cache at every
// step end: 40 steps of 250 ms (plus up to 5 ms, the first 30 ms waiting
// for the batch) an epoch, sampled at 100 Hz, with an evaluation pass of
// pauseNS between epochs.
func evalRun(name string, epochs int, pauseNS int64, leak int64) fixtures.EvalPauses {
	j := jobmodel.H200(1, 40)
	j.Leak, j.EvalActivations, j.Total = []int64{leak}, GiB, 80*GiB
	return fixtures.EvalPauses{Name: name, Job: j, Epochs: epochs, StepNS: 250e6, JitterNS: 5e6, LoadNS: 30e6, PauseNS: pauseNS, IntervalNS: 10e6, Seed: 7}
}

// TestEpochsInferredFromPauses analyses device-only runs of the job model
// with an evaluation pass between epochs: the epochs found must be the
// model's: as many, their bounds within two steps of the model's, and
// their values the model's floors (used memory while a step waits for its
// batch) at the steps they start and end in, exactly. An inferred epoch
// runs from the floor before its first step to the floor before its last
// (docs/analysis.md), and epoch 0 may begin one step late: its first
// step's fall is the optimizer state's arrival as much as the activations'
// departure, and no deeper than half a step's.
// The pause may be flat or a smaller sawtooth (evaluation batches, each
// emptying the cache): what breaks the pattern is the absence of falls as
// deep as a training step's.
func TestEpochsInferredFromPauses(t *testing.T) {
	const stepNS = 255e6 // the longest step: bounds within two of these
	// Evaluation in batches of 100 ms: a sawtooth of a quarter of the
	// training step's depth, which is no step fall.
	evalBatches := evalRun("eval-batches", 4, 3e9, MiB)
	evalBatches.EvalStepNS = 100e6
	for _, tc := range []struct {
		name string
		cfg  fixtures.EvalPauses
	}{
		{"eval-5", evalRun("eval-5", 5, 3e9, 0)},
		{"eval-leak", evalRun("eval-leak", 4, 2e9, 2*MiB)},
		{"eval-short-pause", evalRun("eval-short-pause", 3, 1.5e9, 0)},
		{"eval-batches", evalBatches},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, truth := tc.cfg.Write()
			g := importFixtures(t, map[string][]byte{tc.name: data})[tc.name].GPUs[0]
			if len(g.InferredEpochs) != len(truth) {
				t.Fatalf("%d epochs inferred (%s%s), the model has %d", len(g.InferredEpochs), g.InferredEpochBasis, g.EpochsNotInferred, len(truth))
			}
			if g.InferredEpochBasis == "" || g.EpochsNotInferred != "" || len(g.Epochs) != 0 {
				t.Errorf("basis %q, not inferred %q, marked epochs %d", g.InferredEpochBasis, g.EpochsNotInferred, len(g.Epochs))
			}
			for i, e := range g.InferredEpochs {
				tr := truth[i]
				if d := e.StartNS - tr.StartNS; d < -2*stepNS || d > 2*stepNS {
					t.Errorf("epoch %d starts %.3f s from the model's start", i, float64(d)/1e9)
				}
				if d := e.EndNS - tr.EndNS; d < -2*stepNS || d > 2*stepNS {
					t.Errorf("epoch %d ends %.3f s from the model's end", i, float64(d)/1e9)
				}
				first, last := nearestStep(tr.Steps, e.StartNS), nearestStep(tr.Steps, e.EndNS)
				if first > 1 || last < len(tr.Steps)-2 {
					t.Errorf("epoch %d runs from its step %d to its step %d of %d", i, first, last, len(tr.Steps))
				}
				from, to := tr.Steps[first].FloorBytes, tr.Steps[last].FloorBytes
				if e.UsedStartBytes == nil || *e.UsedStartBytes != from || e.UsedEndBytes == nil || *e.UsedEndBytes != to {
					t.Errorf("epoch %d: used %v to %v, the model's floors %d to %d", i, deref64(e.UsedStartBytes), deref64(e.UsedEndBytes), from, to)
				}
				if e.DeltaUsedBytes == nil || *e.DeltaUsedBytes != to-from {
					t.Errorf("epoch %d: Δ used %v, the model's %d", i, deref64(e.DeltaUsedBytes), to-from)
				}
				t.Logf("epoch %d: start %+.3f s, end %+.3f s off the model's; Δ used %d", i,
					float64(e.StartNS-tr.StartNS)/1e9, float64(e.EndNS-tr.EndNS)/1e9, deref64(e.DeltaUsedBytes))
			}
		})
	}
}

// nearestStep is the index of the step whose start is nearest to t.
func nearestStep(steps []fixtures.StepTruth, t int64) int {
	best := 0
	for i, s := range steps {
		if abs64(s.StartNS-t) < abs64(steps[best].StartNS-t) {
			best = i
		}
	}
	return best
}

// TestNoEpochsWithoutRecurringBreaks: a job without pauses, with one pause,
// or with pauses at irregular places, and the real H200 runs recorded
// without the probe (or with the probe's data dropped), get no epochs, and
// a reason. The real runs' scripts either had no epochs, or (the probe
// runs) started each epoch the moment the last ended, with their device
// memory flat under PyTorch's cache: their marks say epochs, the device
// shows none, and inferring none is right for them.
func TestNoEpochsWithoutRecurringBreaks(t *testing.T) {
	one := evalRun("one-pause", 2, 3e9, 0)
	none := evalRun("no-pause", 1, 0, 0)
	none.Job.StepsPerEpoch = 120
	odd := evalRun("odd-pauses", 1, 3e9, 0)
	odd.Job.StepsPerEpoch, odd.PauseAfter = 200, []int{30, 110, 130}
	inputs := map[string][]byte{}
	want := map[string]string{} // run -> the reason's start
	for _, c := range []fixtures.EvalPauses{one, none, odd} {
		inputs[c.Name], _ = c.Write()
	}
	want["one-pause"], want["no-pause"], want["odd-pauses"] = "one break", "no break", "no recurring break"
	for _, f := range fixtures.H200Plain {
		inputs[f] = fixtures.Read(t, f)
		want[f[len("h200-"):]] = "no step pattern"
	}
	for _, f := range append(append([]string{fixtures.LeakRun, fixtures.CleanRun}, fixtures.H200R18...), fixtures.H200GPT...) {
		inputs[f] = fixtures.DeviceOnly(t, f)
		name := strings.TrimPrefix(f, "h200-") + "-device"
		want[name] = "no step pattern"
	}
	reps := importFixtures(t, inputs)
	for name, why := range want {
		rep := reps[name]
		if rep == nil {
			t.Errorf("%s: not imported", name)
			continue
		}
		g := rep.GPUs[0]
		if len(g.InferredEpochs) > 0 || g.InferredEpochBasis != "" || !strings.HasPrefix(g.EpochsNotInferred, why) {
			t.Errorf("%s: %d epochs inferred (%s), reason %q; want none: %s", name, len(g.InferredEpochs), g.InferredEpochBasis, g.EpochsNotInferred, why)
		}
		t.Logf("%s: %s", name, g.EpochsNotInferred)
	}
}

// TestMarksWin: the same run with its epoch marks has its marked epochs,
// and nothing is inferred or said about inferring.
func TestMarksWin(t *testing.T) {
	data, truth := evalRun("marked", 4, 2e9, 0).Write()
	for i, e := range truth {
		data = fmt.Appendf(data, `{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":%d}`+"\n", e.StartNS, i)
		data = fmt.Appendf(data, `{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":%d}`+"\n", e.EndNS, i)
	}
	g := importFixtures(t, map[string][]byte{"marked": data})["marked"].GPUs[0]
	if len(g.Epochs) != len(truth) || g.InferredEpochs != nil || g.InferredEpochBasis != "" || g.EpochsNotInferred != "" {
		t.Errorf("%d marked epochs, %d inferred (%q, %q); want %d marked and none inferred",
			len(g.Epochs), len(g.InferredEpochs), g.InferredEpochBasis, g.EpochsNotInferred, len(truth))
	}
}
