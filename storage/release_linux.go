package storage

import (
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// ReleasePages tells the kernel that this process no longer needs the
// pages of the file it has read. The file is mapped into memory, and every
// page read stays counted in the process's resident memory until it ends:
// a week of 8 GPUs is hundreds of MB of file on top of what the analysis
// holds.
// Released, the pages stay in the page cache; a later read maps them
// again, which costs a minor fault a page and no read from disk. Reads in
// flight are not disturbed: the mapping is read-only and file-backed, so a
// page released under a reader comes back unchanged when it touches it.
//
// Only a file opened ReadOnly is released (a writer's file is mapped
// again when it grows, and its mapping changes under the call); on other
// files, and where the kernel refuses, it does nothing. Safe for
// concurrent use.
func (db *DB) ReleasePages() { db.advise(unix.MADV_DONTNEED) }

// readAround lets the kernel read ahead in a file opened ReadOnly. bbolt
// advises that its mapping is read at random (MADV_RANDOM), which turns
// readahead off: where the file is not in the page cache, each page is
// then read from disk on its own, one 4 KiB read a fault. memrec's readers
// decode chunks of a series that lie mostly in the file's order, and the
// kernel's default reads the pages around a fault with it. Over the
// mapping's pages that the file had at Open; a writer's mapping changes
// as it grows and keeps bbolt's advice.
func (db *DB) readAround() { db.advise(unix.MADV_NORMAL) }

// advise gives the kernel advice on the mapping of a file opened
// ReadOnly, over the pages it had at Open; on other files, and where the
// kernel refuses, it does nothing.
func (db *DB) advise(advice uintptr) {
	if !db.readOnly {
		return
	}
	var size int64
	if db.bolt.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil }) != nil || size <= 0 {
		return
	}
	// A read-only file is mapped once, at Open, over at least the size
	// any transaction sees: [Data, Data+size) lies inside the mapping.
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, db.bolt.Info().Data, uintptr(size), advice)
}
