// Package console is the web console agentfs serve offers at /console/:
// a page and one small JavaScript module, embedded in the binary, that
// read and write through the public /v1 API with a token the person
// pastes in (kept in sessionStorage, sent as a Bearer header, never in a
// URL). It needs no build step: plain HTML, CSS and a vanilla ES module.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"strings"
)

//go:embed assets
var assets embed.FS

// Policy is the Content-Security-Policy of every console response: the
// page may load and connect to its own origin only, so no request leaves
// the server's origin and no injected script runs.
const Policy = "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Has reports whether name (a path below the mount point; "" is the
// page) is one of the console's files.
func Has(name string) bool {
	if name == "" {
		return true
	}
	info, err := fs.Stat(assets, "assets/"+name)
	return err == nil && !info.IsDir()
}

// Handler serves the console's files below its mount point (the request
// path with the mount stripped: "" or "index.html" is the page), each
// with Policy and headers that keep it from being framed, sniffed or
// leaking its URL.
func Handler() http.Handler {
	root, err := fs.Sub(assets, "assets")
	if err != nil {
		panic("console: the embedded assets are missing: " + err.Error()) // a build without them is broken
	}
	files := http.FileServerFS(root)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", Policy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cache-Control", "no-cache")
		if strings.HasSuffix(r.URL.Path, "/index.html") {
			r.URL.Path = strings.TrimSuffix(r.URL.Path, "index.html") // FileServer redirects it otherwise
		}
		files.ServeHTTP(w, r)
	})
}
