package report

import (
	"bytes"
	"fmt"
	"image"
	"image/png"
	"strings"
	"testing"

	"gonum.org/v1/plot/vg"

	"github.com/memrec/memrec/analysis"
)

// sitesRun is a job that keeps 1 MiB a step at train.py:52, with site
// snapshots at its three epoch ends and at the OOM that ends it.
func sitesRun(t *testing.T) *analysis.Report {
	t.Helper()
	return sitesRunAt(t, "/w/model.py", "__init__", "/w/train.py", "keep")
}

// sitesRunAt is sitesRun with the steady site at file1 in func1 and the
// growing one at file2 in func2 (line 52).
func sitesRunAt(t *testing.T, file1, func1, file2, func2 string) *analysis.Report {
	t.Helper()
	var b strings.Builder
	t0 := int64(1_764_430_000_000_000_000)
	b.WriteString(`{"type":"run","name":"s","start_ns":` + fmt.Sprint(t0) + "}\n" + `{"type":"gpu","gpu":0,"total_bytes":85899345920}` + "\n")
	snap := func(t int64, reason string, epoch int, kept int64) {
		fmt.Fprintf(&b, `{"type":"sites","t_ns":%d,"gpu":0,"pid":7,"reason":%q,"epoch":%d,"untracked":{"live_bytes":%d,"live_blocks":3},"sites":[`+
			`{"file":%q,"line":10,"func":%q,"live_bytes":%d,"live_blocks":40},`+
			`{"file":%q,"line":52,"func":%q,"stack":["train.py:80 step"],"live_bytes":%d,"live_blocks":%d}]}`+"\n",
			t, reason, epoch, 1<<30, file1, func1, 2<<30, file2, func2, kept, kept>>20)
	}
	tt := t0
	for s := 0; s < 30; s++ {
		tt += 100e6
		if s%10 == 0 {
			fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"epoch_start","epoch":%d}`+"\n", tt-1000, s/10)
		}
		kept := int64(s+1) << 20
		fmt.Fprintf(&b, `{"type":"sample","t_ns":%d,"gpu":0,"used_bytes":%d}`+"\n", tt, (4<<30)+kept)
		fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"step","step":%d}`+"\n", tt+10, s)
		fmt.Fprintf(&b, `{"type":"torch","t_ns":%d,"gpu":0,"pid":7,"allocated_bytes":%d,"reserved_bytes":%d}`+"\n", tt+20, (3<<30)+kept, 4<<30)
		if s%10 == 9 {
			fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"epoch_end","epoch":%d}`+"\n", tt+30, s/10)
			snap(tt+40, "epoch_end", s/10, kept)
		}
	}
	snap(tt+50e6, "oom", 2, 30<<20)
	fmt.Fprintf(&b, `{"type":"mark","t_ns":%d,"kind":"oom","gpu":0,"pid":7,"text":"CUDA out of memory. Tried to allocate 2.00 GiB"}`+"\n", tt+50e6+10)
	return analyzeOne(t, "s", []byte(b.String()))
}

func TestSitesChartAndTables(t *testing.T) {
	rep := sitesRun(t)
	charts, err := Charts(rep, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var chart *Chart
	for i := range charts {
		if charts[i].File == "gpu0-sites.png" {
			chart = &charts[i]
		}
	}
	if chart == nil {
		t.Fatal("no sites chart")
	}
	img, err := png.Decode(bytes.NewReader(chart.PNG))
	if err != nil {
		t.Fatal(err)
	}
	// The two sites, other (empty) and untracked, over white, axes and text.
	if n := distinctColors(img, 64); n < 5 {
		t.Errorf("sites chart has %d colours", n)
	}
	page, err := Page(rep, charts)
	if err != nil {
		t.Fatal(err)
	}
	text := string(page)
	for _, want := range []string{
		"Where the memory is held", "Growing sites: live bytes that rise", "<code>train.py:52</code></td><td class=\"l\">keep</td><td>20.0 MiB</td><td>1.0 MiB</td><td>10.0 MiB</td>",
		"Biggest holders at the end", "Largest holders at the OOM", "of it is held by blocks allocated at train.py:52 in `keep`",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestSitesChartLegendBelow draws the sites chart of a job whose sites have
// long names and checks that the legend lies under the plot, not over its
// data (where a stacked chart fills the area up to the top): the thumbnail
// of "other sites", which hold nothing and so are drawn nowhere else, is in
// the bottom quarter of the chart. A name too long for one line of the
// chart is shortened in the middle, so that the file and line at its start
// and the end of the function stay readable.
func TestSitesChartLegendBelow(t *testing.T) {
	long := strings.Repeat("very_long_package_name/", 8)
	keep := "keep_" + strings.Repeat("the_outputs_of_every_step_", 8) + "for_later"
	rep := sitesRunAt(t, "/w/"+long+"model.py", "build_the_whole_model_with_all_its_layers", "/w/"+long+"train.py", keep)
	charts, err := Charts(rep, Options{Width: 900, Height: 450})
	if err != nil {
		t.Fatal(err)
	}
	var img image.Image
	for _, c := range charts {
		if c.File == "gpu0-sites.png" {
			if img, err = png.Decode(bytes.NewReader(c.PNG)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if img == nil {
		t.Fatal("no sites chart")
	}
	// "other sites" is grey 170 at alpha 190 over white.
	grey := uint8((170*190 + 255*(255-190)) / 255)
	b := img.Bounds()
	firstRow := -1 // with a run of 8 pixels of it: text's anti-aliasing has single grey pixels
	for y := b.Min.Y; y < b.Max.Y && firstRow < 0; y++ {
		run := 0
		for x := b.Min.X; x < b.Max.X && run < 8; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			if near8(r, grey) && near8(g, grey) && near8(bl, grey) {
				run++
			} else {
				run = 0
			}
		}
		if run >= 8 {
			firstRow = y
		}
	}
	if firstRow < b.Max.Y*3/4 {
		t.Errorf("the legend's thumbnail of other sites first appears at row %d of %d: the legend is over the plot", firstRow, b.Max.Y)
	}
	width := func(s string) vg.Length { return vg.Length(len([]rune(s))) }
	name := fitText("train.py:52 "+keep+" (grows)", 100, width)
	if width(name) > 100 || !strings.HasPrefix(name, "train.py:52 keep_the_outputs") || !strings.HasSuffix(name, "for_later (grows)") || !strings.Contains(name, "…") {
		t.Errorf("shortened to %q", name)
	}
	if short := "train.py:52 keep"; fitText(short, 100, width) != short {
		t.Errorf("a name that fits was changed")
	}
}

func near8(v uint32, want uint8) bool { d := int(v>>8) - int(want); return d >= -3 && d <= 3 }
