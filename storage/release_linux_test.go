package storage

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// residentFileKB is this process's resident memory that maps files
// (RssFile of /proc/self/status), in KiB.
func residentFileKB(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "RssFile:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Skip("no RssFile in /proc/self/status")
	return 0
}

// TestReleasePagesKeepsTheData: after a read-only file's pages are
// released, the memory they took is no longer resident, the same samples
// read again, and a reader in flight goes on unharmed; on a file opened
// for writing it does nothing.
func TestReleasePagesKeepsTheData(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 30 minutes of two GPUs")
	}
	w, r := importMinutes(t, 2, 30*time.Minute)
	w.ReleasePages() // a writer's file: nothing happens
	path := w.path
	must(t, w.Close())
	db, err := Open(path, Options{ReadOnly: true})
	must(t, err)
	defer db.Close()
	read := func() []DeviceSample {
		var out []DeviceSample
		for gpu := range 2 {
			it := db.DeviceSamples(r, gpu, MinTime, MaxTime)
			for it.Next() {
				out = append(out, it.At())
			}
			must(t, it.Err())
		}
		return out
	}
	fi, err := os.Stat(path)
	must(t, err)
	first := read()
	before := residentFileKB(t)
	// A reader in the middle of a series while the pages go.
	it := db.DeviceSamples(r, 1, MinTime, MaxTime)
	var inFlight []DeviceSample
	for len(inFlight) < 1000 && it.Next() {
		inFlight = append(inFlight, it.At())
	}
	db.ReleasePages()
	after := residentFileKB(t)
	t.Logf("resident file memory %d → %d KiB (file %d KiB)", before, after, fi.Size()/1024)
	for it.Next() {
		inFlight = append(inFlight, it.At())
	}
	must(t, it.Err())
	if drop := before - after; drop < fi.Size()/1024/2 {
		t.Errorf("resident file memory %d → %d KiB: want it down by half the file's %d KiB at least", before, after, fi.Size()/1024)
	}
	if again := read(); !slices.Equal(first, again) {
		t.Fatalf("read after release: %d samples, differ from the %d before", len(again), len(first))
	}
	var gpu1 []DeviceSample
	for _, s := range first {
		if s.GPU == 1 {
			gpu1 = append(gpu1, s)
		}
	}
	if !slices.Equal(inFlight, gpu1) {
		t.Fatalf("the reader in flight read %d samples, want %d the same", len(inFlight), len(gpu1))
	}
}

// mappingAdvisedRandom reports whether this process's mapping of path
// carries the random-read advice ("rr" in VmFlags of /proc/self/smaps).
func mappingAdvisedRandom(t *testing.T, path string) bool {
	t.Helper()
	raw, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	in := false
	for line := range strings.Lines(string(raw)) {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 6 && strings.Contains(fields[0], "-"):
			in = fields[len(fields)-1] == path
		case in && len(fields) > 0 && fields[0] == "VmFlags:":
			return slices.Contains(fields[1:], "rr")
		}
	}
	t.Fatalf("no mapping of %s in /proc/self/smaps", path)
	return false
}

// TestReadersReadAround: a file opened ReadOnly is mapped without bbolt's
// random-read advice, so that the kernel reads ahead where the file is not
// in the page cache; a writer's mapping keeps it.
func TestReadersReadAround(t *testing.T) {
	w, _ := importMinutes(t, 1, time.Minute)
	path := w.path
	if !mappingAdvisedRandom(t, path) {
		t.Error("the writer's mapping lost bbolt's advice")
	}
	must(t, w.Close())
	r, err := Open(path, Options{ReadOnly: true})
	must(t, err)
	defer r.Close()
	if mappingAdvisedRandom(t, path) {
		t.Error("a reader's mapping is advised random: the kernel reads each page on its own")
	}
}
