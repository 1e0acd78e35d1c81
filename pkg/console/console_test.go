package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

// TestPages: the start page at static and static/ (its relative links
// resolving from static/ either way), the bundle's files by name with
// their types, nothing else; every answer with the security headers and an
// ETag a browser can revalidate.
func TestPages(t *testing.T) {
	p, err := NewFrom(fstest.MapFS{
		"index.html": {Data: []byte(`<!doctype html><head><base href="./"><script type="module" src="app.js"></script></head>`)},
		"app.js":     {Data: []byte(`console.log(1)`)},
		"app.css":    {Data: []byte(`body{}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path, wantType, wantBody string
		wantStatus               int
	}{
		{"", "text/html; charset=utf-8", `<base href="static/">`, http.StatusOK},
		{"/", "text/html; charset=utf-8", `<base href="./">`, http.StatusOK},
		{"/app.js", "text/javascript; charset=utf-8", "console.log(1)", http.StatusOK},
		{"/app.css", "text/css; charset=utf-8", "body{}", http.StatusOK},
		{"/index.html", "text/html; charset=utf-8", `<base href="./">`, http.StatusOK},
		{"/missing.js", "", "", http.StatusNotFound},
		{"/../app.js", "", "", http.StatusNotFound},
		{"/sub/app.js", "", "", http.StatusNotFound},
	} {
		t.Run(tc.path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/x", nil)
			req.URL.Path = tc.path
			p.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			if tc.wantStatus != http.StatusOK {
				return
			}
			if got := rec.Header().Get("Content-Type"); got != tc.wantType {
				t.Errorf("Content-Type %q, want %q", got, tc.wantType)
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("body %q, want it to hold %q", rec.Body.String(), tc.wantBody)
			}
			for k, v := range securityHeaders {
				if rec.Header().Get(k) != v {
					t.Errorf("%s: %q, want %q", k, rec.Header().Get(k), v)
				}
			}
			etag := rec.Header().Get("ETag")
			again := httptest.NewRequest(http.MethodGet, "/x", nil)
			again.URL.Path = tc.path
			again.Header.Set("If-None-Match", etag)
			rec = httptest.NewRecorder()
			p.ServeHTTP(rec, again)
			if etag == "" || rec.Code != http.StatusNotModified {
				t.Errorf("revalidating with ETag %q: %d, want 304", etag, rec.Code)
			}
		})
	}

	t.Run("the embedded bundle", func(t *testing.T) {
		p, err := New()
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"index.html", "app.js", "app.css"} {
			if _, ok := p.files[name]; !ok {
				t.Errorf("the embedded bundle has no %s", name)
			}
		}
	})

	t.Run("a start page without its base is refused", func(t *testing.T) {
		if _, err := NewFrom(fstest.MapFS{"index.html": {Data: []byte(`<html>`)}}); err == nil {
			t.Error("a start page without <base href=\"./\"> was accepted")
		}
	})
}
