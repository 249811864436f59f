package analysis

import (
	"testing"

	"github.com/memrec/memrec/storage"
	"github.com/memrec/memrec/testsupport/analysistest"
)

// The driver-reserved figure is the most any device sample had, across
// the chunks it spans; a run whose samples all had none shows no line.
// The expected values come from the inputs.
func TestDriverReservedIsTheMost(t *testing.T) {
	for _, c := range []struct {
		name string
		res  func(i int) int64 // sample i's driver reserved
		want int64             // 0: none
	}{
		{"none", func(int) int64 { return 0 }, 0},
		{"constant", func(int) int64 { return 1000 }, 1000},
		{"most in the second chunk", func(i int) int64 {
			if i == 20000 {
				return 5000
			}
			return int64(i % 3 * 100)
		}, 5000},
		{"one sample", func(i int) int64 {
			if i == 39999 {
				return 7
			}
			return 0
		}, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &analysistest.Gen{}
			g.Line(`{"type":"run","name":"r","host":"t","start_ns":%d,"interval_ns":10000000}`, t0)
			g.Line(`{"type":"gpu","gpu":0,"uuid":"GPU-0","name":"Test GPU","total_bytes":%d}`, 80*GiB)
			for i := range 40000 { // chunks seal at 16384 samples and more
				g.Line(`{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d,"reserved_bytes":%d}`, t0+int64(i)*10e6, GiB+int64(i%7)*MiB, c.res(i))
			}
			rep := analysistest.Analyze(t, g.String(), func(db *storage.DB, r storage.Run) (*Report, error) {
				return Analyze(db, r, Options{})
			})["r"]
			gr := rep.GPUs[0]
			got := int64(0)
			if gr.DriverReservedBytes != nil {
				got = *gr.DriverReservedBytes
			}
			if got != c.want {
				t.Errorf("driver reserved %d, want %d", got, c.want)
			}
			if drawn := len(gr.Timeline.DriverReserved.T) > 0; drawn != (c.want != 0) {
				t.Errorf("driver reserved line drawn: %v, want %v", drawn, c.want != 0)
			}
		})
	}
}
