// Package uplot embeds uPlot (MIT, README.md says which release and how
// it was fetched), the chart library that the report's page and the
// viewer's page draw with, so that both work with no network.
package uplot

import _ "embed"

var (
	// JS is uPlot's IIFE build: it defines the global uPlot.
	//go:embed uPlot.iife.min.js
	JS string
	// CSS is uPlot's style sheet.
	//go:embed uPlot.min.css
	CSS string
	// License is uPlot's licence, to be shipped with every page that embeds it.
	//go:embed LICENSE
	License string
)
