package storage

import (
	"errors"
	"fmt"

	"github.com/memrec/memrec/storage/internal/chunk"
	"github.com/memrec/memrec/storage/wire"
)

// This file is the budget series: what a watched model's own tensors hold
// in one process on one GPU (memrec.watch), one row per allocator sample
// that carried it. On the wire the budget rides in the torch line of the
// same sample; stored, it is a series of its own (kindBudget, its own chunk
// group), so the torch series keep their columns and memrec before the
// budget reads a run as before: it lists only the kinds it knows.

// BudgetSample is one reading of the budget (wire.BudgetSample).
type BudgetSample = wire.BudgetSample

// Autocast says whether the forward ran under autocast (wire.Autocast).
type Autocast = wire.Autocast

// Flag is a yes or no the probe may not know yet (wire.Flag).
type Flag = wire.Flag

const (
	FlagUnknown = wire.FlagUnknown
	FlagNo      = wire.FlagNo
	FlagYes     = wire.FlagYes
)

const (
	AutocastUnknown = wire.AutocastUnknown
	AutocastOff     = wire.AutocastOff
	AutocastOn      = wire.AutocastOn
)

// kindBudget is the budget series' number in the series table.
const kindBudget seriesKind = 6

// SeriesBudget is the kind of a budget series.
const SeriesBudget SeriesKind = "budget"

var budgetSchema = rowSchema[BudgetSample]{
	schema: schema{name: SeriesBudget, ints: append(append([]string{"rank+1"}, columnNames(wire.BudgetFields, nil)...), "autocast", "grads_at_forward"),
		strs:  budgetStrs(),
		count: func(c *Counts) *int64 { return &c.Budgets }},
	kind: kindBudget,
	key:  func(s BudgetSample) seriesKey { return seriesKey{kind: kindBudget, gpu: s.GPU, pid: s.PID} },
	time: func(s BudgetSample) int64 { return s.T },
	check: func(s BudgetSample) error {
		if err := checkPID(s.PID); err != nil {
			return err
		}
		if s.Autocast > AutocastOn || s.GradsAtForward > wire.FlagYes {
			return errors.New("autocast or grads_at_forward is not unknown, no or yes")
		}
		if err := checkFields(wire.BudgetFields, s); err != nil {
			return err
		}
		for _, f := range wire.BudgetFields {
			if err := checkFigure(f.Name, f.Get(s)); err != nil {
				return err
			}
		}
		if s.Trainable > s.ParamCount {
			return fmt.Errorf("trainable (%d) is more than params (%d)", s.Trainable, s.ParamCount)
		}
		for _, f := range wire.BudgetStrings {
			if err := checkText(f.Name, f.Get(s), MaxTextBytes); err != nil {
				return err
			}
		}
		return nil
	},
	put: func(s BudgetSample, ints []int64, strs []string) ([]int64, []string) {
		return append(ints, optEncode(s.Rank), s.Params, s.Grads, s.OptimizerState, s.Buffers, s.ParamCount,
				s.Trainable, int64(s.Autocast), int64(s.GradsAtForward)),
			append(strs, s.Optimizer, s.OptimizerKeys, s.DType)
	},
	get: func(d *chunk.Decoded, i int, k seriesKey) BudgetSample {
		c, st := d.Ints, d.Strs
		return BudgetSample{T: d.T[i] * 1000, GPU: k.gpu, PID: k.pid, Rank: optDecode(c[0][i]), Params: c[1][i],
			Grads: c[2][i], OptimizerState: c[3][i], Buffers: c[4][i], ParamCount: c[5][i], Trainable: c[6][i],
			Autocast: Autocast(c[7][i]), GradsAtForward: wire.Flag(c[8][i]), Optimizer: st[0][i], OptimizerKeys: st[1][i], DType: st[2][i]}
	},
}

func init() { schemas[kindBudget] = &budgetSchema.schema }

func budgetStrs() []string {
	var names []string
	for _, sf := range wire.BudgetStrings {
		names = append(names, sf.Name)
	}
	return names
}

// BudgetSamples iterates one process's budget samples on one GPU in [from, to).
func (db *DB) BudgetSamples(r Run, gpu, pid int, from, to int64) *Iter[BudgetSample] {
	return newIter(db, r, &budgetSchema, seriesKey{kind: kindBudget, gpu: gpu, pid: pid}, from, to)
}

// AppendBudget buffers one budget sample. Safe for concurrent use, as the
// other Append methods.
func (a *Appender) AppendBudget(s BudgetSample) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return appendRow(a.w, &budgetSchema, s)
}
