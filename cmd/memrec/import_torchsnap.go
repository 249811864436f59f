package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memrec/memrec/analysis/units"
	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/formats/torchsnap"
	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
)

// tracePoints is how many snapshots an imported trace is cut into: enough
// for the live bytes of each site over time, a few KiB in the store.
const tracePoints = 60

// isTorchSnapshot reports whether the file, or standard input for "-"
// (gzip or not), starts like a pickled PyTorch snapshot.
func isTorchSnapshot(o *importOptions, file string) bool {
	if file == "-" {
		r, err := o.stdinReader()
		if err != nil {
			return false
		}
		head, _ := r.Peek(2)
		return torchsnap.Is(head)
	}
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	r, err := maybeGunzip(f, file)
	if err != nil {
		return false
	}
	head := make([]byte, 2)
	n, _ := io.ReadFull(r, head)
	return torchsnap.Is(head[:n])
}

// readTorchSnapshot reads one snapshot from a file, or from standard
// input for "-"; endNS is when it was taken, as far as its file tells
// (its modification time; the time now for standard input), for a
// snapshot without a trace.
func readTorchSnapshot(o *importOptions, file string) (s *torchsnap.Snapshot, name string, endNS int64, err error) {
	var r io.Reader
	if file == "-" {
		name, endNS = stdinName, time.Now().UnixNano()
		if r, err = o.stdinReader(); err != nil {
			return nil, name, 0, err
		}
	} else {
		fh, err := os.Open(file)
		if err != nil {
			return nil, file, 0, err
		}
		defer fh.Close()
		fi, err := fh.Stat()
		if err != nil {
			return nil, file, 0, err
		}
		name, endNS = filepath.Base(file), fi.ModTime().UnixNano()
		if r, err = maybeGunzip(fh, file); err != nil {
			return nil, file, 0, err
		}
	}
	s, err = torchsnap.Read(r)
	if err != nil {
		return nil, name, 0, fmt.Errorf("import: %s: %w (nothing was imported)", inputName(file), err)
	}
	return s, name, endNS, nil
}

// snapshotSlack is how far outside its run's span a snapshot added with
// --run may lie: one dumped as the job ends is written after memrec's last
// sample by the time pickling takes (seconds), and one taken before the
// recorder started is not of the run. Five minutes covers the first with
// room; a snapshot hours away is another job's, and stretching the run
// to it would change every figure of the run.
const snapshotSlack = 5 * time.Minute

// fileSnapshots is what one snapshot file gives: its site snapshots, its
// GPUs and its span.
type fileSnapshots struct {
	file       string
	snaps      [][]storage.SiteSample
	gpus       []int
	sites      int
	start, end int64 // the first and last snapshot's times
	fromMtime  bool  // a snapshot's time is its file's modification time
}

// snapshotsOf reads one snapshot file into site snapshots.
func snapshotsOf(o *importOptions, file string) (*fileSnapshots, error) {
	s, name, endNS, err := readTorchSnapshot(o, file)
	if err != nil {
		return nil, err
	}
	fs := &fileSnapshots{file: file, start: math.MaxInt64, end: math.MinInt64}
	for i, d := range s.Devices() {
		head := storage.SiteSample{GPU: d + o.gpu, Rank: storage.None, Epoch: storage.None, Name: name}
		if len(s.Traces[d]) == 0 {
			fs.fromMtime = true
		}
		for k, rows := range s.Snapshots(d, head, endNS, tracePoints) {
			if k == 0 && i > 0 {
				rows[0].Bad = 0 // counted once, with the first device
			}
			fs.snaps = append(fs.snaps, rows)
			fs.sites += len(rows) - 1
			fs.start, fs.end = min(fs.start, rows[0].T), max(fs.end, rows[0].T)
		}
		fs.gpus = append(fs.gpus, d+o.gpu)
	}
	if len(fs.snaps) == 0 {
		return nil, fmt.Errorf("import: %s: the snapshot has no blocks and no trace (nothing was imported)", inputName(file))
	}
	return fs, nil
}

