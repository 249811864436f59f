package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
)

// longRunJSONL is a 30-minute run of 8 GPUs at 100 Hz (tracegen), on host
// host of job j1, its GPUs' UUIDs prefixed by host, with a site snapshot
// of every GPU each minute: long enough that analyze, sites, compare and
// merge take seconds.
func longRunJSONL(name, host string) ([]byte, error) {
	c := tracegen.Default()
	c.Name, c.Duration = name, 30*time.Minute
	var buf bytes.Buffer
	if _, err := tracegen.Write(&buf, c); err != nil {
		return nil, err
	}
	b := bytes.Replace(buf.Bytes(), []byte(`"host":"gen"`), []byte(`"host":"`+host+`","job":"j1"`), 1)
	b = bytes.ReplaceAll(b, []byte(`"uuid":"`), []byte(`"uuid":"`+host+`-`))
	start := c.Start.UnixNano()
	for m := 1; m < 30; m++ {
		for gpu := 0; gpu < c.GPUs; gpu++ {
			b = fmt.Appendf(b, `{"type":"sites","t_ns":%d,"gpu":%d,"pid":%d,"rank":%d,"reason":"timer","sites":[`+
				`{"file":"/w/model.py","line":10,"func":"f","live_bytes":%d,"live_blocks":4}]}`+"\n",
				start+int64(m)*int64(time.Minute), gpu, 100+gpu, gpu, int64(m)<<20)
		}
	}
	return b, nil
}

// importLong imports longRunJSONL runs into a new database at path.
func importLong(path string, runs ...[2]string) error {
	d, err := storage.Open(path, storage.Options{})
	if err != nil {
		return err
	}
	defer d.Close()
	for _, r := range runs {
		b, err := longRunJSONL(r[0], r[1])
		if err != nil {
			return err
		}
		if _, err := d.Import([]storage.Source{{Name: r[0] + ".jsonl", R: bytes.NewReader(b)}}, storage.ImportOptions{}); err != nil {
			return err
		}
	}
	return nil
}

// longDBs are the databases of long runs the signal tests read: m.db with
// runs a and b of hostA, nodeB.db with run b of hostB. Importing them is
// most of those tests' time, so it is done once per test binary; each test
// reads its own copy, since each checks that its file is left unchanged.
var longDBs struct {
	once sync.Once
	dir  string
	err  error
}

// copyLongDBs copies longDBs into dir and returns the paths of the copies.
func copyLongDBs(t *testing.T, dir string) (db, nodeB string) {
	t.Helper()
	longDBs.once.Do(func() {
		if longDBs.dir, longDBs.err = os.MkdirTemp("", "memrec-long-"); longDBs.err != nil {
			return
		}
		if longDBs.err = importLong(filepath.Join(longDBs.dir, "m.db"), [2]string{"a", "hostA"}, [2]string{"b", "hostA"}); longDBs.err != nil {
			return
		}
		longDBs.err = importLong(filepath.Join(longDBs.dir, "nodeB.db"), [2]string{"b", "hostB"})
	})
	if longDBs.err != nil {
		t.Fatal(longDBs.err)
	}
	for _, name := range []string{"m.db", "nodeB.db"} {
		b, err := os.ReadFile(filepath.Join(longDBs.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "m.db"), filepath.Join(dir, "nodeB.db")
}

// TestLongCommandsStopAtTheFirstSignal: analyze, sites, compare, merge
// and compact of long runs stop at the first SIGINT (exit 130) or SIGTERM
// (143), write no output and leave the database as it was.
// Before, each went on to the end and exited 0 (merge and compact with
// their output written).
func TestLongCommandsStopAtTheFirstSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("imports long runs")
	}
	t.Parallel()
	dir := t.TempDir()
	db, nodeB := copyLongDBs(t, dir)
	for _, c := range []struct {
		name string
		sig  syscall.Signal
		args []string
		// out is a file the command would write; it must not appear.
		out string
	}{
		{"analyze", syscall.SIGINT, []string{"analyze", "a"}, ""},
		{"sites", syscall.SIGTERM, []string{"sites", "a"}, ""},
		{"compare", syscall.SIGINT, []string{"compare", "a", "b", "-o", filepath.Join(dir, "cmp")}, filepath.Join(dir, "cmp")},
		{"merge", syscall.SIGTERM, []string{"merge", filepath.Join(dir, "job.db"), db + ":a", nodeB}, filepath.Join(dir, "job.db")},
		{"compact", syscall.SIGINT, []string{"compact"}, db + ".compact"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before, err := os.ReadFile(db)
			if err != nil {
				t.Fatal(err)
			}
			cmd, errb := memrecProcess(t, nil, append([]string{"--db", db}, c.args...)...)
			defer cmd.Process.Kill()
			waitOpened(t, cmd.Process.Pid, db)
			cmd.Process.Signal(c.sig)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err = <-exited:
			case <-time.After(60 * time.Second):
				t.Fatal("still running a minute after the signal")
			}
			if code := exitCode(t, err); code != 128+int(c.sig) || !strings.Contains(errb.String(), "stopped") {
				t.Fatalf("exit %d, want %d; stderr %q", code, 128+int(c.sig), errb.String())
			}
			if c.out != "" {
				if _, err := os.Stat(c.out); !os.IsNotExist(err) {
					t.Errorf("%s was left: %v", c.out, err)
				}
			}
			if after, _ := os.ReadFile(db); !bytes.Equal(before, after) {
				t.Error("the database changed")
			}
		})
	}
}
