// Package console serves the web console's pages: the bundle under dist
// (built from web/console by hack/build-console.sh, committed, so that the
// binary builds without Node.js), embedded in the binary. The pages are
// a single-page app that calls the API from the same origin as its user
// (kubectl proxy or kube-apiserver): it holds no credentials and no
// privileges of its own.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed dist
var dist embed.FS

// StartPage is the console's start page in dist.
const StartPage = "index.html"

// securityHeaders go with every page: the pages load scripts and styles
// from their own origin only, call the API of that origin only, are
// framed by no one, and send no referrer.
var securityHeaders = map[string]string{
	"Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
		"base-uri 'self'; form-action 'none'; frame-ancestors 'none'",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
	"X-Frame-Options":        "DENY",
	"Cache-Control":          "no-cache",
}

// contentTypes are the bundle's types, fixed (the system's MIME tables
// differ from one machine to another).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

type file struct {
	data []byte
	etag string
	kind string
}

// Pages serves the console's files by their path below the console's
// static subresource: "" and "/" are the start page, "/<name>" a file of
// the bundle; anything else is 404.
type Pages struct {
	files map[string]file
	// startNoSlash is the start page for a URL without its last slash
	// (.../static): its relative links resolve from "static/".
	startNoSlash file
}

// New reads the embedded bundle.
func New() (*Pages, error) {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, err
	}
	return NewFrom(sub)
}

// NewFrom reads a bundle from fsys.
func NewFrom(fsys fs.FS) (*Pages, error) {
	p := &Pages{files: map[string]file{}}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		p.files[name] = newFile(name, data)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the console's bundle: %w", err)
	}
	start, ok := p.files[StartPage]
	if !ok {
		return nil, fmt.Errorf("the console's bundle has no %s", StartPage)
	}
	const base = `<base href="./">`
	if !bytes.Contains(start.data, []byte(base)) {
		return nil, fmt.Errorf("the console's %s has no %s", StartPage, base)
	}
	p.startNoSlash = newFile(StartPage, bytes.Replace(start.data, []byte(base), []byte(`<base href="static/">`), 1))
	return p, nil
}

func newFile(name string, data []byte) file {
	sum := sha256.Sum256(data)
	kind, ok := contentTypes[path.Ext(name)]
	if !ok {
		kind = "application/octet-stream"
	}
	return file{data: data, etag: `"` + hex.EncodeToString(sum[:16]) + `"`, kind: kind}
}

// ServeHTTP serves the file r.URL.Path names.
func (p *Pages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var f file
	switch name := r.URL.Path; name {
	case "":
		f = p.startNoSlash
	case "/":
		f = p.files[StartPage]
	default:
		var ok bool
		if f, ok = p.files[strings.TrimPrefix(name, "/")]; !ok {
			http.NotFound(w, r)
			return
		}
	}
	for k, v := range securityHeaders {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", f.kind)
	w.Header().Set("ETag", f.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(f.data))
}
