package viewer

import (
	"slices"
	"testing"

	"github.com/memrec/memrec/series"
	"github.com/memrec/memrec/storage"
)

// TestIndexFromSummaries: a run larger than the source indexes at once is
// indexed from its chunks' summaries first: its finest buckets are the
// pieces', every window of fewer samples a pixel than a piece holds is
// read from the file and drawn exactly as from every sample, and the rest
// are drawn from the pieces. Once refined in the background the index is
// the one of every sample, and so is every window; past the bound on
// refining it stays with the summaries'.
func TestIndexFromSummaries(t *testing.T) {
	path, run := testDB(t)
	full := NewDBSource(path)
	defer full.Close()
	fx, fraw, err := full.Index(run)
	if err != nil || fx.Coarse() {
		t.Fatalf("a small run's index: coarse %v, %v", fx.Coarse(), err)
	}
	windows := [][2]float64{{0, testSeconds}, {10, 100}, {40, 62}, {50, 53.7}, {61, 61.9}}
	window := func(x *series.Index, raw Reader, k series.Key, w [2]float64) series.Result {
		t.Helper()
		res, err := x.Window(k, run.StartNS+int64(w[0]*1e9), run.StartNS+int64(w[1]*1e9), 12, raw(run, k))
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	for _, refineMax := range []int64{1 << 40, 0} {
		src := NewDBSource(path)
		src.direct, src.refineMax = 0, refineMax
		x, raw, err := src.Index(run)
		if err != nil || !x.Coarse() {
			t.Fatalf("from the summaries: coarse %v, %v", x.Coarse(), err)
		}
		for _, k := range fx.Keys() {
			if k.Field.Budget() {
				continue
			}
			for _, w := range windows {
				got, want := window(x, raw, k, w), window(fx, fraw, k, w)
				switch {
				case got.Every == 1 && want.Every == 1:
					if !slices.Equal(got.V, want.V) || !slices.Equal(got.T, want.T) {
						t.Errorf("%v %v: read from the file, drawn unlike every sample", k, w)
					}
				case got.Every == 1:
					// finer than the pieces: the samples, where every sample's index draws buckets
				case got.Every < storage.PieceSamples/2 && got.Every > 1:
					t.Errorf("%v %v: drawn from units of %d, finer than a piece", k, w, got.Every)
				case slices.Min(got.V) != slices.Min(want.V) || slices.Max(got.V) != slices.Max(want.V):
					t.Errorf("%v %v: from pieces %d..%d, from every sample %d..%d", k, w, slices.Min(got.V), slices.Max(got.V), slices.Min(want.V), slices.Max(want.V))
				}
			}
		}
		src.waitRefined(run)
		x, raw, err = src.Index(run)
		if err != nil || x.Coarse() != (refineMax == 0) {
			t.Fatalf("refine bound %d: coarse %v after refining, %v", refineMax, x.Coarse(), err)
		}
		if refineMax > 0 {
			for _, k := range fx.Keys() {
				for _, w := range windows {
					got, want := window(x, raw, k, w), window(fx, fraw, k, w)
					if !slices.Equal(got.V, want.V) || !slices.Equal(got.T, want.T) || got.Every != want.Every {
						t.Errorf("%v %v: refined, drawn unlike every sample's index", k, w)
					}
				}
			}
		}
		src.Close()
	}
}
