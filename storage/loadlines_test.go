package storage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/memrec/memrec/storage/wire"
)

// loadLines writes JSON Lines (package wire's format) into db through a
// Loader, for storage's own tests: they cannot use formats/jsonl's import,
// which imports storage. It reads the plain way, a line at a time, with
// errors named "src:line: ..." as the import names them; as, when set,
// renames the input's one run. The import itself (its parallel reader,
// truncated input, renames of several runs) is tested in formats/jsonl.
func loadLines(db *DB, src string, in io.Reader, as string, opts ...LoadOption) ([]Run, error) {
	return db.Load(func(l *Loader) error {
		var p wire.Parser
		sc := bufio.NewScanner(in)
		sc.Buffer(nil, 64<<20)
		for n := 1; sc.Scan(); n++ {
			if len(bytes.TrimSpace(sc.Bytes())) == 0 {
				continue
			}
			r, err := p.Parse(sc.Bytes())
			if err == nil {
				err = loadRecord(l, r, as)
			}
			if err != nil {
				return fmt.Errorf("%s:%d: %w", src, n, err)
			}
		}
		if err := sc.Err(); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		if len(l.Finished()) == 0 && l.Run().Name == "" {
			return errors.New("no run in the input")
		}
		return nil
	}, opts...)
}

// loadString is loadLines of a string, its run keeping its name.
func loadString(db *DB, src, s string, opts ...LoadOption) ([]Run, error) {
	return loadLines(db, src, strings.NewReader(s), "", opts...)
}

// loadRecord writes one parsed line: a run line starts a run (the fields
// of docs/format.md the tests use), a gpu line declares a GPU, the rest
// are rows.
func loadRecord(l *Loader, r wire.Record, as string) error {
	switch r.Type {
	case wire.TypeRun:
		var line struct {
			Name       string         `json:"name"`
			Host       string         `json:"host"`
			Job        string         `json:"job"`
			Hosts      []HostInfo     `json:"hosts"`
			StartNS    *int64         `json:"start_ns"`
			EndNS      int64          `json:"end_ns"`
			IntervalNS int64          `json:"interval_ns"`
			Tags       map[string]any `json:"tags"`
			Complete   *bool          `json:"complete"`
			Recorder   Recorder       `json:"recorder"`
		}
		if err := json.Unmarshal(r.Raw, &line); err != nil {
			return fmt.Errorf("run: %v", err)
		}
		if as != "" {
			line.Name = as
		}
		run := Run{Name: line.Name, Host: line.Host, Job: line.Job, Hosts: line.Hosts, StartNS: MinTime, EndNS: line.EndNS,
			IntervalNS: line.IntervalNS, Complete: line.Complete == nil || *line.Complete, Recorder: line.Recorder}
		if len(line.Tags) > 0 {
			run.Tags = map[string]string{}
			for k, v := range line.Tags {
				run.Tags[k] = fmt.Sprint(v)
			}
		}
		if line.StartNS != nil {
			run.StartNS = *line.StartNS
		}
		_, err := l.Start(run, false)
		return err
	case wire.TypeGPU:
		var g GPU
		if err := json.Unmarshal(r.Raw, &g); err != nil {
			return fmt.Errorf("gpu: %v", err)
		}
		return l.AddGPU(g)
	}
	if l.Run().Name == "" {
		return errors.New("data before the first \"run\" line")
	}
	var err error
	switch r.Type {
	case wire.TypeSample:
		err = l.AppendDevice(r.Device)
	case wire.TypeProc:
		err = l.AppendProc(r.Proc)
	case wire.TypeTorch:
		err = l.AppendTorch(r.Torch)
		if err == nil && r.Budget != nil {
			err = l.AppendBudget(*r.Budget)
		}
	case wire.TypeMark:
		err = l.AppendMark(r.Mark)
	case wire.TypeSites:
		err = l.AppendSites(r.Sites)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", r.Type, err)
	}
	return nil
}
