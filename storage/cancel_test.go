package storage

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// cancelAfter is a context whose Err reports Canceled from its nth call
// on: it stops a loop part way, where a context canceled from the start
// would stop it before it began.
type cancelAfter struct {
	context.Context
	n int
}

func (c *cancelAfter) Err() error {
	if c.n--; c.n < 0 {
		return context.Canceled
	}
	return nil
}

// TestCompactContextStopsAndLeavesTheFile: a compaction whose context
// ends part way through the copy or its check returns the context's
// error, leaves the file byte for byte, and removes its own temporary
// file.
func TestCompactContextStopsAndLeavesTheFile(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	recordLive(t, live, "live", 30)
	if _, err := Compact(live, CompactOptions{}); err != nil { // summaries added, so later runs commit nothing
		t.Fatal(err)
	}
	before, err := os.ReadFile(live)
	if err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(live, 0o644, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	d, err := digest(context.Background(), db)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	keys := int(d.keys)
	// Every point of the walk at which the context is looked at: in the
	// summaries, the copy, the check of the copy.
	for n := 0; n <= 3*keys/cancelEvery+2; n++ {
		_, err := CompactContext(&cancelAfter{context.Background(), n}, live, CompactOptions{})
		if err == nil {
			break // past every look: compacted
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("canceled after %d looks: %v", n, err)
		}
		if after, _ := os.ReadFile(live); !bytes.Equal(before, after) {
			t.Fatalf("canceled after %d looks: the file changed", n)
		}
		if _, err := os.Stat(live + compactSuffix); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("canceled after %d looks: the temporary file is left: %v", n, err)
		}
	}
}
