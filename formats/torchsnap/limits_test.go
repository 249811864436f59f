package torchsnap

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/storage/wire"
	"github.com/memrec/memrec/testsupport/pickletest"
)

// memoGet writes a LONG_BINGET of memo entry k.
func memoGet(b *bytes.Buffer, k uint32) {
	b.WriteByte('j')
	binary.Write(b, binary.LittleEndian, k)
}

// allocated returns the bytes f allocates.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A dict key that is a tuple of tuples sharing their halves stands for
// 2^40 leaves in a few hundred bytes: formatting it as text never ends.
// The key is kept by its type alone.
func TestTupleKeyBombIsNotFormatted(t *testing.T) {
	var b bytes.Buffer
	b.Write([]byte{0x80, 4, 'N', 'N', 0x86, 0x94}) // (None, None), memo 0
	for k := uint32(0); k < 40; k++ {
		memoGet(&b, k)
		memoGet(&b, k)
		b.Write([]byte{0x86, 0x94}) // (t_k, t_k), memo k+1
	}
	// {t_40: 1, "segments": []}
	pick := append([]byte{0x80, 4, '}', '('}, b.Bytes()[2:]...)
	pick = append(pick, 'K', 1)
	var tail bytes.Buffer
	pickletest.Str(&tail, "segments")
	tail.Write([]byte{']', 'u', '.'})
	pick = append(pick, tail.Bytes()...)
	var s *Snapshot
	var err error
	// The reader's buffer is 1 MiB; the key's formatting would be 2^40 words.
	if n := allocated(func() { s, err = Read(bytes.NewReader(pick)) }); n > 2<<20 {
		t.Errorf("reading a %d-byte pickle allocated %d bytes", len(pick), n)
	}
	if err != nil || len(s.Devices()) != 0 {
		t.Fatalf("snapshot %v, error %v", s, err)
	}
}

// A block referenced 99 000 times through the memo, with a stack of
// 1 000 frames shared the same way, is 99 001 blocks of one shared
// stack: converted once, not 99 M frames (4 GB).
func TestSharedStackIsConvertedOnce(t *testing.T) {
	var b bytes.Buffer
	b.Write([]byte{0x80, 4, '}', 0x94}) // memo 0: the snapshot
	pickletest.Str(&b, "segments")
	b.Write([]byte{']', '(', '}', '('}) // [ {device: 0, blocks: [...]} ]
	pickletest.Str(&b, "device")
	b.Write([]byte{'K', 0})
	pickletest.Str(&b, "blocks")
	b.Write([]byte{']', 0x94}) // memo 1: the blocks
	// the block, memo 2, with its 1 000 frames
	b.WriteByte('}')
	b.WriteByte(0x94)
	b.WriteByte('(')
	pickletest.Str(&b, "size")
	b.Write([]byte{'K', 64})
	pickletest.Str(&b, "state")
	pickletest.Str(&b, "active_allocated")
	pickletest.Str(&b, "frames")
	b.Write([]byte{']', '('})
	for i := range 1000 {
		f := pickletest.Dumps(pickletest.Frame("/w/train.py", i, "f"))
		b.Write(f[2 : len(f)-1]) // without PROTO and STOP
	}
	b.Write([]byte{'e', 'u', 'a'}) // frames done, block done, appended
	const refs = 99_000
	for range refs / 1000 {
		b.WriteByte('(')
		for range 1000 {
			memoGet(&b, 2)
		}
		b.WriteByte('e')
	}
	b.Write([]byte{'u', 'e', 's', '.'})
	var s *Snapshot
	var err error
	n := allocated(func() { s, err = Read(bytes.NewReader(b.Bytes())) })
	if err != nil {
		t.Fatal(err)
	}
	if got := len(s.Blocks[0]); got != refs+1 {
		t.Fatalf("%d blocks, want %d", got, refs+1)
	}
	if f := s.Blocks[0][refs].Frames; len(f) != 1000 || &f[0] != &s.Blocks[0][0].Frames[0] {
		t.Errorf("the last block's stack has %d frames, not the first block's", len(f))
	}
	// 99 001 blocks of about 80 bytes each, and the decoder's slots:
	// tens of MB; the stacks expanded would be 4 GB.
	if n > 64<<20 {
		t.Errorf("reading %d blocks allocated %d MiB", refs, n>>20)
	}
}

