package viewer

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/memrec/memrec/analysis/sites"
)

// sitesJSON answers /api/sites: live bytes by allocation site at each of
// a GPU's site snapshots in the window, for a stacked chart.
type sitesJSON struct {
	Run    string     `json:"run"`
	GPU    int        `json:"gpu"`
	FromUS int64      `json:"from_us"`
	ToUS   int64      `json:"to_us"`
	T      []int64    `json:"t_us"` // the snapshots' times; each holds until the next
	Sites  []siteJSON `json:"sites"`
	Note   string     `json:"note,omitempty"`
	Stale  string     `json:"stale,omitempty"`
	// LeftOut counts the site rows not read, past the read's decoding
	// budget: the snapshots from the first of them on are not shown.
	LeftOut int `json:"site_rows_left_out,omitempty"`
}

// siteJSON is one band: a site, or what the sites shown leave out.
type siteJSON struct {
	Label string  `json:"label"`          // "train.py:52 keep_logits", "other sites", "untracked"
	Kind  string  `json:"kind"`           // sites.SiteBand: site, other, untracked
	Site  string  `json:"site,omitempty"` // file name and line
	Func  string  `json:"func,omitempty"`
	Grows bool    `json:"grows,omitempty"` // by the growth rule, over the window's snapshots
	Bytes []int64 `json:"bytes"`           // live bytes at each time of t_us
}

// noSites is the note of a GPU without site snapshots.
const noSites = "this run has no allocation-site snapshots on this GPU: record with --sites, or import a PyTorch memory snapshot"

// sites answers the window's snapshots of one GPU and its top sites: the
// window holds the snapshots in [from, to) and each process's last before
// from. The sites are ranked as memrec's report and memrec sites rank
// them (sites.Sites.Bands: those that grow by the growth rule over
// these snapshots first, then the largest live bytes); the rest are one
// "other sites" band, the blocks without a stack one "untracked" band,
// each left out when it holds nothing in the window.
func (s *server) sites(w http.ResponseWriter, r *http.Request) {
	rq, err := s.request(r)
	if err != nil {
		reply(w, nil, err)
		return
	}
	gpu, err := rq.gpu()
	if err != nil {
		reply(w, nil, err)
		return
	}
	from, to, err := rq.wholeOr()
	if err != nil {
		reply(w, nil, err)
		return
	}
	top, err := rq.count("top", defaultSites, MaxSites)
	if err != nil {
		reply(w, nil, err)
		return
	}
	us := func(t int64) int64 { return (t - rq.run.StartNS) / 1000 }
	out := sitesJSON{Run: rq.run.Name, GPU: gpu, FromUS: us(from), ToUS: us(to), T: []int64{}, Sites: []siteJSON{}, Stale: rq.stale}
	var snaps *sites.Sites
	if ss, ok := s.src.(SiteSource); ok {
		if snaps, err = ss.Sites(rq.run, gpu); err != nil {
			reply(w, nil, err)
			return
		}
	}
	if snaps != nil {
		if lo := snaps.LeftOut(); lo.Rows > 0 {
			out.LeftOut, out.Note = lo.Rows, fmt.Sprintf("%d site rows left out, the snapshots from the first of them on not shown: %v", lo.Rows, lo.Err)
		}
	}
	if snaps == nil || snaps.Len() == 0 {
		if out.Note == "" {
			out.Note = noSites
		}
		reply(w, out, nil)
		return
	}
	for i, b := range snaps.Bands(from, to, top) {
		if i == 0 {
			for _, t := range b.TNS {
				out.T = append(out.T, us(t))
			}
		}
		if b.Band != sites.BandSite && !slices.ContainsFunc(b.Bytes, func(v int64) bool { return v != 0 }) {
			continue
		}
		out.Sites = append(out.Sites, siteJSON{Label: b.Name, Kind: b.Band.String(), Site: b.Site, Func: b.Func, Grows: b.Growth, Bytes: b.Bytes})
	}
	reply(w, out, nil)
}
