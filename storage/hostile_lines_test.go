package storage

import (
	"fmt"
	"strings"
	"testing"

	"github.com/memrec/memrec/storage/wire"
)

// TestImportHostileBudgetAndSiteLines feeds budget (torch) and site
// snapshot lines with hostile values through the wire parser and the
// store: each is refused with its file, line and field, nothing kept, or
// (unknown keys, a figure at its bound) kept as sent.
func TestImportHostileBudgetAndSiteLines(t *testing.T) {
	const head = `{"type":"run","name":"a","start_ns":1000000000000000000}` + "\n" + `{"type":"gpu","gpu":0}` + "\n"
	torch := func(budget string) string {
		return head + `{"type":"torch","t_ns":1000000000000000001,"gpu":0,"pid":7,"allocated_bytes":5,"reserved_bytes":9,` + budget + "}"
	}
	sites := func(fields string) string {
		return head + `{"type":"sites","t_ns":1000000000000000001,"gpu":0,"pid":7,"reason":"timer"` + fields + "}"
	}
	// A site with fields after its file and line (the parser reads a
	// key's first value).
	site := func(fields string) string { return sites(`,"sites":[{"file":"a.py","line":1` + fields + `}]`) }
	long := func(n int) string { return strings.Repeat("x", n) }
	many := func(n int) string {
		return sites(`,"sites":[` + strings.Repeat(`{"file":"a.py","line":1},`, n-1) + `{"file":"a.py","line":1}]`)
	}
	for _, c := range []struct{ name, input, want string }{
		// Budgets.
		{"negative bytes", torch(`"params_bytes":-1`), "bad.jsonl:3: torch: params_bytes is negative (-1)"},
		{"max int64 twice", torch(`"params_bytes":9223372036854775807,"grads_bytes":9223372036854775807`), "bad.jsonl:3: torch: params_bytes 9223372036854775807 is past"},
		{"past int64", torch(`"params_bytes":9223372036854775808`), `bad.jsonl:3: torch: "params_bytes": not an integer`},
		{"just past the bound", torch(fmt.Sprintf(`"params_bytes":1,"optimizer_bytes":%d`, int64(MaxFigure)+1)), "bad.jsonl:3: torch: optimizer_bytes 1125899906842625 is past"},
		{"a float", torch(`"params_bytes":1e300`), `bad.jsonl:3: torch: "params_bytes": not an integer: 1e300`},
		{"NaN", torch(`"params_bytes":NaN`), `bad.jsonl:3: torch: "params_bytes": not an integer: NaN`},
		{"Infinity", torch(`"params_bytes":Infinity`), "bad.jsonl:3: malformed JSON"},
		{"a string for bytes", torch(`"params_bytes":"1"`), `bad.jsonl:3: torch: "params_bytes": want an integer, got string`},
		{"negative count", torch(`"params_bytes":1,"params":-5`), "bad.jsonl:3: torch: params is negative (-5)"},
		{"more trainable than params", torch(`"params_bytes":1,"params":5,"trainable":9`), "bad.jsonl:3: torch: trainable (9) is more than params (5)"},
		{"absurd count", torch(`"params_bytes":1,"params":9223372036854775807,"trainable":1`), "bad.jsonl:3: torch: params 9223372036854775807 is past"},
		{"long optimizer", torch(`"params_bytes":1,"optimizer":"` + long(100000) + `"`), "bad.jsonl:3: torch: optimizer of 100000 bytes (at most 1024)"},
		{"long dtype", torch(`"params_bytes":1,"dtype":"` + long(MaxTextBytes+1) + `"`), "bad.jsonl:3: torch: dtype of 1025 bytes (at most 1024)"},
		{"autocast not a bool", torch(`"params_bytes":1,"autocast":"yes"`), `bad.jsonl:3: torch: "autocast": want true or false, got "yes"`},
		{"unknown keys", torch(`"params_bytes":1,"zzz":{"a":[1,2]},"params_bytez":-1`), ""},
		{"figures at the bound", torch(fmt.Sprintf(`"params_bytes":%d,"grads_bytes":%d,"optimizer_bytes":%d,"buffers_bytes":%d,"params":%d,"trainable":%d`,
			MaxFigure, MaxFigure, MaxFigure, MaxFigure, MaxFigure, MaxFigure)), ""},
		// Site snapshots.
		{"negative line", sites(`,"sites":[{"file":"a.py","line":-3}]`), `bad.jsonl:3: sites: sites[0]: "line" is negative (-3)`},
		{"huge line", sites(`,"sites":[{"file":"a.py","line":9223372036854775807}]`), "bad.jsonl:3: sites: site a.py:9223372036854775807: line 9223372036854775807 is past 2147483647"},
		{"max int64 live bytes twice", sites(`,"sites":[{"file":"a.py","line":1,"live_bytes":9223372036854775807},{"file":"b.py","line":1,"live_bytes":9223372036854775807}]`),
			"bad.jsonl:3: sites: live_bytes 9223372036854775807 is past"},
		{"negative blocks", site(`,"live_blocks":-1`), `bad.jsonl:3: sites: sites[0]: "live_blocks" is negative (-1)`},
		{"absurd allocs", site(`,"allocs":9223372036854775807`), "bad.jsonl:3: sites: allocs 9223372036854775807 is past"},
		{"absurd other sites", sites(`,"other":{"sites":9223372036854775807}`), "bad.jsonl:3: sites: sites 9223372036854775807 is past"},
		{"NaN sampling", sites(`,"sampled_every":NaN`), `bad.jsonl:3: sites: "sampled_every": want a number from 1 to 1e9, got NaN`},
		{"huge sampling", sites(`,"sampled_every":1e308`), `"sampled_every": want a number from 1 to 1e9, got 1e308`},
		{"negative bad", sites(`,"bad":-1`), `bad.jsonl:3: sites: "bad" is negative (-1)`},
		{"huge since", sites(`,"since_ns":9223372036854775807`), "bad.jsonl:3: sites: site <untracked>: since_ns 9223372036854775807 is past 2200"},
		{"since a time", sites(`,"since_ns":1795991897963059000`), ""},
		{"epoch past int32", sites(`,"epoch":4294967296`), `bad.jsonl:3: sites: "epoch" is too large (4294967296)`},
		{"long file", sites(`,"sites":[{"file":"` + long(100000) + `","line":1}]`), "bad.jsonl:3: sites: site's file of 100000 bytes (at most 4096)"},
		{"long func", site(`,"func":"` + long(MaxSiteText+1) + `"`), "bad.jsonl:3: sites: site's func of 4097 bytes (at most 4096)"},
		{"long stack", site(`,"stack":["` + long(MaxStackText) + `","b"]`), "bad.jsonl:3: sites: site's stack of 65538 bytes (at most 65536)"},
		{"long name", sites(`,"name":"` + long(100000) + `"`), "bad.jsonl:3: sites: site's name of 100000 bytes (at most 4096)"},
		{"too many sites", many(wire.MaxSites + 1), `bad.jsonl:3: sites: "sites": 4097 sites (at most 4096`},
		{"sites not objects", sites(`,"sites":[1,2]`), "bad.jsonl:3: sites: sites[0]: want an object, got number"},
		{"unknown keys", sites(`,"zzz":1,"untracked":{"live_bytes":1,"qqq":[]},"sites":[{"file":"a.py","line":1,"yyy":"z"}]`), ""},
		{"as many sites as allowed", many(wire.MaxSites), ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := openTestDB(t)
			runs, err := loadString(db, "bad.jsonl", c.input)
			if c.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if n := runs[0].Counts.Budgets + runs[0].Counts.Sites; n == 0 {
					t.Fatalf("kept no budget or site row: %+v", runs[0].Counts)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v\nwant %q", err, c.want)
			}
			if runs, _ := db.Runs(); len(runs) != 0 {
				t.Fatalf("kept %v", runs)
			}
		})
	}
}
