package torchsnap

import (
	"bytes"
	"errors"
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/testsupport/fixtures"
	"github.com/memrec/memrec/testsupport/pickletest"
)

// The fixtures come from a ResNet-18 job (batch 64) on an H200 whose helper
// remember(t) keeps a clone of each step's logits: 64·1000·4 = 256 000 B a
// step, allocated at snapjob.py:10, called from train_step at line 13.
//   - state-leak: the state history after 30 leaking steps;
//   - trace-leak-tail: the full trace of 12 leaking steps, cut to the
//     entries of the last 4 (re-pickled by Python, which keeps the shared
//     frames lists as memo references).
const leakPerStep = 64 * 1000 * 4

func readFixture(t *testing.T, name string) *Snapshot {
	t.Helper()
	s, err := Read(bytes.NewReader(fixtures.Gunzip(t, "testdata/"+name)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func find(rows []storage.SiteSample, label string) (storage.SiteSample, bool) {
	for _, r := range rows {
		if r.Label() == label {
			return r, true
		}
	}
	return storage.SiteSample{}, false
}

var head = storage.SiteSample{GPU: 0, PID: 0, Rank: storage.None, Epoch: storage.None}

func TestStateSnapshotNamesTheHelper(t *testing.T) {
	s := readFixture(t, "state-leak.pickle.gz")
	if d := s.Devices(); len(d) != 1 || d[0] != 0 {
		t.Fatalf("devices %v", d)
	}
	snaps := s.Snapshots(0, head, 42, 10)
	if len(snaps) != 1 || snaps[0][0].Reason != wire.SitesSnapshot {
		t.Fatalf("%d snapshots, reason %q", len(snaps), snaps[0][0].Reason)
	}
	rows := snaps[0]
	if rows[0].File != wire.SiteUntracked || rows[0].LiveBytes == 0 {
		t.Errorf("untracked row %+v", rows[0])
	}
	leak, ok := find(rows, "snapjob.py:10")
	if !ok {
		t.Fatalf("no site snapjob.py:10 in %v", rows)
	}
	if leak.LiveBytes != 30*leakPerStep || leak.LiveBlocks != 30 || leak.Func != "remember" {
		t.Errorf("leak site %+v", leak)
	}
	if leak.Stack != "snapjob.py:13 train_step\nsnapjob.py:25 <module>" {
		t.Errorf("stack %q", leak.Stack)
	}
	if rows[1] != leak {
		t.Errorf("the largest tracked site is %s", rows[1].Label())
	}
}

func TestTraceGivesLiveBytesOverTime(t *testing.T) {
	s := readFixture(t, "trace-leak-tail.pickle.gz")
	snaps := s.Snapshots(0, head, 0, 8)
	if len(snaps) != 9 {
		t.Fatalf("%d snapshots, want 8 from the trace and the end", len(snaps))
	}
	last := snaps[len(snaps)-1]
	leak, ok := find(last, "snapjob.py:10")
	if !ok {
		t.Fatal("no leak site at the end")
	}
	// 12 leaking steps in all, 4 of them inside the trace.
	if leak.LiveBytes != 12*leakPerStep || leak.Allocs != 4 || leak.AllocBytes != 4*leakPerStep || leak.Frees != 0 {
		t.Errorf("leak site at the end %+v", leak)
	}
	if last[0].Reason != wire.SitesSnapshot || last[0].SinceNS == 0 || last[0].SinceNS >= last[0].T {
		t.Errorf("end snapshot head %+v", last[0])
	}
	prev := int64(-1)
	for i, snap := range snaps[:len(snaps)-1] {
		if snap[0].Reason != wire.SitesTrace || (i > 0 && snap[0].T <= snaps[i-1][0].T) {
			t.Fatalf("snapshot %d: reason %q at %d", i, snap[0].Reason, snap[0].T)
		}
		r, _ := find(snap, "snapjob.py:10")
		if r.LiveBytes < prev || r.LiveBytes%leakPerStep != 0 {
			t.Errorf("snapshot %d: leak site holds %d B after %d", i, r.LiveBytes, prev)
		}
		prev = r.LiveBytes
	}
	if first, _ := find(snaps[0], "snapjob.py:10"); first.LiveBytes != 8*leakPerStep {
		t.Errorf("before the tail's steps the leak site holds %d B, want 8 steps' worth", first.LiveBytes)
	}
	// Allocations and frees balance for every site but the leak's.
	for _, r := range last {
		if r.File != wire.SiteUntracked && r.Label() != "snapjob.py:10" && r.AllocBytes-r.FreedBytes != r.LiveBytes {
			t.Errorf("%s: allocated %d, freed %d, live %d", r.Label(), r.AllocBytes, r.FreedBytes, r.LiveBytes)
		}
	}
}

func TestFrameKindAndSite(t *testing.T) {
	for _, c := range []struct {
		file string
		want int
	}{
		{"/home/u/train.py", KindUser},
		{"/usr/lib/python3.10/threading.py", KindInternal},
		{"/venv/lib64/python3.12/site-packages/torch/nn/functional.py", KindInternal},
		{"/venv/lib/python3.12/dist-packages/lightning/pytorch/loops/fit.py", KindPackage},
		{"<frozen runpy>", KindInternal},
		{"/src/torch/csrc/autograd/engine.cpp", KindInternal},
		{"C:\\Users\\u\\train.py", KindUser},
	} {
		if got := FrameKind(c.file); got != c.want {
			t.Errorf("FrameKind(%q) = %d, want %d", c.file, got, c.want)
		}
	}
	torch := Frame{File: "/v/lib/python3.12/site-packages/torch/nn/modules/module.py", Line: 1790, Func: "_call_impl"}
	vision := Frame{File: "/v/lib/python3.12/site-packages/torchvision/models/resnet.py", Line: 280, Func: "forward"}
	user := Frame{File: "/w/train.py", Line: 52, Func: "step"}
	for _, c := range []struct {
		frames []Frame
		want   int
	}{
		{[]Frame{torch, vision, user}, 2},
		{[]Frame{torch, vision}, 1},
		{[]Frame{torch}, 0},
		{nil, -1},
	} {
		if got := SiteOf(c.frames); got != c.want {
			t.Errorf("SiteOf(%v) = %d, want %d", c.frames, got, c.want)
		}
	}
}

func TestBadInput(t *testing.T) {
	for _, c := range []struct {
		name string
		data []byte
	}{
		{"text", []byte("{\"type\":\"run\"}\n")},
		{"a list", []byte("\x80\x04]\x94.")},
		{"a dict without segments", []byte("\x80\x04}\x94.")},
		{"truncated", []byte("\x80\x04}\x94(\x8c\x08segments")},
		{"a class", []byte("\x80\x02cos\nsystem\n.")},
	} {
		if _, err := Read(bytes.NewReader(c.data)); !errors.Is(err, ErrNotSnapshot) {
			t.Errorf("%s: error %v, want ErrNotSnapshot", c.name, err)
		}
	}
	// A snapshot whose entries are partly wrong keeps the rest and counts them.
	// {"segments": [{"device": 0, "blocks": [{"size": 100, "state": "active_allocated",
	//   "frames": [{"filename": "/w/t.py", "line": 3, "name": "f"}, {"line": 1}]}, {"size": "x"}]}, 7]}
	// (pickle.dumps(..., protocol=4): memo references for the repeated keys)
	p := []byte("\x80\x04\x95\xa3\x00\x00\x00\x00\x00\x00\x00}\x94\x8c\x08segments\x94]\x94(}\x94(\x8c\x06device\x94K\x00" +
		"\x8c\x06blocks\x94]\x94(}\x94(\x8c\x04size\x94Kd\x8c\x05state\x94\x8c\x10active_allocated\x94\x8c\x06frames\x94]\x94(}\x94(" +
		"\x8c\x08filename\x94\x8c\x07/w/t.py\x94\x8c\x04line\x94K\x03\x8c\x04name\x94\x8c\x01f\x94u}\x94h\x10K\x01seu}\x94h\x08\x8c\x01x\x94seuK\x07es.")
	s, err := Read(bytes.NewReader(p))
	if err != nil {
		t.Fatal(err)
	}
	rows := s.Snapshots(0, head, 5, 1)[0]
	if s.Bad != 3 || rows[0].Bad != 3 || len(rows) != 2 || rows[1].Label() != "t.py:3" || rows[1].LiveBytes != 100 {
		t.Fatalf("bad %d, rows %+v", s.Bad, rows)
	}
}

// FuzzRead feeds the reader arbitrary bytes after a pickle header: it must
// return a snapshot or an error, never panic or hang, and allocate no more
// than its limits allow whatever the bytes (memo references, marks, empty
// lists, long strings): under fuzzLimits, 32 MiB.
func FuzzRead(f *testing.F) {
	f.Add([]byte("\x80\x04}\x94\x8c\x08segments\x94]\x94s."))
	f.Add([]byte("\x80\x04]\x94(K\x01K\x02e."))
	f.Add([]byte("\x80\x02}q\x00X\x08\x00\x00\x00segmentsq\x01]q\x02h\x02as."))
	f.Add([]byte("\x80\x04]\x94(h\x00h\x00h\x00h\x00h\x00e."))
	f.Add(pickletest.Dumps(pickletest.Snapshot(
		[]any{pickletest.Block(4096, 512, "active_allocated", pickletest.Frame("/w/train.py", 3, "step"))},
		[]any{pickletest.Entry("alloc", 4096, 512, 1_700_000_000_000_000, pickletest.Frame("/w/train.py", 3, "step"))})))
	fuzzLimits := Limits{Elements: 20_000, String: 64 << 10, StringBytes: 1 << 20, Blocks: 1000, Entries: 1000, Frames: 100, Sites: 100}
	f.Fuzz(func(t *testing.T, data []byte) {
		n := allocated(func() {
			s, err := ReadLimits(bytes.NewReader(data), fuzzLimits)
			if err == nil {
				for _, d := range s.Devices() {
					s.Snapshots(d, head, 0, 3)
				}
			}
		})
		if n > 32<<20+8*uint64(len(data)) {
			t.Fatalf("%d bytes of input allocated %d MiB", len(data), n>>20)
		}
	})
}