// runImportTorchSnapshots makes a run of each PyTorch snapshot file, or
// adds their site snapshots to --run; all or nothing.
func runImportTorchSnapshots(o *importOptions, files []string) error {
	if o.run == "" && o.name != "" && len(files) > 1 {
		return fmt.Errorf("import: --name names one run, and each of the %d snapshot files makes a run of its own; import them one by one, or add them to one run with --run (nothing was imported)", len(files))
	}
	var all []*fileSnapshots
	for _, f := range files {
		fs, err := snapshotsOf(o, f)
		if err != nil {
			return err
		}
		all = append(all, fs)
	}
	db, err := o.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()
	if o.run != "" {
		return addSnapshotsToRun(o, db, all)
	}
	var srcs []jsonl.Source
	for _, fs := range all {
		name := o.name
		switch {
		case name != "":
		case fs.file == "-":
			name = "snapshot-" + time.Now().Format("20060102-150405")
		default:
			name = filepath.Base(fs.file)
			for _, ext := range []string{".gz", ".pickle", ".pkl"} {
				name = strings.TrimSuffix(name, ext)
			}
		}
		// The run spans its snapshots: its start is the earliest, whichever
		// device it is of, so that none lies before the run.
		var buf bytes.Buffer
		line, _ := json.Marshal(map[string]any{"type": "run", "name": name, "start_ns": fs.start, "end_ns": fs.end, "complete": true,
			"recorder": map[string]string{"source": "torch-snapshot"}})
		buf.Write(append(line, '\n'))
		for _, g := range fs.gpus {
			fmt.Fprintf(&buf, "{\"type\":\"gpu\",\"gpu\":%d}\n", g)
		}
		for _, rows := range fs.snaps {
			buf.Write(wire.AppendSites(nil, rows))
		}
		srcs = append(srcs, jsonl.Source{Name: inputName(fs.file), R: &buf, Converted: true})
	}
	runs, err := jsonl.Import(db, srcs, jsonl.ImportOptions{Replace: o.replace, Context: o.ctx})
	if err != nil {
		return fmt.Errorf("import: %w (nothing was imported)", err)
	}
	for i, run := range runs {
		fs := all[i]
		fmt.Fprintf(o.io.Out, "imported %s (id %d) from PyTorch snapshot: %d site snapshots, %d site rows, %d GPUs\n",
			run.Name, run.ID, len(fs.snaps), fs.sites, len(fs.gpus))
	}
	return nil
}

// addSnapshotsToRun adds the files' site snapshots to --run, refusing a
// snapshot outside the run's span by more than snapshotSlack.
func addSnapshotsToRun(o *importOptions, db *storage.DB, all []*fileSnapshots) error {
	run, err := db.Run(o.run)
	if err != nil {
		return fmt.Errorf("import --run: %w (nothing was imported)", err)
	}
	slack := int64(snapshotSlack)
	end := max(run.EndNS, run.StartNS)
	if !run.Complete {
		end = max(end, time.Now().UnixNano()) // still recording, or its recorder died
	}
	var snaps [][]storage.SiteSample
	gpus, sites := map[int]bool{}, 0
	for _, fs := range all {
		for _, t := range []int64{fs.start, fs.end} {
			if t >= run.StartNS-slack && t <= end+slack {
				continue
			}
			when := "before the run's start"
			off := time.Duration(run.StartNS - t)
			if t > end {
				when, off = "after the run's end", time.Duration(t-end)
			}
			hint := ""
			if fs.fromMtime {
				hint = "; a snapshot without a trace is taken at its file's modification time (touch -d sets it)"
			}
			return fmt.Errorf("import --run %s: %s was taken %s %s, more than %s away: not a snapshot of this run (nothing was imported%s)",
				run.Name, inputName(fs.file), units.FormatDuration(off.Seconds()), when, units.FormatDuration(snapshotSlack.Seconds()), hint)
		}
		snaps = append(snaps, fs.snaps...)
		sites += fs.sites
		for _, g := range fs.gpus {
			gpus[g] = true
		}
	}
	if run, err = db.AddSites(o.run, snaps); err != nil {
		return fmt.Errorf("import: %w (nothing was imported; --gpu maps the snapshot's CUDA device 0 to the run's GPU)", err)
	}
	fmt.Fprintf(o.io.Out, "imported into %s (id %d) from PyTorch snapshots: %d site snapshots, %d site rows, %d GPUs\n",
		run.Name, run.ID, len(snaps), sites, len(gpus))
	return nil
}
