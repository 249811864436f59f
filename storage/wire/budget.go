package wire

import "fmt"

// BudgetSample is what a watched model's own tensors hold in one process on
// one GPU at one allocator sample (memrec.watch): each storage counted once,
// in the first category it is found in (parameters, gradients, optimizer
// state, buffers), on this GPU only, sharded tensors as their local shard.
// It travels in the torch line of the same sample, as optional fields that
// memrec before the budget ignores.
type BudgetSample struct {
	T    int64
	GPU  int
	PID  int
	Rank int // None if absent
	// Bytes by category.
	Params, Grads, OptimizerState, Buffers int64
	// ParamCount and Trainable are elements (not bytes) of the parameters
	// on this GPU, and of those that require a gradient.
	ParamCount, Trainable int64
	Autocast              Autocast
	// GradsAtForward says whether the gradients existed as a forward pass
	// started (after the first backward): FlagNo when zero_grad(set_to_none)
	// frees them before it, so the forward's peak holds none.
	GradsAtForward Flag
	// Optimizer is the optimizer's class name ("AdamW"); "" when watch was
	// given none. OptimizerKeys are its state's tensor names, comma
	// separated ("exp_avg,exp_avg_sq"). DType is the parameters' dtype
	// holding the most bytes ("float32").
	Optimizer, OptimizerKeys, DType string
}

// Fixed is the bytes of the four categories together.
func (b BudgetSample) Fixed() int64 { return b.Params + b.Grads + b.OptimizerState + b.Buffers }

// Autocast says whether the model's forward ran under autocast, as the
// probe saw at the forward after watch (and after each epoch start).
type Autocast uint8

const (
	AutocastUnknown Autocast = iota // not seen yet (no forward since watch)
	AutocastOff
	AutocastOn
)

// String is how the budget names it.
func (a Autocast) String() string {
	switch a {
	case AutocastOff:
		return "off"
	case AutocastOn:
		return "on"
	}
	return "unknown"
}

// MarshalText writes the state's name into JSON.
func (a Autocast) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// UnmarshalText reads a state's name.
func (a *Autocast) UnmarshalText(b []byte) error {
	for _, v := range []Autocast{AutocastUnknown, AutocastOff, AutocastOn} {
		if v.String() == string(b) {
			*a = v
			return nil
		}
	}
	return fmt.Errorf("unknown autocast state %q", b)
}

// BudgetFields are the budget's integer fields of a torch line. The line
// has a budget when it has "params_bytes"; the others then read as 0 when
// absent. Its "autocast" (true or false) and strings ("optimizer",
// "optimizer_state", "dtype") are written beside the table.
var BudgetFields = []Field[BudgetSample]{
	{Name: "params_bytes", Required: true,
		Get: func(s BudgetSample) int64 { return s.Params }, Set: func(s *BudgetSample, v int64) { s.Params = v }},
	{Name: "grads_bytes",
		Get: func(s BudgetSample) int64 { return s.Grads }, Set: func(s *BudgetSample, v int64) { s.Grads = v }},
	{Name: "optimizer_bytes",
		Get: func(s BudgetSample) int64 { return s.OptimizerState }, Set: func(s *BudgetSample, v int64) { s.OptimizerState = v }},
	{Name: "buffers_bytes",
		Get: func(s BudgetSample) int64 { return s.Buffers }, Set: func(s *BudgetSample, v int64) { s.Buffers = v }},
	{Name: "params",
		Get: func(s BudgetSample) int64 { return s.ParamCount }, Set: func(s *BudgetSample, v int64) { s.ParamCount = v }},
	{Name: "trainable",
		Get: func(s BudgetSample) int64 { return s.Trainable }, Set: func(s *BudgetSample, v int64) { s.Trainable = v }},
}

// BudgetStrings are the budget's string fields, in stored order.
var BudgetStrings = []struct {
	Name string
	Get  func(BudgetSample) string
	Set  func(*BudgetSample, string)
}{
	{"optimizer", func(s BudgetSample) string { return s.Optimizer }, func(s *BudgetSample, v string) { s.Optimizer = v }},
	{"optimizer_state", func(s BudgetSample) string { return s.OptimizerKeys }, func(s *BudgetSample, v string) { s.OptimizerKeys = v }},
	{"dtype", func(s BudgetSample) string { return s.DType }, func(s *BudgetSample, v string) { s.DType = v }},
}

// Flag is a yes or no the probe may not know yet.
type Flag uint8

const (
	FlagUnknown Flag = iota
	FlagNo
	FlagYes
)

// String is how the budget names it.
func (f Flag) String() string {
	switch f {
	case FlagNo:
		return "no"
	case FlagYes:
		return "yes"
	}
	return "unknown"
}

// MarshalText writes the flag's name into JSON.
func (f Flag) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// UnmarshalText reads a flag's name.
func (f *Flag) UnmarshalText(b []byte) error {
	for _, v := range []Flag{FlagUnknown, FlagNo, FlagYes} {
		if v.String() == string(b) {
			*f = v
			return nil
		}
	}
	return fmt.Errorf("unknown flag %q", b)
}

// flag reads an optional true or false: FlagUnknown when absent or null.
func (f *fields) flag(key string) Flag {
	v := f.o.Get(key)
	if v == nil {
		return FlagUnknown
	}
	switch string(v.MarshalTo(nil)) {
	case "true":
		return FlagYes
	case "false":
		return FlagNo
	case "null":
		return FlagUnknown
	}
	f.fail("%q: want true or false, got %s", key, v)
	return FlagUnknown
}

// budget reads the budget fields of a torch line; ok is false when the
// line has none.
func (f *fields) budget(t TorchSample) (b BudgetSample, ok bool) {
	if v := f.o.Get(BudgetFields[0].Name); v == nil {
		return b, false
	}
	b = BudgetSample{T: t.T, GPU: t.GPU, PID: t.PID, Rank: t.Rank}
	readFields(f, &b, BudgetFields)
	for _, sf := range BudgetStrings {
		sf.Set(&b, f.str(sf.Name, false))
	}
	b.Autocast = [...]Autocast{AutocastUnknown, AutocastOff, AutocastOn}[f.flag("autocast")]
	b.GradsAtForward = f.flag("grads_at_forward")
	return b, true
}

// appendBudget appends the budget's fields to a torch line being written
// (before its closing brace).
func appendBudget(b []byte, s BudgetSample) []byte {
	b = appendFields(b, &s, BudgetFields)
	switch s.Autocast {
	case AutocastOn:
		b = append(b, `,"autocast":true`...)
	case AutocastOff:
		b = append(b, `,"autocast":false`...)
	}
	switch s.GradsAtForward {
	case FlagYes:
		b = append(b, `,"grads_at_forward":true`...)
	case FlagNo:
		b = append(b, `,"grads_at_forward":false`...)
	}
	for _, sf := range BudgetStrings {
		if v := sf.Get(s); v != "" {
			b = append(b, ',', '"')
			b = append(b, sf.Name...)
			b = append(b, '"', ':')
			b = appendJSONString(b, v)
		}
	}
	return b
}

// AppendTorchBudget appends s with the budget of the same sample as one
// torch line, newline included.
func AppendTorchBudget(b []byte, s TorchSample, bs BudgetSample) []byte {
	b = AppendTorch(b, s)
	b = b[:len(b)-2] // the closing brace and newline
	b = appendBudget(b, bs)
	return append(b, '}', '\n')
}
