package storage

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/memrec/memrec/storage/wire"

	"github.com/memrec/memrec/testsupport/linetest"
)

// budgetRun is a run whose allocator samples carry the watched model's
// budget on some lines and not on others (before watch, another process).
const budgetRun = `{"type":"run","name":"watched","start_ns":1000000000}
{"type":"gpu","gpu":0,"total_bytes":1000000000}
{"type":"torch","t_ns":1001000000,"gpu":0,"pid":7,"rank":0,"allocated_bytes":5000,"reserved_bytes":8192,"active_bytes":5000,"inactive_split_bytes":0,"peak_allocated_bytes":6000,"segments":1,"alloc_retries":0,"ooms":0}
{"type":"torch","t_ns":1002000000,"gpu":0,"pid":7,"rank":0,"allocated_bytes":5000,"reserved_bytes":8192,"active_bytes":5000,"inactive_split_bytes":0,"peak_allocated_bytes":7000,"segments":1,"alloc_retries":0,"ooms":0,"params_bytes":1024,"grads_bytes":1024,"optimizer_bytes":2048,"buffers_bytes":32,"params":256,"trainable":256,"autocast":false,"grads_at_forward":false,"optimizer":"AdamW","optimizer_state":"exp_avg,exp_avg_sq","dtype":"float32"}
{"type":"torch","t_ns":1003000000,"gpu":0,"pid":7,"rank":0,"allocated_bytes":5000,"reserved_bytes":8192,"active_bytes":5000,"inactive_split_bytes":0,"peak_allocated_bytes":7000,"segments":1,"alloc_retries":0,"ooms":0,"params_bytes":1024,"grads_bytes":0,"optimizer_bytes":2048,"buffers_bytes":32,"params":256,"trainable":256,"autocast":true}
{"type":"torch","t_ns":1003000000,"gpu":0,"pid":8,"allocated_bytes":10,"reserved_bytes":20,"active_bytes":10,"inactive_split_bytes":0,"peak_allocated_bytes":10,"segments":1,"alloc_retries":0,"ooms":0}
`

func TestBudgetRoundTrip(t *testing.T) {
	db := openTestDB(t)
	runs, err := loadString(db, "budget.jsonl", budgetRun)
	if err != nil {
		t.Fatal(err)
	}
	r := runs[0]
	if r.Counts.Budgets != 2 || r.Counts.TorchSamples != 4 {
		t.Fatalf("counts %+v, want 2 budget and 4 torch samples", r.Counts)
	}
	var got []BudgetSample
	it := db.BudgetSamples(r, 0, 7, MinTime, MaxTime)
	for it.Next() {
		got = append(got, it.At())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	want := []BudgetSample{
		{T: 1002000000, GPU: 0, PID: 7, Rank: 0, Params: 1024, Grads: 1024, OptimizerState: 2048, Buffers: 32, ParamCount: 256,
			Trainable: 256, Autocast: AutocastOff, GradsAtForward: wire.FlagNo, Optimizer: "AdamW", OptimizerKeys: "exp_avg,exp_avg_sq", DType: "float32"},
		{T: 1003000000, GPU: 0, PID: 7, Rank: 0, Params: 1024, OptimizerState: 2048, Buffers: 32, ParamCount: 256,
			Trainable: 256, Autocast: AutocastOn},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("budget samples\n got %+v\nwant %+v", got, want)
	}
	series, _ := db.Series(r)
	if !slices.Contains(series, SeriesRef{Kind: SeriesBudget, GPU: 0, PID: 7}) {
		t.Fatalf("series %v lack the budget", series)
	}
	var out bytes.Buffer
	if err := exportStored(&out, db, r); err != nil {
		t.Fatal(err)
	}
	if w, g := linetest.Normalize(t, []byte(budgetRun)), linetest.Normalize(t, out.Bytes()); !slices.Equal(w, g) {
		t.Fatalf("export differs:\n%s\nwant\n%s", strings.Join(g, "\n"), strings.Join(w, "\n"))
	}
}

func TestBudgetBadFields(t *testing.T) {
	db := openTestDB(t)
	head := "{\"type\":\"run\",\"name\":\"x\",\"start_ns\":1000000000}\n{\"type\":\"gpu\",\"gpu\":0}\n"
	for _, c := range []struct{ line, want string }{
		{`"params_bytes":-1`, `params_bytes is negative`},
		{`"params_bytes":1,"autocast":1`, `"autocast": want true or false`},
		{`"params_bytes":1,"optimizer":3`, `"optimizer": want a string`},
	} {
		in := head + `{"type":"torch","t_ns":1001000000,"gpu":0,"pid":7,"allocated_bytes":1,"reserved_bytes":2,` + c.line + "}\n"
		_, err := loadString(db, "bad.jsonl", in)
		if err == nil || !strings.Contains(err.Error(), "bad.jsonl:3") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want bad.jsonl:3 and %q", c.line, err, c.want)
		}
	}
	if runs, _ := db.Runs(); len(runs) != 0 {
		t.Fatalf("a refused import kept %d runs", len(runs))
	}
}

// TestBudgetSchemaFollowsWireTable sets every field of the budget's wire
// tables to its own value, then puts and gets the row: a field put or get
// forgets comes back wrong. The rank (the torch line's) and autocast are
// the two columns beside the table.
func TestBudgetSchemaFollowsWireTable(t *testing.T) {
	v := BudgetSample{T: 7000, GPU: 2, PID: 9, Rank: 3, Autocast: AutocastOn, GradsAtForward: wire.FlagNo}
	for i, f := range wire.BudgetFields {
		f.Set(&v, int64(101+i))
	}
	for i, f := range wire.BudgetStrings {
		f.Set(&v, strings.Repeat("s", i+1))
	}
	if want := len(wire.BudgetFields) + 3; len(budgetSchema.ints) != want {
		t.Errorf("%d int columns, want the table's and rank, autocast and grads_at_forward", len(budgetSchema.ints))
	}
	if got := roundTrip(t, &budgetSchema, v); got != v {
		t.Errorf("budget came back %+v, want %+v", got, v)
	}
}
