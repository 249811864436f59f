package report

import (
	"bytes"
	"fmt"
	"image/png"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/storage"
)

// sitesRun is a job that keeps 1 MiB a step at train.py:52, with site
// snapshots at its three epoch ends and at the OOM that ends it.
func sitesRun(t *testing.T) *analysis.Report {
	t.Helper()
	var b strings.Builder
	t0 := int64(1_764_430_000_000_000_000)
	b.WriteString(`{"type":"run","name":"s","start_ns":` + fmt.Sprint(t0) + "}\n" + `{"type":"gpu","gpu":0,"total_bytes":85899345920}` + "\n")
	snap := func(t int64, reason string, epoch int, kept int64) {
		fmt.Fprintf(&b, `{"type":"sites","t_ns":%d,"gpu":0,"pid":7,"reason":%q,"epoch":%d,"untracked":{"live_bytes":%d,"live_blocks":3},"sites":[`+
			`{"file":"/w/model.py","line":10,"func":"__init__","live_bytes":%d,"live_blocks":40},`+
			`{"file":"/w/train.py","line":52,"func":"keep","stack":["train.py:80 step"],"live_bytes":%d,"live_blocks":%d}]}`+"\n",
			t, reason, epoch, 1<<30, 2<<30, kept, kept>>20)
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
	db, err := storage.Open(filepath.Join(t.TempDir(), "s.db"), storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	runs, err := db.Import([]storage.Source{{Name: "s", R: strings.NewReader(b.String())}}, storage.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := analysis.Analyze(db, runs[0], analysis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rep
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
