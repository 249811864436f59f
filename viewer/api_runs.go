package viewer

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
)

// runJSON is a run as the page needs it. Times are µs since the run's
// start; the start itself is in ms since the Unix epoch (a float64 holds
// it exactly, which ns would not).
type runJSON struct {
	Name      string         `json:"name"`
	StartMS   int64          `json:"start_ms"`
	EndUS     int64          `json:"end_us"`
	Complete  bool           `json:"complete"`
	Live      bool           `json:"live"`
	Host      string         `json:"host,omitempty"`
	Tags      any            `json:"tags,omitempty"`
	GPUs      []gpuJSON      `json:"gpus"`
	Lines     []lineJSON     `json:"lines"`
	Steps     [][2]int64     `json:"steps"` // [t_us, step]
	StepEvery int            `json:"step_every"`
	Samples   int64          `json:"samples"`
	Epochs    [][3]int64     `json:"epochs"` // [start_us, end_us, epoch]
	Stale     string         `json:"stale,omitempty"`
	Counts    storage.Counts `json:"counts"`
	SiteGPUs  []int          `json:"site_gpus"` // the GPUs with allocation-site snapshots (/api/sites)
}

type gpuJSON struct {
	GPU   int    `json:"gpu"`
	Label string `json:"label"`
	Name  string `json:"name,omitempty"`
	Total int64  `json:"total_bytes,omitempty"`
}

type lineJSON struct {
	Key   string `json:"key"`
	Label string `json:"label"`
	GPU   int    `json:"gpu"`
	PID   int    `json:"pid,omitempty"`
	Field string `json:"field"`
}

// runsJSON answers /api/runs: every run's name, and the shown runs in full.
type runsJSON struct {
	All   []string  `json:"all"`
	Shown []runJSON `json:"shown"`
	Live  bool      `json:"live"` // the source is a recording: ask again every second
}

func (s *server) runs(w http.ResponseWriter, r *http.Request) {
	all, err := s.src.Runs()
	stale := ""
	if errors.Is(err, ErrLockedStale) {
		stale, err = err.Error(), nil
	}
	if err != nil {
		reply(w, nil, err)
		return
	}
	names := r.URL.Query()["run"]
	if len(names) == 0 {
		names = s.opts.Runs
	}
	if len(names) == 0 && len(all) > 0 {
		names = []string{all[len(all)-1].Name}
	}
	if len(names) > 8 {
		reply(w, nil, badRequest("%d runs: the page overlays at most 8", len(names)))
		return
	}
	out := runsJSON{All: []string{}, Shown: []runJSON{}, Live: s.opts.Live}
	for _, run := range all {
		out.All = append(out.All, run.Name)
	}
	for _, name := range names {
		run, err := find(all, name)
		if err != nil {
			reply(w, nil, err)
			return
		}
		rj, err := s.describe(run)
		if err != nil {
			reply(w, nil, err)
			return
		}
		if rj.Stale == "" {
			rj.Stale = stale
		}
		out.Shown = append(out.Shown, rj)
	}
	reply(w, out, nil)
}

func find(all []storage.Run, name string) (storage.Run, error) {
	if name == "" {
		return storage.Run{}, badRequest("run: empty name")
	}
	for _, r := range all {
		if r.Name == name {
			return r, nil
		}
	}
	return storage.Run{}, fmt.Errorf("run %s: %w", clip(name), storage.ErrNoRun)
}

// index returns the run's index; stale is what the page should say when
// the file is locked.
func (s *server) index(run storage.Run) (x *series.Index, rd Reader, stale string, err error) {
	x, rd, err = s.src.Index(run)
	if errors.Is(err, ErrLockedStale) {
		return x, nil, err.Error(), nil
	}
	return x, rd, "", err
}

func (s *server) describe(run storage.Run) (runJSON, error) {
	x, _, stale, err := s.index(run)
	if err != nil {
		return runJSON{}, err
	}
	us := func(t int64) int64 { return (t - run.StartNS) / 1000 }
	rj := runJSON{Name: run.Name, StartMS: run.StartNS / 1e6, EndUS: us(runEnd(run, x)), Complete: run.Complete, Live: s.opts.Live,
		Host: run.Host, GPUs: []gpuJSON{}, Lines: []lineJSON{}, Steps: [][2]int64{}, Epochs: [][3]int64{},
		Samples: x.Samples(), Stale: stale, Counts: run.Counts, SiteGPUs: []int{}}
	if ss, ok := s.src.(SiteSource); ok && stale == "" {
		gpus, err := ss.SiteGPUs(run)
		if err != nil && !errors.Is(err, storage.ErrLocked) {
			return runJSON{}, err
		}
		rj.SiteGPUs = append(rj.SiteGPUs, gpus...) // none while a recorder holds the file
	}
	if len(run.Tags) > 0 {
		rj.Tags = run.Tags
	}
	for _, g := range run.GPUs {
		rj.GPUs = append(rj.GPUs, gpuJSON{GPU: g.Index, Label: g.Label(), Name: g.Name, Total: g.TotalBytes})
	}
	for _, k := range x.Keys() {
		label := k.Field.Label()
		if k.PID != 0 && perGPUProcesses(x, k.GPU) > 1 {
			label += " (pid " + strconv.Itoa(k.PID) + ")"
		}
		rj.Lines = append(rj.Lines, lineJSON{Key: k.String(), Label: label, GPU: k.GPU, PID: k.PID, Field: k.Field.String()})
	}
	steps, every := x.Steps()
	for _, st := range steps {
		rj.Steps = append(rj.Steps, [2]int64{us(st.T), int64(st.Step)})
	}
	rj.StepEvery = every
	for _, e := range x.Epochs() {
		end := e.End
		if end == 0 {
			end = runEnd(run, x)
		}
		rj.Epochs = append(rj.Epochs, [3]int64{us(e.Start), us(end), int64(e.Epoch)})
	}
	return rj, nil
}

// runEnd is the later of the run's end and its newest sample (a live
// run's end moves).
func runEnd(run storage.Run, x *series.Index) int64 {
	end := run.EndNS
	if _, last, ok := x.Span(); ok {
		end = max(end, last)
	}
	return max(end, run.StartNS)
}

func perGPUProcesses(x *series.Index, gpu int) int {
	pids := map[int]bool{}
	for _, k := range x.Keys() {
		if k.GPU == gpu && k.PID != 0 {
			pids[k.PID] = true
		}
	}
	return len(pids)
}
