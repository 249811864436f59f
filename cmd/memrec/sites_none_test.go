package main

import (
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestSitesWithoutSnapshotsReadsNoSamples: sites of a run without site
// snapshots says so from the run's series table, before reading any
// sample: with every chunk of the run damaged, it still answers that the
// run has none (for each way of asking). Before, it analysed the whole
// run first (seconds on a long one) and here failed on the damage.
func TestSitesWithoutSnapshotsReadsNoSamples(t *testing.T) {
	db := filepath.Join(t.TempDir(), "m.db")
	if _, errs, code := run(t, db, "", "import", "--name", "plain", realRun); code != 0 {
		t.Fatal(errs)
	}
	bdb, err := bolt.Open(db, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	damaged := 0
	err = bdb.Update(func(tx *bolt.Tx) error {
		data := tx.Bucket([]byte("data"))
		return data.ForEachBucket(func(run []byte) error {
			chunks := data.Bucket(run).Bucket([]byte("chunks"))
			var keys [][]byte
			chunks.ForEach(func(k, _ []byte) error { keys = append(keys, append([]byte(nil), k...)); return nil })
			for _, k := range keys {
				v := append([]byte(nil), chunks.Get(k)...)
				for i := range v {
					v[i] ^= 0x5a
				}
				if err := chunks.Put(k, v); err != nil {
					return err
				}
				damaged++
			}
			return nil
		})
	})
	bdb.Close()
	if err != nil || damaged == 0 {
		t.Fatalf("damaged %d chunks: %v", damaged, err)
	}
	for _, args := range [][]string{{"sites", "plain"}, {"sites", "plain", "--epoch", "1"}, {"sites", "plain", "--diff", "e0", "e1"}, {"sites", "plain", "--gpu", "0"}} {
		_, errs, code := run(t, db, "", args...)
		if code != 1 || !strings.Contains(errs, `run "plain" has no allocation-site snapshots`) {
			t.Errorf("%v: exit %d, %q", args, code, errs)
		}
	}
}
