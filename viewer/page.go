package viewer

import (
	_ "embed"
	"net/http"
	"strings"

	"github.com/memrec/memrec/internal/uplot"
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
).Replace(pageHTML)

func (s *server) page(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:")
	w.Write([]byte(page))
}
