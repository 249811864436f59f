package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/memrec/memrec/fit"
	"github.com/memrec/memrec/storage"
)

// fit --history: how far memrec's predictions fell from what the trials
// found, across the fits in the database. Each fit that made a prediction
// and had a trial outcome keeps both in its trials' runs, under the tag
// fitRecordTag, so the record lives and dies with the runs it describes.

// fitRecordTag is the run tag a fit's record is kept under.
const fitRecordTag = "fit_result"

// withinBelow is the share below the limit a prediction may fall and
// still count as close: a prediction is useful when it costs at most
// this much of the batch the GPU holds.
const withinBelow = 0.10

// fitRecord is one fit's prediction and outcome.
type fitRecord struct {
	ID             string    `json:"id"`
	By             string    `json:"by"`
	Predicted      float64   `json:"predicted"`
	Basis          fit.Basis `json:"basis"`
	LargestRan     *float64  `json:"largest_ran"`
	SmallestFailed *float64  `json:"smallest_failed"`
	Trials         int       `json:"trials"`
	// Judged says whether the trials bound the limit enough to judge the
	// prediction; Above that it was at or above a value that failed;
	// Below how far under the largest that ran it fell, as a share of it.
	Judged bool    `json:"judged"`
	Above  bool    `json:"above"`
	Below  float64 `json:"below"`
}

// encode is the record as the tag's value: key=value pairs, space
// separated (values are numbers and names without spaces).
func (r fitRecord) encode() string {
	kv := []string{"by=" + r.By, "predicted=" + num(r.Predicted), "basis=" + string(r.Basis), "trials=" + strconv.Itoa(r.Trials)}
	if r.LargestRan != nil {
		kv = append(kv, "largest_ran="+num(*r.LargestRan))
	}
	if r.SmallestFailed != nil {
		kv = append(kv, "smallest_failed="+num(*r.SmallestFailed))
	}
	return strings.Join(kv, " ")
}

// parseFitRecord reads a record from its tag's value.
func parseFitRecord(id, s string) (fitRecord, error) {
	r := fitRecord{ID: id}
	seen := map[string]bool{}
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return r, fmt.Errorf("%q: want key=value", f)
		}
		seen[k] = true
		var err error
		switch k {
		case "by":
			r.By = v
		case "basis":
			r.Basis = fit.Basis(v)
		case "predicted":
			r.Predicted, err = strconv.ParseFloat(v, 64)
		case "trials":
			r.Trials, err = strconv.Atoi(v)
		case "largest_ran", "smallest_failed":
			var x float64
			x, err = strconv.ParseFloat(v, 64)
			if k == "largest_ran" {
				r.LargestRan = &x
			} else {
				r.SmallestFailed = &x
			}
		}
		if err != nil {
			return r, fmt.Errorf("%s=%q: not a number", k, v)
		}
	}
	if !seen["predicted"] || !seen["trials"] {
		return r, fmt.Errorf("%q: want predicted= and trials=", s)
	}
	r.judge()
	return r, nil
}

// judge places the prediction against the trials: above where a value at
// or below it failed; else below by its distance under the largest that
// ran. A prediction above the largest that ran with nothing failed above
// it cannot be judged: the limit was not reached.
func (r *fitRecord) judge() {
	if r.SmallestFailed != nil && r.Predicted >= *r.SmallestFailed {
		r.Judged, r.Above = true, true
		return
	}
	if lr := r.LargestRan; lr != nil && *lr > 0 && (r.Predicted <= *lr || r.SmallestFailed != nil) {
		r.Judged, r.Below = true, max(0, (*lr-r.Predicted) / *lr)
	}
}

// storeFitRecord keeps the fit's first prediction and its outcome on each
// of its trials' runs, where it has both.
func storeFitRecord(db *storage.DB, r fit.Result) error {
	p := r.Prediction
	if p == nil || p.Value == nil || (r.LargestRan == nil && r.SmallestFailed == nil) {
		return nil
	}
	rec := fitRecord{By: r.By, Predicted: *p.Value, Basis: r.PredictionBasis, LargestRan: r.LargestRan,
		SmallestFailed: r.SmallestFailed, Trials: r.TrialsUsed}
	tags := map[string]string{fitRecordTag: rec.encode()}
	for _, t := range r.Trials {
		if _, err := db.SetTags(t.Run, tags); err != nil {
			return fmt.Errorf("run %q: %w", t.Run, err)
		}
	}
	return nil
}

