package report

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/memrec/memrec/testsupport/fixtures"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// TestEncodePNGSameBytes holds the pooled encoder to a fresh one: charts
// of different sizes and contents, encoded at once and one after another
// (so each takes buffers another left), give the bytes image/png gives
// with no pool.
func TestEncodePNGSameBytes(t *testing.T) {
	sizes := []struct{ w, h vg.Length }{{300, 200}, {900, 375}, {150, 112}, {900, 375}}
	canvases := make([]*vgimg.Canvas, len(sizes))
	for i, s := range sizes {
		c := vgimg.New(s.w, s.h)
		dc := draw.New(c)
		// A different picture each: a filled band and a diagonal.
		dc.FillPolygon(color.RGBA{R: uint8(40 * i), G: 120, B: 200, A: 255}, []vg.Point{{X: 10, Y: 10}, {X: s.w / 2, Y: 10}, {X: s.w / 2, Y: s.h / vg.Length(i+2)}, {X: 10, Y: s.h / 3}})
		dc.StrokeLine2(draw.LineStyle{Color: color.Black, Width: vg.Points(float64(i + 1))}, 0, 0, s.w, s.h)
		canvases[i] = c
	}
	want := make([][]byte, len(canvases))
	for i, c := range canvases {
		var b bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, c.Image()); err != nil {
			t.Fatal(err)
		}
		want[i] = b.Bytes()
	}
	for round := 0; round < 3; round++ {
		var wg sync.WaitGroup
		got := make([][]byte, len(canvases))
		errs := make([]error, len(canvases))
		for i, c := range canvases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i], errs[i] = encodePNG(c)
			}()
		}
		wg.Wait()
		for i := range canvases {
			if errs[i] != nil {
				t.Fatalf("round %d, chart %d: %v", round, i, errs[i])
			}
			if !bytes.Equal(got[i], want[i]) {
				t.Errorf("round %d, chart %d (%vx%v): %d bytes, image/png without a pool %d", round, i, sizes[i].w, sizes[i].h, len(got[i]), len(want[i]))
			}
		}
	}
}

// BenchmarkEncodePNG encodes one chart-sized canvas over and over.
func BenchmarkEncodePNG(b *testing.B) {
	c := vgimg.New(900, 375)
	dc := draw.New(c)
	dc.StrokeLine2(draw.LineStyle{Color: color.Black, Width: 1}, 0, 0, 900, 375)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := encodePNG(c); err != nil {
			b.Fatal(err)
		}
	}
}

// TestNewCanvasSamePicture: a chart drawn by newCanvas on an image another
// chart left is vgimg.New's picture, pixel for pixel, at sizes of whole
// pixels (kept images) and not (vgimg's own).
func TestNewCanvasSamePicture(t *testing.T) {
	drawOn := func(c *vgimg.Canvas, i int) {
		dc := draw.New(c)
		w, h := dc.Max.X, dc.Max.Y
		dc.FillPolygon(color.RGBA{R: uint8(60 * i), G: 90, B: 30, A: 255}, []vg.Point{{X: 5, Y: 5}, {X: w / 3, Y: 8}, {X: w / 2, Y: h - 4}})
		dc.StrokeLine2(draw.LineStyle{Color: color.RGBA{B: 200, A: 255}, Width: vg.Points(1.5)}, 0, h, w, 0)
	}
	for i, s := range []struct{ w, h vg.Length }{{900, 375}, {900, 375}, {900, 225}, {900, 375}, {300.3, 200.7}} {
		want := vgimg.New(s.w, s.h)
		drawOn(want, i)
		got, release := newCanvas(s.w, s.h)
		drawOn(got, i)
		if gw, gh := got.Size(); gw != s.w || gh != s.h {
			t.Fatalf("%vx%v: canvas %vx%v", s.w, s.h, gw, gh)
		}
		g, w := got.Image().(*image.RGBA), want.Image().(*image.RGBA)
		if g.Bounds() != w.Bounds() || !bytes.Equal(g.Pix, w.Pix) {
			t.Errorf("chart %d, %vx%v: the picture differs from vgimg.New's", i, s.w, s.h)
		}
		release()
	}
}

