package report

import (
	"image"
	"sync"

	"git.sr.ht/~sbinet/gg"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/vgimg"
)

// newCanvas is vgimg.New(w, h) drawn on an image a chart drawn before
// left: vgimg.New allocates an image of 4 bytes a pixel and gg copies it
// into a second, once a chart, while a canvas on a kept image, its
// background painted over the whole of it first, is the same picture.
// Call release once the chart is encoded; the canvas is not used after.
//
// vgimg sizes a canvas on a given image from the image, in whole pixels,
// so only a size of whole pixels gives the same canvas; any other is
// vgimg.New's own.
func newCanvas(w, h vg.Length) (c *vgimg.Canvas, release func()) {
	px := image.Pt(pixels(w), pixels(h))
	if inches(px.X) != w || inches(px.Y) != h {
		return vgimg.New(w, h), func() {}
	}
	img := chartImages.get(px)
	// What vgimg.NewWith does to the context it makes for an image of
	// its own.
	ctx := gg.NewContextForRGBA(img)
	ctx.SetLineCapButt()
	ctx.InvertY()
	return vgimg.NewWith(vgimg.UseImageWithContext(img, ctx)), func() { chartImages.put(img) }
}

// pixels is the image width vgimg gives a canvas of l points.
func pixels(l vg.Length) int { return int(l/vg.Inch*vg.Length(vgimg.DefaultDPI) + 0.5) }

// inches is the canvas length vgimg gives an image of n pixels.
func inches(n int) vg.Length { return vg.Length(float64(n)/float64(vgimg.DefaultDPI)) * vg.Inch }

// imagePool keeps chart images by size; safe for concurrent use.
type imagePool struct {
	mu   sync.Mutex
	free map[image.Point][]*image.RGBA
}

// chartImages are the images of the charts drawn so far.
var chartImages = imagePool{free: map[image.Point][]*image.RGBA{}}

// get is an image of size px: a kept one (its pixels as the last chart
// left them) or a new one.
func (p *imagePool) get(px image.Point) *image.RGBA {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l := p.free[px]; len(l) > 0 {
		img := l[len(l)-1]
		p.free[px] = l[:len(l)-1]
		return img
	}
	return image.NewRGBA(image.Rectangle{Max: px})
}

// put keeps img for the next chart of its size. The images kept are as
// many as were drawn at once (a worker each), until drop.
func (p *imagePool) put(img *image.RGBA) {
	p.mu.Lock()
	defer p.mu.Unlock()
	px := img.Bounds().Size()
	p.free[px] = append(p.free[px], img)
}

// drop lets the collector have the images kept: a report's charts are
// drawn, and what comes after needs the memory more.
func (p *imagePool) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.free)
}
