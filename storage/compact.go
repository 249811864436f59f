package storage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc64"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// This file rewrites a database into a file without free pages.
//
// Why a live file is larger than the same run imported: a recording
// commits every second, and every commit rewrites each group's open chunk,
// the series table and the run's metadata. bbolt copies the pages it
// changes, so the old ones become free; free pages are reused, but a chunk
// needs several contiguous pages and the freelist fragments, so the file
// keeps growing past its data. Compaction copies every key and value, in
// order, into a new file with full pages (bbolt's Compact), checks the
// copy, and only then renames it over the original: a process killed at
// any point leaves either the old file, whole, or the new one, and at most
// a stale path+".compact" that the next compaction removes.

// CompactOptions configure Compact.
type CompactOptions struct {
	// LockTimeout is how long Compact waits for the file's exclusive lock
	// (zero: one second); past it, ErrLocked.
	LockTimeout time.Duration
	// MinFree is the share of the file that free pages must reach for
	// Compact to rewrite it (0: always). A recorder passes 0.1 at the end
	// of a recording, so that a large file is not copied for a few free
	// pages.
	MinFree float64
}

// CompactResult says what Compact did. Before and After are file sizes in
// bytes (After equals Before when it did not rewrite the file), Free the
// bytes of free pages it found.
type CompactResult struct {
	Before, After, Free int64
	Rewritten           bool
	// Summarized is the number of chunks that had no summary (a file
	// written before summaries, a recording that did not end) and now have.
	Summarized int
}

// compactSuffix names the new file while it is written, beside the old.
const compactSuffix = ".compact"

// Compact rewrites the database at path without its free pages. It holds
// the file's exclusive lock throughout (readers and writers wait or get
// ErrLocked), writes path+".compact", syncs it, checks that it holds the
// same keys and values as the original, and renames it over path. On any
// error the original is left as it was. A path that is a symbolic link
// stays one: the file it points to is replaced. Not to be called on a path
// this process holds open.
func Compact(path string, opts CompactOptions) (CompactResult, error) {
	return CompactContext(context.Background(), path, opts)
}

