package report

// TimeUnit is the unit a run's time axis is written in: seconds, minutes
// or hours, chosen from the run's length so that its ticks are few and
// round. The PNGs, the page's timeline and memrec view all take it from
// TimeUnitFor, so one run reads in one unit everywhere.
type TimeUnit struct {
	Name    string  `json:"name"`    // "s", "min", "h"
	Seconds float64 `json:"seconds"` // seconds in one unit
	// UpToS is the longest run (in seconds) written in this unit; the
	// last unit has none (0).
	UpToS float64 `json:"up_to_s,omitempty"`
}

// TimeUnits are the units in the order of the runs' length they serve:
// a run up to three minutes in seconds, up to three hours in minutes,
// longer in hours (each then spans at least three of its units).
var TimeUnits = []TimeUnit{
	{Name: "s", Seconds: 1, UpToS: 180},
	{Name: "min", Seconds: 60, UpToS: 3 * 3600},
	{Name: "h", Seconds: 3600},
}

// TimeUnitFor is the unit of a run that lasts durationS seconds.
func TimeUnitFor(durationS float64) TimeUnit {
	for _, u := range TimeUnits {
		if u.UpToS == 0 || durationS <= u.UpToS {
			return u
		}
	}
	return TimeUnits[len(TimeUnits)-1]
}

// Label is the axis' label: "minutes since start".
func (u TimeUnit) Label() string {
	return map[string]string{"s": "seconds", "min": "minutes", "h": "hours"}[u.Name] + " since start"
}
