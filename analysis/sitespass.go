package analysis

import (
	"github.com/memrec/memrec/analysis/growth"
	"github.com/memrec/memrec/analysis/sites"
	"github.com/memrec/memrec/storage"
)

// This file runs package sites' where pass for one GPU, and reads what it
// needs of a run outside Analyze (SitesInput).

// where is the sites pass: where the GPU's memory is held, the leak's
// site and the holders of each OOM.
func (a *gpuAnalysis) where() error {
	if len(a.sitePIDs) == 0 {
		return nil
	}
	ooms := make([]int64, len(a.gr.OOMs))
	for i, o := range a.gr.OOMs {
		ooms[i] = o.TNS
	}
	w, holders, left, err := sites.Find(a.db, a.run, a.g.Index, a.sitePIDs, a.sitesInput(), ooms)
	if err != nil {
		return err
	}
	if left.Rows > 0 {
		a.gr.SiteRowsLeftOut, a.gr.sitesLeftOutWhy = left.Rows, left.Err
	}
	if w == nil {
		return nil
	}
	a.gr.Where = w
	if l := &a.gr.Leak; l.IsLeak() && len(w.Growing) > 0 {
		g := w.Growing[0]
		l.HeldBy = &growth.HeldBy{Site: g.Site, File: g.File, Line: g.Line, Func: g.Func, Share: g.Share, SampledEvery: g.SampledEvery}
	}
	for i, h := range holders {
		if h != nil {
			a.gr.OOMs[i].Holders = h
		}
	}
	return nil
}

func (a *gpuAnalysis) sitesInput() sites.Input {
	return sites.Input{Steps: a.steps, EpochAt: a.mi.epochAt, Warm: a.mi.warm, Leak: a.gr.Leak, Budget: a.opts.Budget}
}

// SitesInput is what package sites needs to place one GPU's snapshots of
// a run outside Analyze (sites.ReadSites, sites.SiteSnapshots): the
// steps of the rank on the GPU, the epochs and the warm-up, from the
// run's marks. It has no leak verdict. The marks it keeps are taken from
// budget, and the Input carries budget on to the snapshots' rows: a
// command passes one for all it reads (nil: one of
// storage.DefaultDecodeBudget for this read alone).
func SitesInput(db *storage.DB, run storage.Run, gpu int, budget *storage.DecodeBudget) (sites.Input, error) {
	if budget == nil {
		budget = storage.NewDecodeBudget(storage.DefaultDecodeBudget)
	}
	series, err := db.Series(run)
	if err != nil {
		return sites.Input{}, err
	}
	mi, err := loadMarks(db, run, budget, nil)
	if err != nil {
		return sites.Input{}, err
	}
	a := &gpuAnalysis{db: db, run: run, g: storage.GPU{Index: gpu}, mi: mi, gr: &GPUReport{}, opts: Options{Budget: budget}}
	for _, s := range series {
		if s.GPU == gpu && s.Kind == storage.SeriesTorch {
			a.torchPIDs = append(a.torchPIDs, s.PID)
		}
	}
	a.hasTorch = len(a.torchPIDs) > 0
	a.steps = mi.stepsFor(a.rank())
	return a.sitesInput(), nil
}

// SiteRowsLeftOutWhy is why SiteRowsLeftOut rows were left out (it wraps
// storage.ErrDecodeBudget); nil when none were.
func (g *GPUReport) SiteRowsLeftOutWhy() error { return g.sitesLeftOutWhy }
