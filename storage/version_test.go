package storage

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage/internal/chunk"
	"github.com/memrec/memrec/testsupport/fixtures"
	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/testsupport/linetest"
)

// gunzip returns the contents of testdata/name.
func gunzip(t *testing.T, name string) []byte {
	t.Helper()
	return fixtures.Gunzip(t, filepath.Join("testdata", name))
}

// chunkVersions counts the stored chunks of every run by codec version.
func chunkVersions(t *testing.T, db *DB) map[byte]int {
	t.Helper()
	n := map[byte]int{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketData)
		return data.ForEach(func(k, _ []byte) error {
			return data.Bucket(k).Bucket(keyChunks).ForEach(func(_, v []byte) error {
				n[v[0]]++
				return nil
			})
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// runChunkBytes is the length of run id's stored chunks.
func runChunkBytes(t *testing.T, db *DB, id uint64) int {
	t.Helper()
	n := 0
	err := db.bolt.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketData).Bucket(idKey(id)).Bucket(keyChunks).ForEach(func(_, v []byte) error {
			n += len(v)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReadOlderChunks reads databases written by earlier chunk codecs, each
// the import of the JSON Lines beside it: testdata/chunk-v1.db (before
// column forms: version 1; 2 GPUs, 20 s of the churn mix) and
// testdata/chunk-v3.db (before the common-value form: version 3 with
// version 2 summaries; 2 GPUs, 20 s of the realistic mix). The export
// must give back every line and the file must check. A run added to it is
// written in the current version, and both read back.
func TestReadOlderChunks(t *testing.T) {
	for _, c := range []struct {
		name, run string
		version   byte
	}{
		{"chunk-v1", "v1-churn", 1},
		{"chunk-v3", "v3-realistic", 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.name+".db")
			if err := os.WriteFile(path, gunzip(t, c.name+".db.gz"), 0o644); err != nil {
				t.Fatal(err)
			}
			in := gunzip(t, c.name+".jsonl.gz")
			db, err := Open(path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if v := chunkVersions(t, db); len(v) != 1 || v[c.version] == 0 {
				t.Fatalf("testdata chunks by version: %v, want only version %d", v, c.version)
			}
			if err := db.Check(); err != nil {
				t.Fatal(err)
			}
			r, err := db.Run(c.run)
			if err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			if err := exportStored(&out, db, r); err != nil {
				t.Fatal(err)
			}
			if want, got := linetest.Normalize(t, in), linetest.Normalize(t, out.Bytes()); !slices.Equal(want, got) {
				t.Fatalf("version %d export differs: %d lines in, %d out", c.version, len(want), len(got))
			}

			if _, err := loadLines(db, "again", bytes.NewReader(in), "now"); err != nil {
				t.Fatal(err)
			}
			if v := chunkVersions(t, db); c.version >= chunk.Version || v[c.version] == 0 || v[chunk.Version] == 0 {
				t.Fatalf("chunks by version: %v, want %d and %d", v, c.version, chunk.Version)
			}
			if err := db.Check(); err != nil {
				t.Fatal(err)
			}
			r2, err := db.Run("now")
			if err != nil {
				t.Fatal(err)
			}
			out.Reset()
			if err := exportStored(&out, db, r2); err != nil {
				t.Fatal(err)
			}
			if want, got := linetest.Normalize(t, in), linetest.Normalize(t, out.Bytes()); !slices.Equal(want, got) {
				t.Fatalf("current version export differs: %d lines in, %d out", len(want), len(got))
			}
			// Each codec is smaller than the one before on these runs.
			if old, now := runChunkBytes(t, db, r.ID), runChunkBytes(t, db, r2.ID); now >= old {
				t.Errorf("the run's chunks take %d bytes now, %d in version %d", now, old, c.version)
			}
		})
	}
}

// TestCloseTrims checks that a closed file ends at its last page in use,
// and opens and reads as before.
func TestCloseTrims(t *testing.T) {
	var buf bytes.Buffer
	c, err := tracegen.Mix("realistic")
	if err != nil {
		t.Fatal(err)
	}
	c.GPUs, c.Duration = 2, 20*time.Second
	if _, err := tracegen.Write(&buf, c); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trim.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	runs, err := loadLines(db, "gen", bytes.NewReader(buf.Bytes()), "")
	if err != nil {
		t.Fatal(err)
	}
	used, err := db.Size()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() <= used {
		t.Fatalf("before Close: file %d bytes, %d in use: nothing to trim, the test proves nothing", fi.Size(), used)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err = os.Stat(path); err != nil {
		t.Fatal(err)
	}
	if fi.Size() != used {
		t.Fatalf("after Close: %d bytes, want %d", fi.Size(), used)
	}
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Check(); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := exportStored(&out, db, runs[0]); err != nil {
		t.Fatal(err)
	}
	if want, got := linetest.Normalize(t, buf.Bytes()), linetest.Normalize(t, out.Bytes()); !slices.Equal(want, got) {
		t.Fatalf("after reopening: %d lines in, %d out", len(want), len(got))
	}
}

// TestReadSitesWithoutSampledEvery reads site snapshots written before the
// sites series had its "sampled_every" column (12 int columns):
// testdata/sites-12cols.db holds the import of testdata/sites-12cols.jsonl.
// Every row reads back with SampledEvery 0, the export gives back every
// line, and a snapshot added to the database is written with the column.
func TestReadSitesWithoutSampledEvery(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	if err := os.WriteFile(path, gunzip(t, "sites-12cols.db.gz"), 0o644); err != nil {
		t.Fatal(err)
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Run("old-sites")
	if err != nil {
		t.Fatal(err)
	}
	var rows []SiteSample
	it := db.SiteSamples(r, 0, 7, MinTime, MaxTime)
	for it.Next() {
		rows = append(rows, it.At())
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
	if len(rows) != 6 || rows[5].LiveBytes != 3*256000 || rows[5].Line != 52 {
		t.Fatalf("read %d rows, last %+v", len(rows), rows[len(rows)-1])
	}
	for _, s := range rows {
		if s.SampledEvery != 0 {
			t.Fatalf("row %+v: SampledEvery %g, want 0", s, s.SampledEvery)
		}
	}
	var out, fresh bytes.Buffer
	if err := exportStored(&out, db, r); err != nil {
		t.Fatal(err)
	}
	now := openTestDB(t)
	runs, err := loadString(now, "sites-12cols.jsonl", string(gunzip(t, "sites-12cols.jsonl.gz")))
	if err != nil {
		t.Fatal(err)
	}
	if err := exportStored(&fresh, now, runs[0]); err != nil {
		t.Fatal(err)
	}
	if got, want := linetest.Normalize(t, out.Bytes()), linetest.Normalize(t, fresh.Bytes()); !slices.Equal(got, want) {
		t.Fatalf("export differs from that of the same input imported now:\n%s\n%s", out.String(), fresh.String())
	}
	sampled := rows[:2]
	for i := range sampled {
		sampled[i].T, sampled[i].PID, sampled[i].SampledEvery = 1_005_000_000_000, 8, 2.5
	}
	if _, err := db.AddSites("old-sites", [][]SiteSample{sampled}); err != nil {
		t.Fatal(err)
	}
	it = db.SiteSamples(r, 0, 8, MinTime, MaxTime)
	for it.Next() {
		if it.At().SampledEvery != 2.5 {
			t.Fatalf("added row %+v, want SampledEvery 2.5", it.At())
		}
	}
	if it.Err() != nil {
		t.Fatal(it.Err())
	}
}