func TestLimitsRefuse(t *testing.T) {
	strs := func(n, size int) []byte {
		var b bytes.Buffer
		b.Write([]byte{0x80, 4, ']', '('})
		for range n {
			pickletest.Str(&b, strings.Repeat("x", size))
		}
		b.Write([]byte{'e', '.'})
		return b.Bytes()
	}
	blocks := func(n int) []byte {
		var bl []any
		for i := range n {
			bl = append(bl, pickletest.Block(int64(i), 512, "active_allocated"))
		}
		return pickletest.Dumps(pickletest.Snapshot(bl, nil))
	}
	entries := func(n int) []byte {
		var tr []any
		for i := range n {
			tr = append(tr, pickletest.Entry("alloc", int64(i), 512, 1_700_000_000_000_000+int64(i)))
		}
		return pickletest.Dumps(pickletest.Snapshot(nil, tr))
	}
	small := Limits{Elements: 10_000, String: 1 << 10, StringBytes: 4 << 10, Blocks: 100, Entries: 100, Frames: 10, Sites: 10}
	for _, c := range []struct {
		name string
		data []byte
		lim  Limits
		want string
	}{
		{"empty lists", append(append([]byte{0x80, 4}, bytes.Repeat([]byte{']'}, 20_000)...), '.'), small, "more than 10000 values"},
		{"marks", append(append([]byte{0x80, 4}, bytes.Repeat([]byte{'('}, 20_000)...), '.'), small, "more than 10000 values"},
		{"memo references", append(append([]byte{0x80, 4, ']', 0x94, '('}, bytes.Repeat([]byte{'h', 0}, 20_000)...), 'e', '.'), small, "more than 10000 values"},
		{"one long string", strs(1, 2<<10), small, "2048 bytes in one string, more than the 1024"},
		{"a 2 MiB string by default", strs(1, 2<<20), DefaultLimits, "2097152 bytes in one string, more than the 1048576"},
		{"many strings", strs(5, 1<<10), small, "more than 4096 bytes of strings"},
		{"blocks", blocks(101), small, "more than 100 blocks"},
		{"trace entries", entries(101), small, "more than 100 trace entries"},
	} {
		_, err := ReadLimits(bytes.NewReader(c.data), c.lim)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "docs/limits.md") {
			t.Errorf("%s: error %v, want ErrTooLarge saying %q", c.name, err, c.want)
		}
	}
	// Within them, the same shapes read.
	if _, err := ReadLimits(bytes.NewReader(blocks(100)), small); err != nil {
		t.Errorf("100 blocks: %v", err)
	}
}

// A string's length field is checked before anything is read or
// allocated: an 8-byte length of 2^62 is refused at once.
func TestHugeLengthIsRefusedBeforeReading(t *testing.T) {
	p := []byte{0x80, 4, 0x8d, 0, 0, 0, 0, 0, 0, 0, 0x40, '.'}
	_, err := Read(bytes.NewReader(p))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("error %v", err)
	}
}

// time_us of ±2^63 would wrap when turned into nanoseconds: refused by
// the 1970..2200 bound, naming the entry.
func TestTraceTimeOutsideBoundsIsRefused(t *testing.T) {
	for _, us := range []int64{1<<63 - 1, -1 << 63, -1, storage.LatestTime / 1000} {
		p := pickletest.Dumps(pickletest.Snapshot(nil, []any{
			pickletest.Entry("alloc", 1, 512, 1_700_000_000_000_000),
			pickletest.Entry("free_completed", 1, 512, us),
		}))
		_, err := Read(bytes.NewReader(p))
		want := fmt.Sprintf("device 0, trace entry 1: time_us %d is outside 1970..2200", us)
		if !errors.Is(err, ErrNotSnapshot) || !strings.Contains(err.Error(), want) {
			t.Errorf("time_us %d: error %v", us, err)
		}
	}
}

