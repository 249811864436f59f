package report

import (
	"math/rand/v2"
	"testing"

	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg/draw"
)

// BenchmarkEnvelope draws one envelope at the report's default size: a
// sawtooth of a tooth a step, many steps a column (a training run: every
// column spans the whole range), and the same sawtooth at random points,
// two a column, whose bands jump about.
func BenchmarkEnvelope(b *testing.B) {
	tooth := func(x float64) float64 { return float64(int(x) % 100) }
	dense := make(plotter.XYs, 100_000)
	for i := range dense {
		x := float64(i) / 10
		dense[i] = plotter.XY{X: x, Y: tooth(x * 37)}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	sampled := make(plotter.XYs, 2*envelopeColumns)
	for i := range sampled {
		x := float64(i) + rng.Float64()
		sampled[i] = plotter.XY{X: x, Y: tooth(x * 37)}
	}
	w, h := size(Options{})
	for _, bc := range []struct {
		name string
		xy   plotter.XYs
	}{{"dense", dense}, {"sampled", sampled}} {
		b.Run(bc.name, func(b *testing.B) {
			c, release := newCanvas(w, h)
			defer release()
			p := newPlot("", "", "")
			p.Add(envelope(bc.xy, colUsed, 0.6))
			b.ReportAllocs()
			for b.Loop() {
				drawOnWhite(p, draw.New(c))
			}
		})
	}
}
