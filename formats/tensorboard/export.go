package tensorboard

import (
	"fmt"
	"io"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/internal/safefile"
)

// DefaultPoints is the number of points per series when none is given:
// what TensorBoard keeps of a scalar series by default. Past it,
// TensorBoard's loader keeps a random sample (reservoir sampling), which
// drops peaks; at or under it, every point, so the M4 downsampling here
// decides what is kept and keeps each bucket's highest and lowest value.
// More points need TensorBoard started with --samples_per_plugin scalars=0.
const DefaultPoints = TensorBoardKeeps

// TensorBoardKeeps is the number of points TensorBoard keeps of a scalar
// series unless started with --samples_per_plugin scalars=N (0: all).
const TensorBoardKeeps = 1000

// Buckets is the analysis width (analysis.Options.Width) that gives at most
// points points per timeline: M4 keeps up to four points per bucket.
func Buckets(points int) int {
	if points <= 0 {
		points = DefaultPoints
	}
	return max(points/4, 1)
}

// FileName is the name TensorBoard looks for:
// events.out.tfevents.<unix seconds>.<host>.<pid>.memrec. The host comes
// from the data, so it is made one safe path component (safefile.Name): a
// host "/../../x" gives "_.._.._x", inside the folder.
func FileName(unixSeconds int64, host string, pid int) string {
	if host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("events.out.tfevents.%d.%s.%d.memrec", unixSeconds, safefile.Name(host), pid)
}

// Tags of the scalars, one set per GPU N: "<figure>/gpuN", so TensorBoard
// shows each figure of every GPU in one section. Memory is in MiB (2^20
// bytes), fragmentation a fraction of reserved memory.
const (
	TagUsed           = "device_used_MiB"
	TagDriverReserved = "driver_reserved_MiB"
	TagAllocated      = "allocated_MiB"
	TagReserved       = "reserved_MiB"
	TagStepPeak       = "step_peak_allocated_MiB"
	TagFragmentation  = "fragmentation"
	TagStuck          = "fragmentation_stuck"
	TagEpochUsed      = "epoch_delta_used_MiB"
	TagEpochAllocated = "epoch_delta_allocated_MiB"
	// TagBudget is the figure of one part of the budget at the peak
	// ("budget_optimizer_state_MiB"), one point at the peak's step.
	TagBudget = "budget_%s_MiB"
)

// Tag is the full tag of a figure of one GPU.
func Tag(figure string, gpu int) string { return fmt.Sprintf("%s/gpu%d", figure, gpu) }

const mib = 1 << 20

// Export writes rep as one event file. points bounds the points of each
// series (0: DefaultPoints); rep's timelines must already be downsampled to
// Buckets(points), and the per-step peaks are downsampled here the same way.
//
// The step of a point is the training step it falls in where the run has
// step marks (after the last mark: the last step), else its index among the
// series' samples. Per-epoch deltas use the epoch number as their step;
// wall_time is always the real time.
func Export(out io.Writer, rep *analysis.Report, points int) error {
	buckets := Buckets(points)
	w := NewWriter(out, float64(rep.StartNS)/1e9)
	for i := range rep.GPUs {
		g := &rep.GPUs[i]
		step := func(t, index int64) int64 {
			if g.Steps.Len() == 0 {
				return index
			}
			if s, ok := g.StepAt(t); ok {
				return int64(s)
			}
			return int64(g.Steps.Last().Step)
		}
		for _, s := range []struct {
			figure string
			s      analysis.Series
		}{{TagUsed, g.Timeline.Used}, {TagDriverReserved, g.Timeline.DriverReserved},
			{TagAllocated, g.Timeline.Allocated}, {TagReserved, g.Timeline.Reserved}} {
			tag := Tag(s.figure, g.GPU)
			for k, t := range s.s.T {
				w.Scalar(tag, step(t, s.s.I[k]), seconds(t), float32(float64(s.s.V[k])/mib))
			}
		}
		if len(g.StepPeaks) > 0 {
			idx := make([]int64, len(g.StepPeaks))
			v := make([]int64, len(g.StepPeaks))
			for k, p := range g.StepPeaks {
				idx[k], v[k] = int64(k), p.Bytes
			}
			tag := Tag(TagStepPeak, g.GPU)
			for _, k := range analysis.Downsample("", idx, v, buckets).T {
				p := g.StepPeaks[k]
				w.Scalar(tag, int64(p.X), seconds(p.TNS), float32(float64(p.Bytes)/mib))
			}
		}
		frag, stuck := Tag(TagFragmentation, g.GPU), Tag(TagStuck, g.GPU)
		for _, p := range g.FragSeries {
			s := step(p.TNS, p.I)
			w.Scalar(frag, s, seconds(p.TNS), float32(p.Frag))
			w.Scalar(stuck, s, seconds(p.TNS), float32(p.Stuck))
		}
		if b := g.Budget; b != nil {
			for _, part := range b.Parts {
				w.Scalar(Tag(fmt.Sprintf(TagBudget, part.Part), g.GPU), step(b.TNS, 0), seconds(b.TNS), float32(float64(part.Bytes)/mib))
			}
		}
		used, alloc := Tag(TagEpochUsed, g.GPU), Tag(TagEpochAllocated, g.GPU)
		for _, e := range g.Epochs {
			if e.DeltaUsedBytes != nil {
				w.Scalar(used, int64(e.Epoch), seconds(e.EndNS), float32(float64(*e.DeltaUsedBytes)/mib))
			}
			if e.DeltaAllocatedBytes != nil {
				w.Scalar(alloc, int64(e.Epoch), seconds(e.EndNS), float32(float64(*e.DeltaAllocatedBytes)/mib))
			}
		}
	}
	return w.Flush()
}

func seconds(tns int64) float64 { return float64(tns) / 1e9 }
