package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/memrec/memrec/formats/jsonl"
	"github.com/memrec/memrec/internal/tracegen"
	"github.com/memrec/memrec/storage"
)

// longRun is a 30-minute run of 8 GPUs at 100 Hz (tracegen), generated
// once and imported as each of several runs: long enough that analyze,
// sites, compare and merge take seconds.
type longRun struct {
	c tracegen.Config
	// head is the generator's lines up to its last GPU's (the run's name
	// and host, the GPUs' UUIDs), body the rest, the same for every run.
	head, body []byte
}

func newLongRun() (*longRun, error) {
	c := tracegen.Default()
	c.Name, c.Duration = "gen", 30*time.Minute
	var gen bytes.Buffer
	if _, err := tracegen.Write(&gen, c); err != nil {
		return nil, err
	}
	b, uuid := gen.Bytes(), []byte(`"uuid":"`)
	last := bytes.LastIndex(b, uuid)
	if last < 0 || bytes.Count(b[:last+len(uuid)], uuid) != c.GPUs || !bytes.HasPrefix(b, []byte(`{"type":"run","name":"gen","host":"gen",`)) {
		return nil, fmt.Errorf("tracegen's output does not start with its run and %d GPUs: %.300s", c.GPUs, b)
	}
	end := last + bytes.IndexByte(b[last:], '\n') + 1
	return &longRun{c: c, head: b[:end], body: b[end:]}, nil
}

// jsonl is the run named name on host host of job j1, its GPUs' UUIDs
// prefixed by host, with a site snapshot of every GPU each minute.
func (l *longRun) jsonl(name, host string) io.Reader {
	head := bytes.Replace(l.head, []byte(`"name":"gen","host":"gen"`), []byte(`"name":"`+name+`","host":"`+host+`","job":"j1"`), 1)
	head = bytes.ReplaceAll(head, []byte(`"uuid":"`), []byte(`"uuid":"`+host+`-`))
	var sites []byte
	start := l.c.Start.UnixNano()
	for m := 1; m < 30; m++ {
		for gpu := 0; gpu < l.c.GPUs; gpu++ {
			sites = fmt.Appendf(sites, `{"type":"sites","t_ns":%d,"gpu":%d,"pid":%d,"rank":%d,"reason":"timer","sites":[`+
				`{"file":"/w/model.py","line":10,"func":"f","live_bytes":%d,"live_blocks":4}]}`+"\n",
				start+int64(m)*int64(time.Minute), gpu, 100+gpu, gpu, int64(m)<<20)
		}
	}
	return io.MultiReader(bytes.NewReader(head), bytes.NewReader(l.body), bytes.NewReader(sites))
}

// importLong imports the long run into new databases in dir: m.db with
// runs a and b of hostA, nodeB.db with run b of hostB.
func importLong(dir string) error {
	l, err := newLongRun()
	if err != nil {
		return err
	}
	for db, runs := range map[string][][2]string{"m.db": {{"a", "hostA"}, {"b", "hostA"}}, "nodeB.db": {{"b", "hostB"}}} {
		d, err := storage.Open(filepath.Join(dir, db), storage.Options{})
		if err != nil {
			return err
		}
		for _, r := range runs {
			if _, err := jsonl.Import(d, []jsonl.Source{{Name: r[0] + ".jsonl", R: l.jsonl(r[0], r[1])}}, jsonl.ImportOptions{}); err != nil {
				d.Close()
				return err
			}
		}
		if err := d.Close(); err != nil {
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
		longDBs.err = importLong(longDBs.dir)
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
