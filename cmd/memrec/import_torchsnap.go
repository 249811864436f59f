package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/torchsnap"
)

// tracePoints is how many snapshots an imported trace is cut into: enough
// for the live bytes of each site over time, a few KiB in the store.
const tracePoints = 60

// isTorchSnapshot reports whether the file (gzip or not) starts like a
// pickled PyTorch snapshot.
func isTorchSnapshot(file string) bool {
	if file == "-" {
		return false
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

// runImportTorchSnapshots makes a run of PyTorch snapshot files, or adds
// their site snapshots to --run.
func runImportTorchSnapshots(o *importOptions, files []string) error {
	var snaps [][]storage.SiteSample
	gpus := map[int]bool{}
	var sites int
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return err
		}
		fi, err := fh.Stat()
		if err != nil {
			fh.Close()
			return err
		}
		r, err := maybeGunzip(fh, f)
		if err != nil {
			fh.Close()
			return err
		}
		s, err := torchsnap.Read(r)
		fh.Close()
		if err != nil {
			return fmt.Errorf("import: %s: %w (nothing was imported)", f, err)
		}
		for _, d := range s.Devices() {
			head := storage.SiteSample{GPU: d + o.gpu, Rank: storage.None, Epoch: storage.None, Name: filepath.Base(f)}
			for k, rows := range s.Snapshots(d, head, fi.ModTime().UnixNano(), tracePoints) {
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
		if name == "" {
			base := filepath.Base(files[0])
			for _, ext := range []string{".gz", ".pickle", ".pkl"} {
				base = strings.TrimSuffix(base, ext)
			}
			name = base
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
		runs, err := db.Import([]storage.Source{{Name: files[0], R: &buf}}, storage.ImportOptions{Replace: o.replace})
		if err != nil {
			return fmt.Errorf("import: %w (nothing was imported)", err)
		}
		run = runs[0]
	}
	fmt.Fprintf(o.io.Out, "imported %s (id %d) from PyTorch snapshot: %d site snapshots, %d site rows, %d GPUs\n",
		run.Name, run.ID, len(snaps), sites, len(gpus))
	return nil
}
