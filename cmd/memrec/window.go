package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/memrec/memrec/analysis"
	"github.com/memrec/memrec/storage"
)

// windowOptions are --from and --to: the part of a run a command looks at.
type windowOptions struct {
	from, to string
}

const boundHelp = "seconds since the run's start (90, 1m30s), a local clock time (14:03:10), a date and time (2026-11-29T14:03:10Z), epoch:N or step:N"

func addWindowFlags(cmd *cobra.Command, w *windowOptions) {
	f := cmd.Flags()
	f.StringVar(&w.from, "from", "", "look only at the run from this moment: "+boundHelp)
	f.StringVar(&w.to, "to", "", "look only at the run up to this moment (epoch:N and step:N include that epoch or step)")
}

// openRun opens the database for reading and finds run ref, restricted to
// the window w. The caller closes the database.
func openRun(g *globals, ref string, w windowOptions) (*storage.DB, storage.Run, error) {
	db, err := g.openRead()
	if err != nil {
		return nil, storage.Run{}, err
	}
	r, err := db.Run(ref)
	if err == nil {
		r, err = w.apply(db, r)
	}
	if err != nil {
		db.Close()
		return nil, storage.Run{}, err
	}
	return db, r, nil
}

// apply restricts a run to the window; without --from and --to it returns
// the run as it is.
func (w windowOptions) apply(db *storage.DB, r storage.Run) (storage.Run, error) {
	from, err := parseBound("--from", w.from)
	if err != nil {
		return r, err
	}
	to, err := parseBound("--to", w.to)
	if err != nil {
		return r, err
	}
	out, err := analysis.Window(db, r, from, to)
	if errors.Is(err, analysis.ErrNoEpochMarks) {
		flag, value := "--from", w.from
		if from.Kind != analysis.BoundEpoch {
			flag, value = "--to", w.to
		}
		return r, fmt.Errorf("run %s: %s %q: %w; epochs inferred from device memory are not accepted as bounds: pass the times memrec analyze shows for them (%s 12.5)",
			r.Name, flag, value, err, flag)
	}
	if errors.Is(err, analysis.ErrEmptyWindow) {
		return r, fmt.Errorf("run %s: --from %q --to %q: %w; the run spans %s to %s", r.Name, w.from, w.to, err,
			time.Unix(0, r.StartNS).UTC().Format(time.RFC3339), time.Unix(0, max(r.EndNS, r.StartNS)).UTC().Format(time.RFC3339))
	}
	if err != nil {
		return r, fmt.Errorf("run %s: --from %q --to %q: %w", r.Name, w.from, w.to, err)
	}
	return out, nil
}

// parseBound reads one window bound. Accepted forms, tried in this order:
// epoch:N, step:N; a clock time HH:MM[:SS[.fff]] (local); an RFC 3339 time
// or "YYYY-MM-DD HH:MM:SS" (local); a Go duration (90s, 1m30s); a number
// of seconds.
func parseBound(flag, s string) (analysis.Bound, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return analysis.Bound{}, nil
	}
	bad := func(why string) (analysis.Bound, error) {
		return analysis.Bound{}, fmt.Errorf("%s %q: %s; want %s", flag, s, why, boundHelp)
	}
	if kind, num, ok := strings.Cut(s, ":"); ok && (kind == "epoch" || kind == "step") {
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 {
			return bad(kind + " needs a whole number ≥ 0")
		}
		k := analysis.BoundEpoch
		if kind == "step" {
			k = analysis.BoundStep
		}
		return analysis.Bound{Kind: k, N: n}, nil
	}
	for _, layout := range []string{"15:04:05.999999999", "15:04"} {
		if t, err := time.Parse(layout, s); err == nil {
			since := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute +
				time.Duration(t.Second())*time.Second + time.Duration(t.Nanosecond())
			return analysis.Bound{Kind: analysis.BoundClock, Clock: since}, nil
		}
	}
	// A date is checked on the calendar before it becomes nanoseconds:
	// past 2262 those wrap, and 9999-12-31 would read as 1816.
	at := func(t time.Time) (analysis.Bound, error) {
		if t.Before(time.Unix(0, storage.EarliestTime)) || !t.Before(time.Unix(0, storage.LatestTime)) {
			return bad("outside 1970..2200, the times a run may hold")
		}
		return analysis.Bound{Kind: analysis.BoundTime, TimeNS: t.UnixNano()}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return at(t)
	}
	for _, layout := range []string{"2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return at(t)
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return bad("a time since the start cannot be negative")
		}
		return analysis.Bound{Kind: analysis.BoundSeconds, Seconds: d.Seconds()}, nil
	}
	if v, err := strconv.ParseFloat(s, 64); err == nil {
		if v < 0 || v != v || v > 1e9 {
			return bad("seconds since the start must be a number from 0")
		}
		return analysis.Bound{Kind: analysis.BoundSeconds, Seconds: v}, nil
	}
	return bad("not a time")
}
