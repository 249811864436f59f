package viewer

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
)

// request is a parsed query: the run and its index.
type request struct {
	run   storage.Run
	x     *series.Index
	rd    Reader
	stale string
	q     map[string][]string
}

func (s *server) request(r *http.Request) (*request, error) {
	q := r.URL.Query()
	names := q["run"]
	if len(names) != 1 {
		return nil, badRequest("run: give exactly one run name (got %d)", len(names))
	}
	all, err := s.src.Runs()
	listStale := ""
	if errors.Is(err, ErrLockedStale) {
		listStale, err = err.Error(), nil
	}
	if err != nil {
		return nil, err
	}
	run, err := find(all, names[0])
	if err != nil {
		return nil, err
	}
	x, rd, stale, err := s.index(run)
	if err != nil {
		return nil, err
	}
	if stale == "" {
		stale = listStale
	}
	return &request{run: run, x: x, rd: rd, stale: stale, q: q}, nil
}

// seconds reads a parameter in seconds since the run's start as ns since
// the Unix epoch.
func (rq *request) seconds(name string, def *float64) (int64, error) {
	v := rq.q[name]
	if len(v) == 0 && def != nil {
		return rq.run.StartNS + int64(*def*1e9), nil
	}
	if len(v) != 1 {
		return 0, badRequest("%s: give it once, in seconds since the run's start", name)
	}
	f, err := strconv.ParseFloat(v[0], 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, badRequest("%s=%s: want a finite number of seconds since the run's start", name, clip(v[0]))
	}
	if math.Abs(f) > 10*365*86400 {
		return 0, badRequest("%s=%s: more than ten years from the run's start", name, clip(v[0]))
	}
	return rq.run.StartNS + int64(math.Round(f*1e9)), nil
}

func (rq *request) count(name string, def, limit int) (int, error) {
	v := rq.q[name]
	if len(v) == 0 {
		return def, nil
	}
	if len(v) != 1 {
		return 0, badRequest("%s: give it once, a whole number from 1 to %d (got %d)", name, limit, len(v))
	}
	n, err := strconv.Atoi(v[0])
	if err != nil || n < 1 || n > limit {
		return 0, badRequest("%s=%s: want a whole number from 1 to %d", name, clip(v[0]), limit)
	}
	return n, nil
}

// window checks from and to against the run: a window must overlap it.
func (rq *request) window() (from, to int64, err error) {
	if from, err = rq.seconds("from", nil); err != nil {
		return
	}
	if to, err = rq.seconds("to", nil); err != nil {
		return
	}
	if to <= from {
		return 0, 0, badRequest("window from %s to %s: to must be after from", clip(rq.q["from"][0]), clip(rq.q["to"][0]))
	}
	end := runEnd(rq.run, rq.x)
	if to <= rq.run.StartNS || from > end {
		return 0, 0, badRequest("window %s..%s s is outside the run, which spans 0..%.3f s", clip(rq.q["from"][0]), clip(rq.q["to"][0]), float64(end-rq.run.StartNS)/1e9)
	}
	return from, to, nil
}

// wholeOr is the window of from and to, or the whole run when neither is
// given.
func (rq *request) wholeOr() (from, to int64, err error) {
	if len(rq.q["from"]) == 0 && len(rq.q["to"]) == 0 {
		return rq.run.StartNS, runEnd(rq.run, rq.x) + 1, nil
	}
	return rq.window()
}

// gpu reads the gpu parameter: one of the run's GPUs (404 for another).
func (rq *request) gpu() (int, error) {
	v := rq.q["gpu"]
	n, err := 0, error(nil)
	if len(v) == 1 {
		n, err = strconv.Atoi(v[0])
	}
	if len(v) != 1 || err != nil || n < 0 {
		return 0, badRequest("gpu=%s: give one GPU index, a whole number from 0", clip(strings.Join(v, ",")))
	}
	var has []string
	for _, g := range rq.run.GPUs {
		if g.Index == n {
			return n, nil
		}
		has = append(has, strconv.Itoa(g.Index))
	}
	return 0, &httpError{http.StatusNotFound, fmt.Sprintf("run %q has no GPU %d (it has %s)", rq.run.Name, n, strings.Join(has, ", "))}
}

func (rq *request) keys() ([]series.Key, error) {
	lines := rq.q["line"]
	if len(lines) == 0 || len(lines) > MaxLines {
		return nil, badRequest("line: give 1 to %d lines (got %d)", MaxLines, len(lines))
	}
	var keys []series.Key
	for _, l := range lines {
		if len(l) > maxEcho {
			return nil, badRequest("line %s: no line has a name that long", clip(l))
		}
		k, err := series.ParseKey(l)
		if err != nil {
			return nil, badRequest("%v", err)
		}
		if slices.Contains(keys, k) {
			return nil, badRequest("line %s: given twice", clip(l))
		}
		if _, ok := rq.x.Last(k); !ok {
			return nil, fmt.Errorf("run %q has no line %s: %w", rq.run.Name, l, series.ErrNoLine)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func (rq *request) raw(k series.Key) series.RawReader {
	if rq.rd == nil {
		return nil
	}
	return rq.rd(rq.run, k)
}
