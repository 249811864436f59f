//go:build !linux

package series

// prefault does nothing here: the room of bs faults in page by page as it
// is written (see the Linux version).
func prefault(bs []Bucket) {}
