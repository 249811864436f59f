package recorder

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/memrec/memrec/storage"
)

// Store is where a recording goes: its samples and marks as they come (a
// Sink, safe for concurrent use), then Finish with the recorder's own
// figures. Whoever calls Record opens it through Options.Open, once the
// run is known: over a database (DBStore), waiting for a database another
// process holds (HeldStore), or nowhere (Discard).
type Store interface {
	Sink
	// Finish stores rec with the run, writes what is still buffered and
	// closes what the store opened. It is called once, after the last
	// append, and never fails: what went wrong is in the result.
	Finish(rec storage.Recorder) StoreResult
}

// StoreResult is what a Store did with a recording.
type StoreResult struct {
	Written bool        // the run is in a database (complete or not)
	Run     storage.Run // as stored, when Written
	Errors  int64       // failed commits
	LastErr error
	// Lost is what was dropped unwritten, to bound memory, while the
	// database could not be written (or was not open yet).
	Lost storage.Counts
	// Wait is how long a HeldStore waited for its database; Held is how
	// many samples and marks it wrote late, once it opened.
	Wait time.Duration
	Held int64
	// Unstored is what was recorded but is not in the file because the
	// last commits failed (a full disk), and UnstoredSpan the part of the
	// recording at its end that the file lacks. Lost comes on top.
	Unstored     storage.Counts
	UnstoredSpan time.Duration
}

// commitErrors counts the failed commits of a recording and logs them, at
// most once every 10 s (loud, but not a flood). It is safe for concurrent
// use.
type commitErrors struct {
	log     io.Writer
	n       atomic.Int64
	last    atomic.Value // error
	mu      sync.Mutex
	lastLog time.Time
}

func (c *commitErrors) add(err error) {
	c.n.Add(1)
	c.last.Store(err)
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.lastLog) > 10*time.Second {
		c.lastLog = time.Now()
		fmt.Fprintf(c.log, "memrec: WARNING: cannot write the database, samples are kept in memory and retried: %v\n", err)
	}
}

func (c *commitErrors) options() storage.AppendOptions {
	return storage.AppendOptions{OnError: c.add}
}

// into copies the counts into r.
func (c *commitErrors) into(r *StoreResult) {
	r.Errors = c.n.Load()
	if e, ok := c.last.Load().(error); ok {
		r.LastErr = e
	}
}

// finishAppender ends a recording's Appender: the figures, the final
// commit, the counts.
func finishAppender(app *storage.Appender, rec storage.Recorder, errs *commitErrors, r *StoreResult) {
	app.SetRecorder(rec)
	if err := app.Close(); err != nil {
		errs.n.Add(1)
		errs.last.Store(err)
		fmt.Fprintf(errs.log, "memrec: WARNING: the final commit failed; the run holds what was committed before: %v\n", err)
	}
	r.Written, r.Run = true, app.Run()
	r.Lost = addCounts(r.Lost, app.Lost())
	stored := app.Committed()
	r.Unstored = subCounts(r.Run.Counts, stored.Counts)
	if r.Unstored.Total() > 0 && r.Run.EndNS > stored.EndNS {
		r.UnstoredSpan = time.Duration(r.Run.EndNS - max(stored.EndNS, stored.StartNS))
	}
	errs.into(r)
}

// dbStore writes a recording into an open database.
type dbStore struct {
	*storage.Appender
	errs *commitErrors
}

// DBStore creates the run in db (incomplete until Finish) and returns the
// store that writes it, committing once a second; a failed commit is
// logged on log and retried. db stays the caller's to close, after Finish.
func DBStore(db *storage.DB, run storage.Run, log io.Writer) (Store, error) {
	errs := &commitErrors{log: log}
	app, err := db.NewAppender(run, errs.options())
	if err != nil {
		return nil, err
	}
	return &dbStore{Appender: app, errs: errs}, nil
}

func (s *dbStore) Finish(rec storage.Recorder) StoreResult {
	var r StoreResult
	finishAppender(s.Appender, rec, s.errs, &r)
	return r
}

// Discard is a Store that keeps nothing: recording without a database
// still runs the command.
var Discard Store = discardStore{}

type discardStore struct{}

func (discardStore) AppendDevice(storage.DeviceSample) error { return nil }
func (discardStore) AppendProc(storage.ProcSample) error     { return nil }
func (discardStore) AppendTorch(storage.TorchSample) error   { return nil }
func (discardStore) AppendMark(storage.Mark) error           { return nil }
func (discardStore) AppendSites([]storage.SiteSample) error  { return nil }
func (discardStore) AppendBudget(storage.BudgetSample) error { return nil }
func (discardStore) Finish(storage.Recorder) StoreResult     { return StoreResult{} }

func addCounts(a, b storage.Counts) storage.Counts {
	return storage.Counts{Samples: a.Samples + b.Samples, ProcSamples: a.ProcSamples + b.ProcSamples,
		TorchSamples: a.TorchSamples + b.TorchSamples, Marks: a.Marks + b.Marks, Sites: a.Sites + b.Sites,
		Budgets: a.Budgets + b.Budgets}
}

func subCounts(a, b storage.Counts) storage.Counts {
	return storage.Counts{Samples: a.Samples - b.Samples, ProcSamples: a.ProcSamples - b.ProcSamples,
		TorchSamples: a.TorchSamples - b.TorchSamples, Marks: a.Marks - b.Marks}
}
