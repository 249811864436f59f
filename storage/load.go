package storage

import (
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// Loader writes whole runs into the file inside one transaction (Load):
// the JSON Lines import and the merge of a multi-node job build their
// runs through it, row by row, and the store checks every row against its
// limits (limits.go) as it would a recorder's. A Loader writes one run at
// a time: Start begins the next, Finish writes the current one out.
//
// A Loader is not safe for concurrent use and is valid only inside the
// function given to Load. A zero Loader is not usable.
type Loader struct {
	tx   *bolt.Tx
	w    *runWriter // the current run; nil between runs
	done []Run
}

// Load calls f with a Loader in one write transaction and commits what f
// wrote: every run f started, or, when f or a write returns an error,
// nothing (the file is left exactly as it was). The run f started last is
// finished for it. It blocks until done (and while another writer holds
// the file) and returns the runs written, in the order f started them.
func (db *DB) Load(f func(l *Loader) error) ([]Run, error) {
	var runs []Run
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		l := &Loader{tx: tx}
		if err := f(l); err != nil {
			return err
		}
		if err := l.Finish(); err != nil {
			return err
		}
		runs = l.done
		return nil
	})
	return runs, err
}

// Start finishes the current run (Finish) and creates r, refused with
// ErrExists where a run of its name is stored, or replacing that run when
// replace is set; r is checked against the store's limits (ErrLimit). A
// StartNS of MinTime means "not known": the first row's time becomes it.
// It returns r as stored (with its id).
func (l *Loader) Start(r Run, replace bool) (Run, error) {
	if err := l.Finish(); err != nil {
		return Run{}, err
	}
	r, err := createRun(l.tx, r, replace)
	if err != nil {
		return Run{}, err
	}
	l.w = newRunWriter(r)
	return r, nil
}

// Run is the current run as it stands (its GPUs and counts so far); the
// zero Run between runs.
func (l *Loader) Run() Run {
	if l.w == nil {
		return Run{}
	}
	return l.w.run
}

// Finished is the runs written so far, in order.
func (l *Loader) Finished() []Run { return l.done }

// Finish writes the current run out, its last chunks sealed; nothing
// between runs.
func (l *Loader) Finish() error {
	if l.w == nil {
		return nil
	}
	l.w.sealAll()
	committed, err := l.w.flush(l.tx)
	if err != nil {
		return err
	}
	committed()
	l.done = append(l.done, l.w.run)
	l.w = nil
	return nil
}

// AddGPU declares a GPU of the current run; rows of undeclared GPUs are
// refused. A GPU past the store's limits is refused with ErrLimit, one
// declared twice too. The errors start with "gpu".
func (l *Loader) AddGPU(g GPU) error {
	if err := checkGPU(g); err != nil {
		return fmt.Errorf("gpu: %w", err)
	}
	if len(l.w.run.GPUs) >= MaxGPUs {
		return fmt.Errorf("gpu: more than %d GPUs in run %q: %w", MaxGPUs, l.w.run.Name, ErrLimit)
	}
	if l.w.gpus[g.Index] {
		return fmt.Errorf("gpu %d declared twice", g.Index)
	}
	l.w.run.GPUs = append(l.w.run.GPUs, g)
	l.w.gpus[g.Index] = true
	return nil
}

// SetComplete sets whether the current run is complete (an input that
// ended early is not).
func (l *Loader) SetComplete(complete bool) { l.w.run.Complete = complete }

// AppendDevice appends one device sample to the current run.
func (l *Loader) AppendDevice(s DeviceSample) error { return loadRow(l, &deviceSchema, s) }

// AppendProc appends one per-process sample to the current run.
func (l *Loader) AppendProc(s ProcSample) error { return loadRow(l, &procSchema, s) }

// AppendTorch appends one allocator sample to the current run.
func (l *Loader) AppendTorch(s TorchSample) error { return loadRow(l, &torchSchema, s) }

// AppendBudget appends one budget sample to the current run.
func (l *Loader) AppendBudget(s BudgetSample) error { return loadRow(l, &budgetSchema, s) }

// AppendMark appends one mark to the current run.
func (l *Loader) AppendMark(m Mark) error { return loadRow(l, &markSchema, m) }

// AppendSites appends the rows of one site snapshot to the current run:
// all of them or, on an error, none.
func (l *Loader) AppendSites(rows []SiteSample) error {
	err := appendSites(l.w, rows)
	if len(rows) > 0 {
		l.firstTime(rows[0].T)
	}
	return err
}

// AppendSiteRow appends one row of a site snapshot, for a copy of stored
// rows in their order (a snapshot's untracked row first).
func (l *Loader) AppendSiteRow(s SiteSample) error { return loadRow(l, &siteSchema, s) }

// loadRow appends v to the current run and dates the run by it if it has
// no start yet.
func loadRow[T any](l *Loader, sc *rowSchema[T], v T) error {
	err := appendRow(l.w, sc, v)
	l.firstTime(sc.time(v))
	return err
}

func (l *Loader) firstTime(t int64) {
	if l.w.run.StartNS == MinTime {
		l.w.run.StartNS = t
	}
}