// Messages speak of Python's types and say "pickle:" once.
func TestDecoderMessages(t *testing.T) {
	for _, c := range []struct {
		data []byte
		want string
	}{
		{[]byte("\x80\x04)(K\x01e."), "not a PyTorch memory snapshot: pickle: APPENDS on a tuple, not a list"},
		{[]byte("\x80\x04](K\x01u."), "not a PyTorch memory snapshot: pickle: SETITEMS on a list, not a dict"},
		{[]byte("\x80\x040"), "not a PyTorch memory snapshot: pickle: stack underflow"},
		{[]byte("\x80\x04]"), "not a PyTorch memory snapshot: pickle: unexpected EOF"},
		{[]byte("\x80\x04]\x94."), "not a PyTorch memory snapshot: the pickle holds a list, not a dict"},
	} {
		_, err := Read(bytes.NewReader(c.data))
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: error %v, want %q", c.data, err, c.want)
		}
	}
}

// A snapshot of 60 000 distinct sites keeps the 4 096 with the most live
// bytes and adds the rest up as "other": nothing is lost from the totals.
func TestManySitesAreAddedUpAsOther(t *testing.T) {
	const n = 60_000
	var bl []any
	var total int64
	for i := range n {
		size := int64(512 * (i + 1))
		total += size
		bl = append(bl, pickletest.Block(int64(i)<<20, size, "active_allocated", pickletest.Frame(fmt.Sprintf("/w/model_%05d.py", i), 3, "f")))
	}
	s, err := Read(bytes.NewReader(pickletest.Dumps(pickletest.Snapshot(bl, nil))))
	if err != nil {
		t.Fatal(err)
	}
	rows := s.Snapshots(0, head, 1_700_000_000_000_000_000, 10)[0]
	if len(rows) != 1+DefaultLimits.Sites+1 {
		t.Fatalf("%d rows, want the untracked one, %d sites and other", len(rows), DefaultLimits.Sites)
	}
	other := rows[len(rows)-1]
	if other.File != wire.SiteOther || other.Sites != n-int64(DefaultLimits.Sites) || other.LiveBlocks != other.Sites {
		t.Fatalf("other row %+v", other)
	}
	var sum int64
	for _, r := range rows {
		sum += r.LiveBytes
	}
	if sum != total {
		t.Errorf("rows hold %d B, the blocks %d", sum, total)
	}
	// The largest site first: model_59999.py, with 60 000 × 512 B.
	if rows[1].Label() != "model_59999.py:3" || rows[1].LiveBytes != 512*n {
		t.Errorf("first site %s with %d B", rows[1].Label(), rows[1].LiveBytes)
	}
}

// A stack longer than Limits.Frames keeps its innermost frames.
func TestLongStackKeepsInnermostFrames(t *testing.T) {
	var fr []any
	for i := range 3000 {
		fr = append(fr, pickletest.Frame("/w/deep.py", i+1, "recurse"))
	}
	s, err := Read(bytes.NewReader(pickletest.Dumps(pickletest.Snapshot([]any{pickletest.Block(0, 512, "active_allocated", fr...)}, nil))))
	if err != nil {
		t.Fatal(err)
	}
	f := s.Blocks[0][0].Frames
	if len(f) != DefaultLimits.Frames || f[0].Line != 1 || f[len(f)-1].Line != DefaultLimits.Frames {
		t.Errorf("%d frames, lines %d..%d", len(f), f[0].Line, f[len(f)-1].Line)
	}
}
