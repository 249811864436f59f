package series

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// prefault has the kernel back the room of bs (its capacity) with memory
// now, in one call, where the writes that fill it would fault each page in
// on its first write: a day's pyramids are a hundred MB and more, and a
// fault a page costs more system time than one call for them all, most
// of all in a virtual machine (bench/perf/long_targets.sh, the day's
// report). Nothing is written; a kernel without MADV_POPULATE_WRITE
// (before Linux 5.14) refuses, and the pages fault in as before.
func prefault(bs []Bucket) {
	if cap(bs) == 0 {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(bs)))
	end := start + uintptr(cap(bs))*unsafe.Sizeof(Bucket{})
	page := uintptr(unix.Getpagesize())
	start &^= page - 1 // madvise takes whole pages: the heap's own around bs are mapped too
	_, _, _ = unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_POPULATE_WRITE)
}
