package report

import (
	"fmt"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/analysis/units"
)

// maxEpochRows is the most rows a page's epoch table has: past it, epochs
// are summed in buckets, as the terminal does, and the largest is named.
const maxEpochRows = 20

// epochRow is one row of a page's epoch table: one epoch, or a bucket of
// consecutive closed epochs whose Δ are summed.
type epochRow struct {
	Name      string // "3", "3500–3599"
	Open      bool   // the run ended inside this epoch: its Δ is no growth
	UsedStart *int64
	UsedEnd   *int64
	DeltaUsed *int64
	PeakUsed  *int64
	AllocStart,
	AllocEnd,
	DeltaAlloc,
	PeakAlloc *int64
}

// epochTable is a page's epoch table: its rows, and the largest Δ of the
// epochs summed in them (empty when every row is one epoch).
type epochTable struct {
	Rows    []epochRow
	Per     int    // epochs per bucket; 1: a row per epoch
	Largest string // "epoch 3512: +36.0 MiB allocated"
}

// epochTableOf buckets rows into at most maxEpochRows rows. Open epochs
// keep a row of their own, marked, and never add to a bucket's Δ.
func epochTableOf(rows []analysis.EpochDelta) epochTable {
	var closed, open []analysis.EpochDelta
	for _, e := range rows {
		if e.Open {
			open = append(open, e)
		} else {
			closed = append(closed, e)
		}
	}
	per := 1
	if room := maxEpochRows - len(open); len(closed) > room {
		per = niceCeil((len(closed) + room - 1) / max(room, 1))
	}
	t := epochTable{Per: per}
	var largest *analysis.EpochDelta
	for i := 0; i < len(closed); i += per {
		part := closed[i:min(i+per, len(closed))]
		first, last := part[0], part[len(part)-1]
		r := epochRow{Name: fmt.Sprint(first.Epoch), UsedStart: first.UsedStartBytes, UsedEnd: last.UsedEndBytes,
			AllocStart: first.AllocatedStartBytes, AllocEnd: last.AllocatedEndBytes}
		if len(part) > 1 {
			r.Name = fmt.Sprintf("%d–%d", first.Epoch, last.Epoch)
		}
		for k := range part {
			e := &part[k]
			r.DeltaUsed, r.DeltaAlloc = sumPtr(r.DeltaUsed, e.DeltaUsedBytes), sumPtr(r.DeltaAlloc, e.DeltaAllocatedBytes)
			r.PeakUsed, r.PeakAlloc = maxPtr(r.PeakUsed, e.PeakUsedBytes), maxPtr(r.PeakAlloc, e.PeakAllocatedBytes)
			if per > 1 && (largest == nil || absPtr(deltaOf(e)) > absPtr(deltaOf(largest))) {
				largest = e
			}
		}
		t.Rows = append(t.Rows, r)
	}
	for _, e := range open {
		t.Rows = append(t.Rows, epochRow{Name: fmt.Sprint(e.Epoch), Open: true, UsedStart: e.UsedStartBytes, UsedEnd: e.UsedEndBytes,
			PeakUsed: e.PeakUsedBytes, AllocStart: e.AllocatedStartBytes, AllocEnd: e.AllocatedEndBytes, PeakAlloc: e.PeakAllocatedBytes})
	}
	if largest != nil && deltaOf(largest) != nil {
		what := "allocated"
		if largest.DeltaAllocatedBytes == nil {
			what = "device used"
		}
		t.Largest = fmt.Sprintf("epoch %d: %s %s", largest.Epoch, signedBytes(*deltaOf(largest)), what)
	}
	return t
}

// deltaOf is an epoch's Δ allocated, or Δ device used without the probe.
func deltaOf(e *analysis.EpochDelta) *int64 {
	if e.DeltaAllocatedBytes != nil {
		return e.DeltaAllocatedBytes
	}
	return e.DeltaUsedBytes
}

func signedBytes(v int64) string {
	if v < 0 {
		return "−" + units.FormatBytes(-v)
	}
	return "+" + units.FormatBytes(v)
}

func sumPtr(a, b *int64) *int64 {
	switch {
	case b == nil:
		return a
	case a == nil:
		v := *b
		return &v
	}
	v := *a + *b
	return &v
}

func maxPtr(a, b *int64) *int64 {
	if b == nil || (a != nil && *a >= *b) {
		return a
	}
	v := *b
	return &v
}

func absPtr(v *int64) int64 {
	if v == nil {
		return -1
	}
	return max(*v, -*v)
}
