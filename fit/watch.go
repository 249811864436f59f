package fit

import (
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/memrec/memrec/recorder"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// trialWatch stands between a trial's recording and its store: it counts
// the step marks of each rank and the OOM marks as they come, and ends
// the trial once every rank seen has done its steps.
type trialWatch struct {
	recorder.Store
	steps int
	grace time.Duration
	stall time.Duration // after an OOM mark without a step since: the trial has failed
	sigs  chan os.Signal
	// token marks the trial's processes (trialEnv in their environment):
	// the orphans memrec may kill after it are those that carry it.
	token string

	mu          sync.Mutex
	perRank     map[int]int
	ooms        int
	pgid        int
	stopped     bool
	interrupted bool
	kill        *time.Timer
}

func (w *trialWatch) AppendMark(m storage.Mark) error {
	w.mu.Lock()
	switch m.Kind {
	case wire.MarkStep:
		w.perRank[w.markKey(m)]++
		if w.steps > 0 && w.done() {
			w.stopped = true
			w.mu.Unlock()
			w.end(syscall.SIGTERM)
			return w.Store.AppendMark(m)
		}
	case wire.MarkOOM:
		w.ooms++
		k := rankKey(m.Rank, m.PID)
		w.seen(k)
		w.watchOOM(k)
	}
	w.mu.Unlock()
	return w.Store.AppendMark(m)
}

// watchOOM ends the trial if rank k makes no step within stall after its
// OOM: a rank that died of it leaves the others waiting for it (in a
// collective, until a timeout of minutes) under a launcher that does not
// end them. An OOM the rank survived (a library's fallback, a batch
// skipped) is followed by its next step. The caller holds mu.
func (w *trialWatch) watchOOM(k int) {
	at := w.perRank[k]
	time.AfterFunc(w.stall, func() {
		w.mu.Lock()
		stalled := w.perRank[k] == at && !w.stopped && !w.interrupted
		w.mu.Unlock()
		if stalled {
			w.end(syscall.SIGTERM)
		}
	})
}

// AppendTorch makes the sample's rank known before its first step: a
// rank that is slow to start, or that fails before it, holds the trial.
func (w *trialWatch) AppendTorch(s storage.TorchSample) error {
	w.mu.Lock()
	w.seen(rankKey(s.Rank, s.PID))
	w.mu.Unlock()
	return w.Store.AppendTorch(s)
}

// rankKey names a rank: its number, else (no rank given) its process.
func rankKey(rank, pid int) int {
	if rank == storage.None || rank < 0 {
		return -1 - max(pid, 0)
	}
	return rank
}

// markKey is the rank a step mark counts for. A mark that names neither
// rank nor process (a probe older than this memrec, a line of the job's
// own) is the one process's when only one is known. The caller holds mu.
func (w *trialWatch) markKey(m storage.Mark) int {
	k := rankKey(m.Rank, m.PID)
	if k == rankKey(storage.None, storage.None) && len(w.perRank) == 1 {
		for only := range w.perRank {
			return only
		}
	}
	return k
}

// seen adds a rank without steps yet. The caller holds mu.
func (w *trialWatch) seen(k int) {
	if _, ok := w.perRank[k]; !ok {
		w.perRank[k] = 0
	}
}

// done reports whether every rank seen has done its steps, the first
// time it does. The caller holds mu.
func (w *trialWatch) done() bool {
	if w.stopped || w.interrupted {
		return false
	}
	for _, n := range w.perRank {
		if n < w.steps {
			return false
		}
	}
	return true
}

// end asks the trial's process group to exit (SIGTERM when it has done its
// steps, SIGINT on Ctrl-C) and kills it after the grace period.
func (w *trialWatch) end(sig syscall.Signal) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sig == syscall.SIGINT {
		w.interrupted = true
	}
	if w.kill != nil {
		return
	}
	select {
	case w.sigs <- sig:
	default:
	}
	w.kill = time.AfterFunc(w.grace, func() {
		select {
		case w.sigs <- syscall.SIGKILL:
		default:
		}
	})
}

func (w *trialWatch) counts() (steps, ranks, ooms int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	steps = -1
	for _, n := range w.perRank {
		if steps < 0 || n < steps {
			steps = n
		}
	}
	return max(steps, 0), len(w.perRank), w.ooms
}

func (w *trialWatch) ended() (stopped, interrupted bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kill != nil {
		w.kill.Stop()
	}
	return w.stopped, w.interrupted
}

// trialEnv names the environment variable that marks a trial's processes.
const trialEnv = "MEMREC_FIT_TRIAL"

// trialSeq numbers the trials of this process, for their tokens.
var trialSeq atomic.Int64

// waitGroup waits until no process of the trial's group is left (the
// launcher's workers may outlive it), killing the group after the grace
// period, and then kills and waits for the trial's orphans that left the
// group (endOrphans): the next trial must find the GPU as this one found
// it.
func (w *trialWatch) waitGroup() {
	w.mu.Lock()
	pgid := w.pgid
	w.mu.Unlock()
	defer endOrphans(w.token, w.grace)
	if pgid <= 0 {
		return
	}
	deadline := time.Now().Add(w.grace)
	for groupAlive(pgid) {
		if time.Now().After(deadline) {
			syscall.Kill(-pgid, syscall.SIGKILL)
			deadline = time.Now().Add(w.grace)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
