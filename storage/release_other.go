//go:build !linux

package storage

// ReleasePages does nothing here: the pages of a file read stay counted in
// the process's memory until it ends (see the Linux version).
func (db *DB) ReleasePages() {}

// readAround does nothing here (see the Linux version).
func (db *DB) readAround() {}
