// Package dashboard holds the web dashboard's static files, embedded in the
// binaries that serve the page (the status function, noetl serve and noetl
// dev serve them at / and /ui/{asset} through api.Options.Dashboard; the
// other functions do not link them).
//
// The front end is deliberately plain: ES modules, hand-written HTML and CSS,
// no framework and no bundler. The page is a few views over JSON routes that
// already exist; a framework would add weight and a build for little gain,
// and modules served as they are written keep the source what the browser
// runs. The one library is the graph layout, @dagrejs/dagre from npm (layered
// layout of directed graphs, the algorithm the step graph needs; elkjs does
// more at ten times the size). It is not committed: `make dashboard` (run by
// `make run` and `make test`) installs it with npm ci from package-lock.json
// and copies its browser build into web/vendor/, which go:embed picks up.
// A binary built without that step still compiles and serves the page, which
// then draws the graph as a plain list of steps and says how to build the
// layout library (Vendored reports which).
//
// Nothing is fetched from elsewhere at run time: every file the page loads
// is one of these, and the Content-Security-Policy the API sends with them
// allows only the page's own origin.
package dashboard

import (
	"bytes"
	"embed"
	"io/fs"
	"path"
	"strings"
)

//go:embed web
var files embed.FS

// LayoutLibrary is the vendored layout library's file under /ui/.
const LayoutLibrary = "dagre.js"

// Asset returns a file of the dashboard by its name under /ui/ ("app.js",
// "dagre.js") with its Content-Type. Names with a directory part are not
// assets; the page itself is Index.
func Asset(name string) (body []byte, ctype string, ok bool) {
	if name == "" || name == "index.html" || strings.ContainsAny(name, `/\\`) || strings.HasPrefix(name, ".") {
		return nil, "", false
	}
	// The page's own files, then what make dashboard put in vendor/ (the
	// layout library and its licence).
	for _, dir := range []string{"web/", "web/vendor/"} {
		if b, err := fs.ReadFile(files, dir+name); err == nil {
			return b, contentType(name), true
		}
	}
	return nil, "", false
}

// Files is the dashboard as the API serves it (api.Options.Dashboard). Only
// the binaries that serve the page link it: the status function, noetl serve
// and noetl dev; the other functions' bootstraps stay without its files.
type Files struct{}

// Index is the page (see Index).
func (Files) Index() []byte { return Index() }

// Asset is a file under /ui/ (see Asset).
func (Files) Asset(name string) ([]byte, string, bool) { return Asset(name) }

// Vendored reports whether the layout library was built into this binary.
func Vendored() bool {
	_, err := fs.Stat(files, "web/vendor/"+LayoutLibrary)
	return err == nil
}

// Index is the page, with a meta tag naming the layout library when this
// binary has it, so the page never requests a file that is not there (a
// failed request is a console error).
func Index() []byte {
	b, _ := fs.ReadFile(files, "web/index.html")
	layout := ""
	if Vendored() {
		layout = LayoutLibrary
	}
	return bytes.Replace(b, []byte("{{layout}}"), []byte(layout), 1)
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".txt", ".md":
		return "text/plain; charset=utf-8"
	}
	return "application/octet-stream"
}
