package storage

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/memrec/memrec/storage/wire"
)

// recordLive writes a run the way a recording does: 8 GPUs at 100 Hz for
// secs seconds, their processes and a step mark a second, committed once a
// second of samples. The memory moves like a training job's: a level that
// changes by 2 MiB segments now and then.
func recordLive(t *testing.T, path, name string, secs int) {
	t.Helper()
	db, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	gpus := make([]GPU, 8)
	for i := range gpus {
		gpus[i] = GPU{Index: i, Name: "H200", TotalBytes: 140 << 30}
	}
	a, err := db.NewAppender(Run{Name: name, GPUs: gpus, StartNS: 1e18}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	used := make([]int64, 8)
	for i := range used {
		used[i] = 20 << 30
	}
	for tick := 0; tick < secs*100; tick++ {
		ts := int64(1e18) + int64(tick)*10e6 + rng.Int64N(50e3)
		for g := range used {
			if rng.IntN(50) == 0 {
				used[g] += int64(rng.IntN(5)-2) * (2 << 20)
			}
			must(t, a.AppendDevice(DeviceSample{T: ts, GPU: g, Used: used[g], Reserved: 600 << 20}))
			must(t, a.AppendProc(ProcSample{T: ts, GPU: g, PID: 1000 + g, Used: used[g] - 500<<20}))
		}
		if tick%100 == 99 {
			must(t, a.AppendMark(Mark{T: ts, Kind: wire.MarkStep, Epoch: 0, Step: tick / 100, Rank: None, GPU: None, PID: None, Code: None}))
			must(t, a.Commit())
		}
	}
	must(t, a.Close())
}

func exportAll(t *testing.T, path string) []byte {
	t.Helper()
	db, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Runs()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, r := range runs {
		must(t, exportStored(&out, db, r))
	}
	return out.Bytes()
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCompactLiveFile: a file written live, committed every second, shrinks
// to within 10 % of the same run imported into a fresh file, and reads back
// every line as before.
func TestCompactLiveFile(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	recordLive(t, live, "live", 120)
	before := exportAll(t, live)
	res, err := Compact(live, CompactOptions{MinFree: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Rewritten || res.After >= res.Before || res.After != fileSize(t, live) {
		t.Fatalf("compact: %+v, file %d bytes", res, fileSize(t, live))
	}
	if _, err := os.Stat(live + compactSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the new file's temporary name is left: %v", err)
	}
	if after := exportAll(t, live); !bytes.Equal(before, after) {
		t.Fatal("export after compaction differs")
	}
	imported := filepath.Join(dir, "imported.db")
	db, err := Open(imported, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Import([]Source{{Name: "export", R: bytes.NewReader(before)}}, ImportOptions{}); err != nil {
		t.Fatal(err)
	}
	must(t, db.Close())
	imp := fileSize(t, imported)
	t.Logf("live %d B, compacted %d B, imported %d B (%.2fx)", res.Before, res.After, imp, float64(res.After)/float64(imp))
	if float64(res.After) > 1.1*float64(imp) {
		t.Fatalf("compacted %d B, imported %d B: more than 10 %% apart", res.After, imp)
	}
	db, err = Open(live, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	must(t, db.Check())
}

// TestCompactLeavesOriginalOnFailure: a leftover of a compaction killed
// before its rename is removed and the next one succeeds; a file locked by
// a reader is left as it is, with ErrLocked; MinFree skips a file with
// little free space.
func TestCompactLeavesOriginalOnFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.db")
	recordLive(t, path, "a", 20)
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	reader, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compact(path, CompactOptions{LockTimeout: 50 * time.Millisecond}); !errors.Is(err, ErrLocked) {
		t.Fatalf("compact of a file being read: %v, want ErrLocked", err)
	}
	reader.Close()
	if now, _ := os.ReadFile(path); !bytes.Equal(now, orig) {
		t.Fatal("a refused compaction changed the file")
	}
	must(t, os.WriteFile(path+compactSuffix, []byte("half a file"), 0o644))
	res, err := Compact(path, CompactOptions{})
	if err != nil || !res.Rewritten {
		t.Fatalf("compact with a leftover: %+v %v", res, err)
	}
	if _, err := os.Stat(path + compactSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover still there: %v", err)
	}
	link := filepath.Join(dir, "link.db")
	must(t, os.Symlink(path, link))
	if _, err := Compact(link, CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("compact through a link replaced the link: %v %v", fi, err)
	}
	res, err = Compact(path, CompactOptions{MinFree: 0.5})
	if err != nil || res.Rewritten || res.After != res.Before {
		t.Fatalf("compact of a compacted file with MinFree 0.5: %+v %v", res, err)
	}
}

// TestOpenAfterReplace: a writer that waited for the lock while the file was
// replaced (a compaction's rename) writes to the new file, not the old one
// that no other process reads.
func TestOpenAfterReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "m.db")
	recordLive(t, path, "a", 2)
	holder, err := Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	opened := make(chan *DB)
	go func() {
		db, err := Open(path, Options{LockTimeout: 10 * time.Second})
		if err != nil {
			t.Error(err)
		}
		opened <- db
	}()
	time.Sleep(50 * time.Millisecond) // let it block on the lock (if it has not yet, it opens the new file anyway)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(path+".new", data, 0o644))
	must(t, os.Rename(path+".new", path))
	must(t, holder.bolt.Close())
	db := <-opened
	if db == nil {
		t.FailNow()
	}
	a, err := db.NewAppender(Run{Name: "b", GPUs: []GPU{{Index: 0}}, StartNS: 1e18}, AppendOptions{CommitInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	must(t, a.AppendDevice(DeviceSample{T: 1e18, Used: 1}))
	must(t, a.Close())
	must(t, db.Close())
	check, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	runs, err := check.Runs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range runs {
		names = append(names, r.Name)
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Fatalf("runs in the file: %v, want a and b", names)
	}
}
