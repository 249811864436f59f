package viewer

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/memrec/memrec/internal/uplot"
	"github.com/memrec/memrec/report"
)

var (
	//go:embed page.html
	pageHTML string
	//go:embed view.js
	viewJS string
)

// page is the viewer's one page: uPlot and the page's script inline, so
// that the server serves one document and its API and nothing else.
var page = strings.NewReplacer(
	"{{UPLOT_CSS}}", uplot.CSS,
	"{{UPLOT_LICENSE}}", strings.ReplaceAll(uplot.License, "*/", "* /"),
	"{{UPLOT_JS}}", uplot.JS,
	"{{VIEW_JS}}", viewJS,
	"{{TIME_UNITS}}", timeUnits(),
).Replace(pageHTML)

// timeUnits is report.TimeUnits as JSON: the page picks a run's time unit
// by the rule the report's charts use.
func timeUnits() string {
	b, err := json.Marshal(report.TimeUnits)
	if err != nil {
		panic(err) // a fixed table of plain fields
	}
	return string(b)
}

func (s *server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	w.Write([]byte(page))
}
