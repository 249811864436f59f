// Package linetest compares JSON Lines in memrec's format (package wire)
// the way a store gives them back: the tests of the store, of its import
// and of the JSON Lines export read the same oracle.
package linetest

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
)

// Normalize parses JSON Lines into comparable records: data lines with time
// rounded down to the stored 1 µs, sorted; run and gpu lines dropped.
func Normalize(t testing.TB, data []byte) []string {
	t.Helper()
	var out []string
	for i, l := range bytes.Split(data, []byte("\n")) {
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		var m map[string]any
		d := json.NewDecoder(bytes.NewReader(l))
		d.UseNumber()
		if err := d.Decode(&m); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
		switch m["type"] {
		case "run", "gpu":
			continue
		case "torch":
			if _, ok := m["active_bytes"]; !ok {
				m["active_bytes"] = m["allocated_bytes"]
			}
		case "sample":
			// Older files name driver-reserved memory reserved_bytes.
			if v, ok := m["reserved_bytes"]; ok {
				m["driver_reserved_bytes"] = v
				delete(m, "reserved_bytes")
			}
		}
		if tn, ok := m["t_ns"].(json.Number); ok {
			n, _ := tn.Int64()
			m["t_ns"] = n / 1000 * 1000
		}
		b, _ := json.Marshal(m)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}