// fitHistory reads the records of the fits in db, oldest first; a record
// it cannot read is an error naming its run.
func fitHistory(db *storage.DB) ([]fitRecord, error) {
	runs, err := db.Runs()
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(runs, func(a, b storage.Run) int { return int(min(max(a.StartNS-b.StartNS, -1), 1)) })
	var out []fitRecord
	seen := map[string]bool{}
	for _, r := range runs {
		v, ok := r.Tags[fitRecordTag]
		if !ok {
			continue
		}
		id := r.Tags["fit"]
		if id == "" {
			id = r.Name
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		rec, err := parseFitRecord(id, v)
		if err != nil {
			return nil, fmt.Errorf("run %q: tag %s: %w", r.Name, fitRecordTag, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// historySummary counts the judged records: within withinBelow below,
// above, and the median of the trials used.
type historySummary struct {
	Fits         int     `json:"fits"`
	Judged       int     `json:"judged"`
	WithinBelow  int     `json:"within_10pct_below"`
	Above        int     `json:"above"`
	MedianTrials float64 `json:"median_trials"`
}

func summarize(recs []fitRecord) historySummary {
	s := historySummary{Fits: len(recs)}
	var trials []float64
	for _, r := range recs {
		trials = append(trials, float64(r.Trials))
		if !r.Judged {
			continue
		}
		s.Judged++
		switch {
		case r.Above:
			s.Above++
		case r.Below <= withinBelow:
			s.WithinBelow++
		}
	}
	if n := len(trials); n > 0 {
		slices.Sort(trials)
		s.MedianTrials = (trials[(n-1)/2] + trials[n/2]) / 2
	}
	return s
}

// runFitHistory is memrec fit --history.
func runFitHistory(o *fitOptions) error {
	db, err := o.rec.openExisting()
	if err != nil {
		return err
	}
	defer db.Close()
	recs, err := fitHistory(db)
	if err != nil {
		return err
	}
	s := summarize(recs)
	if o.json {
		enc := json.NewEncoder(o.rec.io.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Fits    []fitRecord    `json:"fits"`
			Summary historySummary `json:"summary"`
		}{append([]fitRecord{}, recs...), s})
	}
	printFitHistory(o.rec.io.Out, recs, s)
	return nil
}

func printFitHistory(w io.Writer, recs []fitRecord, s historySummary) {
	if len(recs) == 0 {
		fmt.Fprintln(w, "no fit in this database has both a prediction and a trial outcome (memrec fit keeps them from its first prediction on)")
		return
	}
	opt := func(v *float64) string {
		if v == nil {
			return "-"
		}
		return num(*v)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FIT\tBY\tPREDICTED\tBASIS\tLARGEST RAN\tSMALLEST FAILED\tERROR\tTRIALS\t")
	for _, r := range recs {
		e := "limit not reached"
		switch {
		case r.Above:
			e = "ABOVE (failed at or below it)"
		case r.Judged:
			e = fmt.Sprintf("%.1f %% below", 100*r.Below)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", r.ID, r.By, num(r.Predicted), r.Basis, opt(r.LargestRan), opt(r.SmallestFailed), e, r.Trials)
	}
	tw.Flush()
	fmt.Fprintf(w, "within %.0f %% below: %d of %d, above: %d, median trials %s", 100*withinBelow, s.WithinBelow, s.Judged, s.Above, strconv.FormatFloat(s.MedianTrials, 'f', -1, 64))
	if n := s.Fits - s.Judged; n > 0 {
		fmt.Fprintf(w, " (%d of %d fits did not reach the limit: not judged)", n, s.Fits)
	}
	fmt.Fprintln(w)
}