// CompactContext is Compact that stops when ctx is done: it returns ctx's
// error, the original as it was and the new file removed.
func CompactContext(ctx context.Context, path string, opts CompactOptions) (CompactResult, error) {
	// The new file replaces what a link points to, not the link.
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	src, err := Open(path, Options{LockTimeout: opts.LockTimeout, MustExist: true})
	if err != nil {
		return CompactResult{}, err
	}
	// src is closed through bolt, not src.Close: Close trims by path, and
	// after the rename the path is the new file.
	defer src.bolt.Close()
	summarized, err := addSummaries(ctx, src.bolt)
	if err != nil {
		return CompactResult{}, fmt.Errorf("compact %s: summaries: %w", path, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return CompactResult{}, err
	}
	res := CompactResult{Before: fi.Size(), After: fi.Size(), Summarized: summarized}
	used, err := src.Size()
	if err != nil {
		return res, err
	}
	st := src.bolt.Stats() // FreePageN is counted at open; FreeAlloc only at a commit
	res.Free = int64(st.FreePageN+st.PendingPageN)*int64(src.bolt.Info().PageSize) + (res.Before - used)
	if res.Before == 0 || float64(res.Free) < opts.MinFree*float64(res.Before) {
		return res, nil
	}
	tmp := path + compactSuffix
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, fmt.Errorf("compact %s: a leftover %s: %w", path, tmp, err)
	}
	after, err := compactInto(ctx, src.bolt, tmp, fi.Mode().Perm())
	if err != nil {
		os.Remove(tmp)
		return res, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := ctx.Err(); err != nil {
		os.Remove(tmp)
		return res, fmt.Errorf("compact %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return res, fmt.Errorf("compact %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil { // the rename itself, durable
		d.Sync()
		d.Close()
	}
	res.After, res.Rewritten = after, true
	return res, nil
}

// compactInto copies src into a new file at tmp, syncs it, checks it
// against src and returns its size.
func compactInto(ctx context.Context, src *bolt.DB, tmp string, mode os.FileMode) (int64, error) {
	dst, err := bolt.Open(tmp, mode, &bolt.Options{Timeout: time.Second, NoSync: true})
	if err != nil {
		return 0, err
	}
	dst.AllocSize = 1 << 20
	// Transactions of 64 MiB bound the copy's memory at any file size.
	err = copyDB(ctx, dst, src, 64<<20)
	var used int64
	if err == nil {
		err = dst.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil })
	}
	if err == nil {
		err = dst.Sync()
	}
	err = errors.Join(err, dst.Close())
	if err != nil {
		return 0, err
	}
	if err := os.Truncate(tmp, used); err != nil {
		return 0, err
	}
	f, err := os.OpenFile(tmp, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	err = errors.Join(f.Sync(), f.Close())
	if err != nil {
		return 0, err
	}
	check, err := bolt.Open(tmp, mode, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer check.Close()
	want, err := digest(ctx, src)
	if err != nil {
		return 0, err
	}
	got, err := digest(ctx, check)
	if err != nil {
		return 0, fmt.Errorf("reading the copy back: %w", err)
	}
	if got != want {
		return 0, fmt.Errorf("the copy differs from the original (digest %016x, want %016x)", got.sum, want.sum)
	}
	return used, nil
}

// fileDigest sums every bucket path, key, value and sequence of a file.
type fileDigest struct {
	sum  uint64
	keys int64
}

var crcTable = crc64.MakeTable(crc64.ECMA)

// digest walks every bucket of db, in key order.
func digest(ctx context.Context, db *bolt.DB) (fileDigest, error) {
	var d fileDigest
	h := crc64.New(crcTable)
	var walk func(b *bolt.Bucket, path []byte) error
	walk = func(b *bolt.Bucket, path []byte) error {
		fmt.Fprintf(h, "%x/%d\n", path, b.Sequence())
		return b.ForEach(func(k, v []byte) error {
			if d.keys%cancelEvery == 0 {
				if err := ctx.Err(); err != nil {
					return err
				}
			}
			d.keys++
			if v == nil {
				return walk(b.Bucket(k), append(bytes.Clone(path), append([]byte{'/'}, k...)...))
			}
			fmt.Fprintf(h, "%x=%d:", k, len(v))
			h.Write(v)
			return nil
		})
	}
	err := db.View(func(tx *bolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
			d.keys++
			return walk(b, name)
		})
	})
	d.sum = h.Sum64()
	return d, err
}

// cancelEvery is how many keys a walk copies or reads between two looks
// at its context.
const cancelEvery = 1024

// copyDB copies every bucket, key, value and sequence of src into dst, in
// write transactions of at most txMaxSize bytes of keys and values, with
// full pages (bbolt's Compact, which cannot be stopped: a large file takes
// seconds).
func copyDB(ctx context.Context, dst, src *bolt.DB, txMaxSize int64) (err error) {
	tx, err := dst.Begin(true)
	if err != nil {
		return err
	}
	defer func() { tx.Rollback() }()
	var size, n int64
	// put writes k (a bucket when v is nil) under the bucket path.
	put := func(path [][]byte, k, v []byte, seq uint64) error {
		if n%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		n++
		sz := int64(len(k) + len(v))
		if size+sz > txMaxSize {
			if err := tx.Commit(); err != nil {
				return err
			}
			var err error
			if tx, err = dst.Begin(true); err != nil {
				return err
			}
			size = 0
		}
		size += sz
		if len(path) == 0 {
			b, err := tx.CreateBucket(k)
			if err != nil {
				return err
			}
			return b.SetSequence(seq)
		}
		b := tx.Bucket(path[0])
		for _, p := range path[1:] {
			b = b.Bucket(p)
		}
		b.FillPercent = 1.0
		if v != nil {
			return b.Put(k, v)
		}
		nb, err := b.CreateBucket(k)
		if err != nil {
			return err
		}
		return nb.SetSequence(seq)
	}
	var walk func(b *bolt.Bucket, path [][]byte) error
	walk = func(b *bolt.Bucket, path [][]byte) error {
		return b.ForEach(func(k, v []byte) error {
			if v != nil {
				return put(path, k, v, 0)
			}
			sub := b.Bucket(k)
			if err := put(path, k, nil, sub.Sequence()); err != nil {
				return err
			}
			return walk(sub, append(slices.Clip(path), k))
		})
	}
	err = src.View(func(stx *bolt.Tx) error {
		return stx.ForEach(func(name []byte, b *bolt.Bucket) error {
			if err := put(nil, name, nil, b.Sequence()); err != nil {
				return err
			}
			return walk(b, [][]byte{name})
		})
	})
	if err != nil {
		return err
	}
	return tx.Commit()
}
