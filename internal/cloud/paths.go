package cloud

import (
	"net/http"
	"path"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
)

// servePathsAsSent serves a request on its canonical path instead of letting http.ServeMux
// redirect it there (301/307). A redirect is never right for these services: every SDK follows
// it without its Authorization header, and the retried request fails with 401. ARM's paths
// lose only their extra leading slashes ("//subscriptions/..." is what SDKs send for a scope
// that starts with "/"); ARM answers any other empty segment itself, as InvalidResourceId.
// Every other path is cleaned the way ServeMux would have redirected it ("/t/./x", "/t//x",
// "/a/../t/x"). Proxy requests (CONNECT, absolute-form) pass through untouched.
func servePathsAsSent(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect || r.URL.Host != "" {
			next.ServeHTTP(w, r)
			return
		}
		clean := canonicalPath(r.URL.Path)
		if clean == r.URL.Path {
			next.ServeHTTP(w, r)
			return
		}
		r2 := new(http.Request)
		*r2 = *r
		u := *r.URL
		u.Path, u.RawPath = clean, ""
		r2.URL = &u
		next.ServeHTTP(w, r2)
	})
}

// canonicalPath is the path a request is served on (see servePathsAsSent).
func canonicalPath(p string) string {
	if p == "" {
		return "/"
	}
	if arm.Handles(p) {
		return arm.CleanPath(p)
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	// Keep a trailing slash, as ServeMux's own cleaning does.
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}
