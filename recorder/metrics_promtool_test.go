package recorder

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/memrec/memrec/storage"
)

// TestPromtoolCheckMetrics runs Prometheus' own linter (promtool check
// metrics, Debian's prometheus package) on a scrape with every metric
// family present. The one finding it has is the one docs/metrics.md
// explains: modelName is camelCase, spelled so because dcgm-exporter
// spells it so and a join needs the same label name on both sides. Any
// other finding fails.
func TestPromtoolCheckMetrics(t *testing.T) {
	bin, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("no promtool on PATH (Debian: apt-get install prometheus; .ci/run installs it)")
	}
	for _, legacy := range []bool{false, true} {
		l := NewLive(liveRun(), time.Second, LiveOptions{Version: "v1", LegacyHostname: legacy, ProcName: func(int) string { return "python3" }})
		sink := l.Wrap(Discard)
		sink.AppendDevice(storage.DeviceSample{T: 2e9, GPU: 0, Used: 300, Reserved: 20})
		sink.AppendProc(storage.ProcSample{T: 2e9, GPU: 0, PID: 42, Used: 250})
		sink.AppendTorch(storage.TorchSample{T: 2e9, GPU: 0, PID: 42, Rank: 0, Allocated: 11, Reserved: 22})
		rec := httptest.NewRecorder()
		l.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		var out bytes.Buffer
		cmd := exec.Command(bin, "check", "metrics")
		cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(body), &out, &out
		err := cmd.Run()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			t.Fatal(err)
		}
		families := 0
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if line == "" {
				continue
			}
			name, finding, _ := strings.Cut(line, " ")
			if finding != "label names should be written in 'snake_case' not 'camelCase'" {
				t.Errorf("legacy %v: promtool: %s", legacy, line)
			}
			if !strings.Contains(body, name+"{") || !strings.Contains(body, "modelName=") {
				t.Errorf("promtool names %s, which is not served with modelName", name)
			}
			families++
		}
		// Every family with GPU labels (device, process, allocator) is flagged, no other.
		if families == 0 {
			t.Errorf("legacy %v: promtool found nothing; docs/metrics.md says it flags modelName", legacy)
		}
		t.Logf("legacy %v: promtool flags modelName on %d families, nothing else", legacy, families)
	}
}
