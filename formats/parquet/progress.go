package parquet

import (
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// noMark is the epoch and step of a row before the first mark: -1, as
// /metrics' memrec_epoch and memrec_step and the CSV say, so the columns
// are never null and a GROUP BY epoch keeps the setup before training as
// its own group.
const noMark = -1

// progress is one timeline of marks: at each time t[i] the value became
// v[i]. Times ascend.
type progress struct {
	t, v []int64
}

func (p *progress) add(t, v int64) {
	p.t = append(p.t, t)
	p.v = append(p.v, v)
}

// cursor reads a progress at ascending times, in O(1) a row.
type cursor struct {
	p *progress
	i int
}

// at is the value of the latest change at or before t (noMark before the
// first). Each call's t is at least the previous call's.
func (c *cursor) at(t int64) int64 {
	for c.i < len(c.p.t) && c.p.t[c.i] <= t {
		c.i++
	}
	if c.i == 0 {
		return noMark
	}
	return c.p.v[c.i-1]
}

// marksProgress is a run's epoch and step timelines: per rank, and the
// furthest of any rank (the CSV's epoch and step columns, /metrics').
type marksProgress struct {
	epoch, step       map[int]*progress // by rank; a mark without one is rank 0
	anyEpoch, anyStep progress
}

// readProgress reads the run's epoch_start and step marks. Memory grows
// with the number of such marks (a few words each).
func readProgress(db *storage.DB, r storage.Run) (*marksProgress, error) {
	m := &marksProgress{epoch: map[int]*progress{}, step: map[int]*progress{}}
	furthestEpoch, furthestStep := int64(noMark), int64(noMark)
	it := db.Marks(r, storage.MinTime, storage.MaxTime)
	for it.Next() {
		k := it.At()
		rank := max(k.Rank, 0)
		switch {
		case k.Kind == wire.MarkEpochStart && k.Epoch >= 0:
			timeline(m.epoch, rank).add(k.T, int64(k.Epoch))
			if int64(k.Epoch) > furthestEpoch {
				furthestEpoch = int64(k.Epoch)
				m.anyEpoch.add(k.T, furthestEpoch)
			}
		case k.Kind == wire.MarkStep && k.Step >= 0:
			timeline(m.step, rank).add(k.T, int64(k.Step))
			if int64(k.Step) > furthestStep {
				furthestStep = int64(k.Step)
				m.anyStep.add(k.T, furthestStep)
			}
		}
	}
	return m, it.Err()
}

func timeline(by map[int]*progress, rank int) *progress {
	p := by[rank]
	if p == nil {
		p = &progress{}
		by[rank] = p
	}
	return p
}

// cursors are the epoch and step cursors of a rank's rows: its own
// timelines where the run's marks come from two ranks or more and this one
// has marks, else the furthest of any rank (the same thing for one rank).
// rank is storage.None for rows of no one rank (a GPU shared by several).
func (m *marksProgress) cursors(rank int) (epoch, step cursor) {
	epoch, step = cursor{p: &m.anyEpoch}, cursor{p: &m.anyStep}
	if rank == storage.None || len(m.epoch) < 2 && len(m.step) < 2 {
		return epoch, step
	}
	if p := m.epoch[max(rank, 0)]; p != nil {
		epoch.p = p
	}
	if p := m.step[max(rank, 0)]; p != nil {
		step.p = p
	}
	return epoch, step
}
