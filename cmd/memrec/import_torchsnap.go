package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/torchsnap"
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

// runImportTorchSnapshots makes a run of PyTorch snapshot files, or adds
// their site snapshots to --run.
func runImportTorchSnapshots(o *importOptions, files []string) error {
	var snaps [][]storage.SiteSample
	gpus := map[int]bool{}
	var sites int
	for _, f := range files {
		s, name, endNS, err := readTorchSnapshot(o, f)
		if err != nil {
			return err
		}
		for _, d := range s.Devices() {
			head := storage.SiteSample{GPU: d + o.gpu, Rank: storage.None, Epoch: storage.None, Name: name}
			for k, rows := range s.Snapshots(d, head, endNS, tracePoints) {
				if k == 0 && d != s.Devices()[0] {
					rows[0].Bad = 0 // counted once, with the first device
				}
				snaps = append(snaps, rows)
				sites += len(rows) - 1
			}
			gpus[d+o.gpu] = true
		}
	}
	if len(snaps) == 0 {
		return fmt.Errorf("import: %s: the snapshot has no blocks and no trace (nothing was imported)", strings.Join(files, ", "))
	}
	db, err := o.openWrite()
	if err != nil {
		return err
	}
	defer db.Close()
	var run storage.Run
	if o.run != "" {
		if run, err = db.AddSites(o.run, snaps); err != nil {
			return fmt.Errorf("import: %w (nothing was imported; --gpu maps the snapshot's CUDA device 0 to the run's GPU)", err)
		}
	} else {
		name := o.name
		switch {
		case name != "":
		case files[0] == "-":
			name = "snapshot-" + time.Now().Format("20060102-150405")
		default:
			name = filepath.Base(files[0])
			for _, ext := range []string{".gz", ".pickle", ".pkl"} {
				name = strings.TrimSuffix(name, ext)
			}
		}
		var buf bytes.Buffer
		line, _ := json.Marshal(map[string]any{"type": "run", "name": name, "recorder": map[string]string{"source": "torch-snapshot"}})
		buf.Write(append(line, '\n'))
		for g := range gpus {
			fmt.Fprintf(&buf, "{\"type\":\"gpu\",\"gpu\":%d}\n", g)
		}
		for _, rows := range snaps {
			buf.Write(wire.AppendSites(nil, rows))
		}
		runs, err := db.Import([]storage.Source{{Name: inputName(files[0]), R: &buf}}, storage.ImportOptions{Replace: o.replace})
		if err != nil {
			return fmt.Errorf("import: %w (nothing was imported)", err)
		}
		run = runs[0]
	}
	fmt.Fprintf(o.io.Out, "imported %s (id %d) from PyTorch snapshot: %d site snapshots, %d site rows, %d GPUs\n",
		run.Name, run.ID, len(snaps), sites, len(gpus))
	return nil
}
