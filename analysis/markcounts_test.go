package analysis

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// TestMarkCountsPerTrainingStep: two ranks marking the same 3 steps are 3
// steps (6 step marks, 3 by each rank); the exit mark is not an event; the
// JSON keys are snake_case like every other.
func TestMarkCountsPerTrainingStep(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"type":"run","name":"m","start_ns":1000000000}` + "\n" + `{"type":"gpu","gpu":0}` + "\n" + `{"type":"gpu","gpu":1}` + "\n")
	for s := 0; s < 3; s++ {
		for rank := 0; rank < 2; rank++ {
			t0 := int64(1e9) + int64(s+1)*1e8 + int64(rank)*1e6
			fmt.Fprintf(&b, `{"type":"sample","t_ns":%d,"gpu":%d,"used_bytes":%d}`+"\n", t0, rank, 1000+s)
			fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"step","step":%d,"rank":%d}`+"\n", t0, s, rank)
		}
	}
	b.WriteString(`{"type":"mark","t_ns":1350000000,"kind":"event","text":"checkpoint"}` + "\n")
	b.WriteString(`{"type":"mark","t_ns":1400000000,"kind":"exit","code":0}` + "\n")
	rep := analyzeJSONL(t, b.String())["m"]
	m := rep.Marks
	if m.Steps != 3 || m.StepMarks != 6 || m.Events != 1 || m.OOMs != 0 || m.StepsByRank["0"] != 3 || m.StepsByRank["1"] != 3 {
		t.Errorf("marks %+v: want 3 steps, 6 step marks, 3 by each rank, 1 event (the exit mark is none)", m)
	}
	js, _ := json.Marshal(rep)
	if camel := regexp.MustCompile(`"[a-z]*[A-Z][A-Za-z_]*":`).FindAllString(string(js), -1); len(camel) > 0 {
		t.Errorf("keys not in snake_case: %v", camel)
	}
}
