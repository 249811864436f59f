package analysis

import "math"

// This file holds the small value helpers the passes share: a pointer to a
// number, for the report's optional fields, and whether a float is one.

func i64(v int64) *int64 { return &v }

func f64(v float64) *float64 { return &v }

func intp(v int) *int { return &v }

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
