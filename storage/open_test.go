package storage

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
)

// foreignBolt writes a bbolt file of another program: one bucket of its own.
func foreignBolt(t *testing.T, path string) {
	t.Helper()
	b, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = b.Update(func(tx *bolt.Tx) error {
		w, err := tx.CreateBucket([]byte("widgets"))
		if err != nil {
			return err
		}
		return w.Put([]byte("k"), []byte("v"))
	})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// TestOpenRefusesFilesNotMemrecs: another program's bbolt file, a file of
// other bytes and an empty file are refused by readers and writers alike,
// and stay byte for byte as they were.
func TestOpenRefusesFilesNotMemrecs(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name  string
		make  func(path string)
		write bool // whether a creating writer is refused too
	}{
		{"foreign bbolt", func(p string) { foreignBolt(t, p) }, true},
		{"text", func(p string) { os.WriteFile(p, bytes.Repeat([]byte("not a database\n"), 1000), 0o644) }, true},
		// Shorter than bbolt's two meta pages: bbolt says "file size too small".
		{"5000 random bytes", func(p string) {
			b := make([]byte, 5000)
			for i := range b {
				b[i] = byte(i*7919 + i>>3)
			}
			os.WriteFile(p, b, 0o644)
		}, true},
		{"empty", func(p string) { os.WriteFile(p, nil, 0o644) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".db")
			tc.make(path)
			before, _ := os.ReadFile(path)
			opts := []Options{{ReadOnly: true}, {MustExist: true}}
			if tc.write {
				opts = append(opts, Options{})
			}
			for _, o := range opts {
				db, err := Open(path, o)
				if !errors.Is(err, ErrNotMemrec) {
					if db != nil {
						db.Close()
					}
					t.Errorf("%+v: %v, want ErrNotMemrec", o, err)
				}
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Errorf("the file changed: %d bytes before, %d after", len(before), len(after))
			}
		})
	}
}

// TestOpenMustExist: a writer that only changes what is there leaves no
// file behind for a mistyped path; a creating writer makes a database.
func TestOpenMustExist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "typo.db")
	if _, err := Open(path, Options{MustExist: true}); !errors.Is(err, ErrNoDB) {
		t.Fatalf("%v, want ErrNoDB", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a file was created: %v", err)
	}
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadString(db, "a.jsonl", `{"type":"run","name":"a","start_ns":1700000000000000000}`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path, Options{MustExist: true})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
}

// TestCreatedEmptyIsRemoved: a file Open created and nothing was stored in
// (a refused merge, a failed import) is gone after Close; a file that was
// there before, runs or none, stays byte for byte.
func TestCreatedEmptyIsRemoved(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "new.db")
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadString(db, "bad.jsonl", "{not json\n"); err == nil {
		t.Fatal("a bad import succeeded")
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the new file is left after nothing was stored: %v", err)
	}

	// A database that exists, even one whose last run was removed, is the
	// user's: it stays.
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := loadString(db, "a.jsonl", `{"type":"run","name":"a","start_ns":1700000000000000000}`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Delete("a", DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	db.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("an existing database was removed: %v", err)
	}
	db, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Close()
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("an existing database changed: %d bytes before, %d after", len(before), len(after))
	}
}

// TestCreateWaitsOutARemovedFile: a writer that waited for the lock of a
// file another writer created and then removed (it stored nothing) opens
// the path afresh, instead of writing into the removed file.
func TestCreateWaitsOutARemovedFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "race.db")
	first, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan *DB)
	go func() {
		db, err := Open(path, Options{LockTimeout: 5 * time.Second})
		if err != nil {
			t.Error(err)
		}
		opened <- db
	}()
	time.Sleep(50 * time.Millisecond) // let the second writer block on the lock
	first.Close()
	second := <-opened
	if second == nil {
		return
	}
	if _, err := loadString(second, "a.jsonl", `{"type":"run","name":"a","start_ns":1700000000000000000}`); err != nil {
		t.Fatal(err)
	}
	second.Close()
	db, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the second writer's run is not at the path: %v", err)
	}
	defer db.Close()
	if _, err := db.Run("a"); err != nil {
		t.Fatalf("the second writer's run is not at the path: %v", err)
	}
}
