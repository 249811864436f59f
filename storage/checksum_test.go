package storage

import (
	"bytes"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/memrec/memrec/storage/internal/chunk"
	"github.com/memrec/memrec/testsupport/fixtures"

	"github.com/memrec/memrec/testsupport/linetest"
)

// rewriteChunks replaces every stored chunk v of every run by f(v).
func rewriteChunks(t *testing.T, db *DB, f func(k, v []byte) []byte) {
	t.Helper()
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		data := tx.Bucket(bucketData)
		return data.ForEach(func(k, _ []byte) error {
			chunks := data.Bucket(k).Bucket(keyChunks)
			type kv struct{ k, v []byte }
			var all []kv
			chunks.ForEach(func(k, v []byte) error {
				all = append(all, kv{slices.Clone(k), f(k, slices.Clone(v))})
				return nil
			})
			for _, e := range all {
				if err := chunks.Put(e.k, e.v); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

func importFixture(t *testing.T, db *DB) (Run, []byte) {
	t.Helper()
	in := fixtures.Read(t, fixtures.CleanRun)
	runs, err := loadLines(db, "clean", bytes.NewReader(in), "")
	if err != nil {
		t.Fatal(err)
	}
	return runs[0], in
}

// TestChunkChecksumFindsDamage: one flipped bit anywhere in a chunk, value
// bytes included, makes Check and every reader of that chunk fail with
// ErrCorrupt instead of returning a wrong value.
func TestChunkChecksumFindsDamage(t *testing.T) {
	db := openTestDBNoCheck(t)
	r, _ := importFixture(t, db)
	if v := chunkVersions(t, db); len(v) != 1 || v[chunk.Version] == 0 {
		t.Fatalf("chunks by version %v, want all %d", v, chunk.Version)
	}
	damaged := 0
	rewriteChunks(t, db, func(_, v []byte) []byte {
		if damaged == 0 && len(v) > 64 {
			v[len(v)-chunk.CRCSize-1] ^= 1 // the last byte of the last series' last column: a value
			damaged++
		}
		return v
	})
	if damaged == 0 {
		t.Fatal("no chunk to damage")
	}
	err := db.Check()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "checksum") {
		t.Fatalf("Check: %v, want a checksum ErrCorrupt", err)
	}
	var readErr error
	for _, g := range r.GPUs {
		readErr = errors.Join(readErr, drain(db.DeviceSamples(r, g.Index, MinTime, MaxTime)).Err())
	}
	series, _ := db.Series(r)
	for _, s := range series {
		if s.Kind == "torch" {
			readErr = errors.Join(readErr, drain(db.TorchSamples(r, s.GPU, s.PID, MinTime, MaxTime)).Err())
		}
	}
	readErr = errors.Join(readErr, drain(db.Marks(r, MinTime, MaxTime)).Err())
	if !errors.Is(readErr, ErrCorrupt) {
		t.Fatalf("reading the damaged run: %v, want ErrCorrupt", readErr)
	}
}

func drain[T any](it *Iter[T]) *Iter[T] {
	for it.Next() {
	}
	return it
}

// openTestDBNoCheck is openTestDB for a test that damages the file.
func openTestDBNoCheck(t *testing.T) *DB {
	t.Helper()
	db, err := Open(t.TempDir()+"/damaged.db", Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestReadVersion2Chunks: chunks as memrec wrote them before checksums
// (version 2: version 3's bytes without the trailing CRC; version 4 may
// hold forms version 2 did not have) read back the same.
func TestReadVersion2Chunks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "v2.db")
	if err := os.WriteFile(path, gunzip(t, "chunk-v3.db.gz"), 0o644); err != nil {
		t.Fatal(err)
	}
	in := gunzip(t, "chunk-v3.jsonl.gz")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	r, err := db.Run("v3-realistic")
	if err != nil {
		t.Fatal(err)
	}
	rewriteChunks(t, db, func(_, v []byte) []byte {
		v = v[:len(v)-chunk.CRCSize]
		v[0] = 2
		return v
	})
	if v := chunkVersions(t, db); len(v) != 1 || v[2] == 0 {
		t.Fatalf("chunks by version %v, want all 2", v)
	}
	var out bytes.Buffer
	if err := exportStored(&out, db, r); err != nil {
		t.Fatal(err)
	}
	if want, got := linetest.Normalize(t, in), linetest.Normalize(t, out.Bytes()); !slices.Equal(want, got) {
		t.Fatalf("version 2 export differs: %d lines in, %d out", len(want), len(got))
	}
}

// TestCheckMissingBucketsNoPanic: a memrec file whose run lost its chunks
// bucket (damage, or another program's writes) is reported, not a panic.
func TestCheckMissingBucketsNoPanic(t *testing.T) {
	db := openTestDBNoCheck(t)
	r, _ := importFixture(t, db)
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketData).Bucket(idKey(r.ID)).DeleteBucket(keyChunks)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Check(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check: %v, want ErrCorrupt", err)
	}
	if err := drain(db.DeviceSamples(r, r.GPUs[0].Index, MinTime, MaxTime)).Err(); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("reading: %v, want ErrCorrupt", err)
	}
}

// TestCheckReportsEveryDamagedRun: damage in one run does not hide damage
// in a later one, nor count the clean run between them as damaged.
func TestCheckReportsEveryDamagedRun(t *testing.T) {
	db := openTestDBNoCheck(t)
	in := fixtures.Read(t, fixtures.CleanRun)
	var ids []uint64
	for _, name := range []string{"a", "b", "c"} {
		runs, err := loadLines(db, name, bytes.NewReader(in), name)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, runs[0].ID)
	}
	damage := map[uint64]int{ids[0]: 1, ids[2]: 2} // run: chunks to damage
	err := db.bolt.Update(func(tx *bolt.Tx) error {
		for id, n := range damage {
			chunks := tx.Bucket(bucketData).Bucket(idKey(id)).Bucket(keyChunks)
			var keys [][]byte
			chunks.ForEach(func(k, _ []byte) error { keys = append(keys, slices.Clone(k)); return nil })
			if len(keys) < n {
				t.Fatalf("run %d has %d chunks, want %d", id, len(keys), n)
			}
			for _, k := range keys[:n] {
				v := slices.Clone(chunks.Get(k))
				v[len(v)-chunk.CRCSize-1] ^= 1
				if err := chunks.Put(k, v); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Check()
	var ce *CheckError
	if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Check: %v, want a CheckError matching ErrCorrupt", err)
	}
	got := map[uint64]int{}
	for _, p := range ce.Problems {
		got[p.ID] = p.BadChunks
		if !errors.Is(p.Err, ErrCorrupt) {
			t.Errorf("run %d: %v, want ErrCorrupt", p.ID, p.Err)
		}
	}
	if ce.Runs != 3 || !maps.Equal(got, damage) {
		t.Errorf("%d runs checked, damaged chunks by run %v; want 3 and %v", ce.Runs, got, damage)
	}
	if want := "2 of 3 runs have problems"; !strings.HasPrefix(err.Error(), want) {
		t.Errorf("Check: %q, want it to start %q", err, want)
	}
}
