package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// durationValue is a duration flag whose errors say what to write: a
// number without a unit is the usual slip ("--interval 10"), and
// time.ParseDuration only says "time: missing unit".
type durationValue time.Duration

// durationVar defines a duration flag like pflag's DurationVar.
func durationVar(f *pflag.FlagSet, p *time.Duration, name string, value time.Duration, usage string) {
	*p = value
	f.Var((*durationValue)(p), name, usage)
}

func (d *durationValue) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err == nil {
		*d = durationValue(v)
		return nil
	}
	if _, numErr := strconv.ParseFloat(strings.TrimSpace(s), 64); numErr == nil {
		return fmt.Errorf("%s has no unit: write %sms, %ss or %sm (units: µs, ms, s, m, h)", s, s, s, s)
	}
	return fmt.Errorf("not a duration (write it like 10ms, 1.5s, 2m or 1h30m)")
}

func (d *durationValue) String() string { return time.Duration(*d).String() }

func (d *durationValue) Type() string { return "duration" }
