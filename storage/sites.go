package storage

import (
	"errors"
	"fmt"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// ErrSitesExist is returned by AddSites for a run that already has site
// snapshots of the same GPU and process.
var ErrSitesExist = errors.New("the run already has site snapshots of this GPU and process")

// AddSites stores site snapshots (each the rows of one snapshot) into an
// existing run, in one transaction: all of them, or on an error none. Their
// GPUs must be the run's. It blocks until written and returns the run with
// its new counts.
func (db *DB) AddSites(ref string, snaps [][]SiteSample) (Run, error) {
	var out Run
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		r, err := lookupRun(tx, ref)
		if err != nil {
			return err
		}
		series, err := seriesTable(tx, r.ID)
		if err != nil {
			return err
		}
		// A writer that knows the run's series: the new ones get new ids and
		// groups of their own, so no stored chunk is touched.
		w := newRunWriter(r)
		w.series = slices.Clone(series)
		for _, s := range series {
			w.index[seriesKey{kind: s.Kind, gpu: s.GPU, pid: s.PID}] = s.ID
			w.nextG = max(w.nextG, s.Group+1)
		}
		for _, rows := range snaps {
			if len(rows) == 0 {
				continue
			}
			k := siteSchema.key(rows[0])
			if id, ok := w.index[k]; ok && int(id) < len(series) {
				return fmt.Errorf("run %q, GPU %d, pid %d: %w", r.Name, k.gpu, k.pid, ErrSitesExist)
			}
			if err := appendSites(w, rows); err != nil {
				return fmt.Errorf("run %q: %w", r.Name, err)
			}
		}
		committed, err := w.flush(tx)
		if err != nil {
			return err
		}
		committed()
		out = w.run
		return nil
	})
	return out, err
}
