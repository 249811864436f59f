package report

import "github.com/memrec/memrec/analysis/growth"

// verdictWords are the leak verdicts as a chart title or a page's heading
// says them: words, not the JSON report's keys.
var verdictWords = map[growth.Verdict]string{
	growth.VerdictLeak:         "leak",
	growth.VerdictCacheGrowth:  "cache growth",
	growth.VerdictUnseenGrowth: "growth PyTorch does not see",
	growth.VerdictStartup:      "start-up only",
	growth.VerdictNoLeak:       "no leak",
	growth.VerdictInsufficient: "not enough data",
}

// verdictText is v in words; a verdict this table does not know (one
// from a later version's JSON) is its key with spaces.
func verdictText(v growth.Verdict) string {
	if w, ok := verdictWords[v]; ok {
		return w
	}
	b := []byte(v.String())
	for i := range b {
		if b[i] == '_' {
			b[i] = ' '
		}
	}
	return string(b)
}