// TestRGBPNGAsImagePNG: every chart of a real run, each chart kind, is
// written as image/png writes its pixels (decoded from the chart's file
// and encoded again), byte for byte; an image with a pixel not opaque, or
// not at the origin, is image/png's own.
func TestRGBPNGAsImagePNG(t *testing.T) {
	charts, err := Charts(realReport(t, fixtures.LeakRun), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(charts) < 5 {
		t.Fatalf("%d charts, want every kind", len(charts))
	}
	asImagePNG := func(img image.Image) []byte {
		var b bytes.Buffer
		if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&b, img); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	for _, c := range charts {
		img, err := png.Decode(bytes.NewReader(c.PNG))
		if err != nil {
			t.Fatalf("%s: %v", c.File, err)
		}
		if want := asImagePNG(img); !bytes.Equal(c.PNG, want) {
			t.Errorf("%s: %d bytes, image/png %d", c.File, len(c.PNG), len(want))
		}
	}
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	img.Set(39, 29, color.RGBA{R: 10, G: 20, B: 30, A: 128})
	if _, ok := rgbPNG(img); ok {
		t.Error("an image with a pixel not opaque is written as RGB")
	}
	if _, ok := rgbPNG(img.SubImage(image.Rect(1, 1, 30, 20)).(*image.RGBA)); ok {
		t.Error("an image not at the origin is written")
	}
}

// BenchmarkEncodeChart encodes a real run's timeline chart, at the
// report's default size, as image/png and as encodePNG write it.
func BenchmarkEncodeChart(b *testing.B) {
	rep := realReport(b, fixtures.LeakRun)
	w, h := size(Options{})
	c, release := newCanvas(w, h)
	defer release()
	drawOnWhite(timelineChart(rep, rep.GPUs[0], "timeline", 0), draw.New(c))
	b.Run("image/png", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var buf bytes.Buffer
			if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&buf, c.Image()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encodePNG", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := encodePNG(c); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestRGBPNGRandom: images of flat rectangles, repeated rows and noise,
// of widths around the 8 bytes a word holds, are written as image/png
// writes them, whatever filter each row takes.
func TestRGBPNGRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, w := range []int{1, 2, 3, 5, 8, 17, 64, 301} {
		for round := range 6 {
			h := 1 + rng.IntN(40)
			img := image.NewRGBA(image.Rect(0, 0, w, h))
			fill := func(x0, y0, x1, y1 int, c color.RGBA) {
				for y := y0; y < y1; y++ {
					for x := x0; x < x1; x++ {
						img.SetRGBA(x, y, c)
					}
				}
			}
			fill(0, 0, w, h, color.RGBA{R: 255, G: 255, B: 255, A: 255})
			for range rng.IntN(12) {
				x0, y0 := rng.IntN(w), rng.IntN(h)
				fill(x0, y0, x0+1+rng.IntN(w-x0), y0+1+rng.IntN(h-y0), color.RGBA{R: uint8(rng.IntN(256)), G: uint8(rng.IntN(256)), B: uint8(rng.IntN(256)), A: 255})
			}
			for range rng.IntN(3 * w) { // noise
				img.SetRGBA(rng.IntN(w), rng.IntN(h), color.RGBA{R: uint8(rng.IntN(256)), G: uint8(rng.IntN(256)), B: uint8(rng.IntN(256)), A: 255})
			}
			var want bytes.Buffer
			if err := (&png.Encoder{CompressionLevel: png.BestSpeed}).Encode(&want, img); err != nil {
				t.Fatal(err)
			}
			got, ok := rgbPNG(img)
			if !ok || !bytes.Equal(got, want.Bytes()) {
				t.Errorf("%dx%d, round %d: written %v, %d bytes, image/png %d", w, h, round, ok, len(got), want.Len())
			}
		}
	}
}
