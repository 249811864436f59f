package compare

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// numbers matches the numbers in a command line, which may change with the
// tag (--batch-size 64) without the job being another.
var numbers = regexp.MustCompile(`[0-9]+(\.[0-9]+)?`)

// otherDifferences says how the runs differ beyond the tag a fit is taken
// against: another tag with more than one value, or commands that differ in
// more than their numbers. A fit across two models or two scripts has a
// slope, but it is not what one of them needs a unit of the tag, so the
// notes say so rather than leave a user to trust it.
func otherDifferences(c *Comparison, tag string) []string {
	values := map[string][]string{}
	for _, r := range c.Reports {
		for k, v := range r.Tags {
			if k != tag && !slices.Contains(values[k], v) {
				values[k] = append(values[k], v)
			}
		}
	}
	var differ []string
	for k, vs := range values {
		if len(vs) > 1 || countWith(c, k) != len(c.Reports) {
			differ = append(differ, k)
		}
	}
	sort.Strings(differ)
	var notes []string
	for _, k := range differ {
		notes = append(notes, fmt.Sprintf("the runs differ in %s as well as %s (%s): the fit treats every difference as the effect of %s", k, tag, describeTag(c, k), tag))
	}
	jobs := map[string]string{}
	for _, r := range c.Reports {
		if r.Job != "" {
			jobs[numbers.ReplaceAllString(r.Job, "N")] = r.Run
		}
	}
	if len(jobs) > 1 {
		var runs []string
		for _, run := range jobs {
			runs = append(runs, fmt.Sprintf("%q", run))
		}
		sort.Strings(runs)
		notes = append(notes, fmt.Sprintf("the runs ran different commands (%s, beyond their numbers): the fit treats every difference as the effect of %s", strings.Join(runs, ", "), tag))
	}
	return notes
}

// countWith is the number of runs that carry tag k.
func countWith(c *Comparison, k string) int {
	n := 0
	for _, r := range c.Reports {
		if _, ok := r.Tags[k]; ok {
			n++
		}
	}
	return n
}

// describeTag lists each run's value of tag k ("-" where it has none).
func describeTag(c *Comparison, k string) string {
	parts := make([]string, 0, len(c.Reports))
	for _, r := range c.Reports {
		v, ok := r.Tags[k]
		if !ok {
			v = "-"
		}
		parts = append(parts, fmt.Sprintf("%s=%s in %q", k, v, r.Run))
	}
	return strings.Join(parts, ", ")
}
