package compare

import (
	"fmt"
	"strings"

	"github.com/memrec/memrec/analysis/replay"
)

// SettingLimit is the largest value compare --by finds under one
// allocator setting, with the headroom asked for: the job's requests,
// scaled as for the default, replayed under the setting. Value is nil
// where not even the lower run's value replays under it.
type SettingLimit struct {
	Setting string   `json:"setting"`
	Value   *float64 `json:"value"`
}

// limitsBySetting sets LimitBySetting where the allocator replay is the
// basis: the default's is MaxFittingValue; each of WhatIfSettings' is the
// pessimistic end of its own replay. The runs that ran out of memory did
// so under the allocator they ran with, so only the default is held
// below them; a setting that packs tighter may serve what they could not.
func (by *ByTag) limitsBySetting() {
	if by.replay == nil || by.Need == nil || by.MaxFittingValue == nil {
		return
	}
	by.LimitBySetting = []SettingLimit{{Setting: "default", Value: by.MaxFittingValue}}
	for _, conf := range replay.WhatIfSettings {
		cfg, err := replay.ParseAllocSettings(conf)
		if err != nil {
			continue
		}
		s := *by.replay
		s.Settings = cfg
		l := SettingLimit{Setting: cfg.String()}
		if v, _, ok := s.FittingPlus(*by.Need, by.replayRoom(by.Available(by.Headroom)), by.beyondGrowth, replay.Pessimistic, by.integer); ok {
			l.Value = by.round(v)
		}
		by.LimitBySetting = append(by.LimitBySetting, l)
	}
}

// LimitBySettingWords says the limit under each setting in one line
// ("batch_size up to 64 with the default allocator, 72 with
// expandable_segments:True, ..."), "" where there are none.
func LimitBySettingWords(by *ByTag) string {
	if by == nil || len(by.LimitBySetting) == 0 {
		return ""
	}
	parts := make([]string, 0, len(by.LimitBySetting))
	for _, l := range by.LimitBySetting {
		v := "none"
		if l.Value != nil {
			v = fmtNum(*l.Value)
		}
		with := "with " + l.Setting
		if l.Setting == "default" {
			with = "with the default allocator"
		}
		parts = append(parts, v+" "+with)
	}
	return fmt.Sprintf("%s up to %s (the allocator replayed under each setting, %g %% headroom)", by.Tag, strings.Join(parts, ", "), 100*by.Headroom)
}
