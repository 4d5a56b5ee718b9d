// Package webview is the local cloud's read-only web view: its resources as a tree, its
// identities with their federated credentials and role assignments, "check access" and the
// request log with the reason for each refusal. The cloud mounts it under Prefix on its own
// TLS listener; only loopback clients holding the token in the data dir's TokenFile get in.
package webview

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/fsutil"
)

// Prefix is where the view is served on the cloud's listener.
const Prefix = "/_cerulean/view"

// TokenFileName is the file in the data dir holding the login token (mode 0600).
const TokenFileName = "webview-token"

const cookieName = "cerulean_view"

// Options are what the view reads. It changes nothing.
type Options struct {
	DataDir        string
	ARM            *arm.Service
	Authz          *authz.Authorizer
	Directory      *entra.Directory
	Requests       *reqlog.Log
	TenantID       string
	SubscriptionID string
	OwnerObjectID  string       // whose view of ARM's JSON the tree shows (the bootstrap principal)
	DataPlanes     DataPlanes   // what the data planes hold; nil = the tree shows ARM only
	Logger         *slog.Logger // nil = discard
}

// DataPlanes reads what a resource's data plane holds, for the tree: names, never values.
type DataPlanes interface {
	// State is one line per item (a database, a secret and its versions), nil for a resource
	// without a data plane the cloud runs.
	State(ctx context.Context, res arm.Resource) ([]string, error)
}

// View serves the pages.
type View struct {
	o     Options
	token string
	mux   *http.ServeMux
}

// New returns the view, creating the login token on first use (kept across restarts, so an
// open browser stays logged in).
func New(o Options) (*View, error) {
	tok, err := ensureToken(filepath.Join(o.DataDir, TokenFileName))
	if err != nil {
		return nil, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	v := &View{o: o, token: tok, mux: http.NewServeMux()}
	v.routes()
	return v, nil
}

// TokenFile is the token's path for a data dir.
func TokenFile(dataDir string) string { return filepath.Join(dataDir, TokenFileName) }

// LoginURL is the URL that logs a browser in, given the cloud's base URL and the token.
func LoginURL(base, token string) string { return base + Prefix + "/login?token=" + token }

func ensureToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) >= 32 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read web view token: %w", err)
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("make web view token: %w", err)
	}
	tok := hex.EncodeToString(raw)
	if err := fsutil.WriteFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write web view token: %w", err)
	}
	return tok, nil
}

// ServeHTTP answers only loopback clients with the token (the login URL) or its cookie; every
// other request gets a bare 401.
func (v *View) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	if !loopback(r.RemoteAddr) {
		unauthorized(w)
		return
	}
	if r.URL.Path == Prefix+"/login" {
		v.login(w, r)
		return
	}
	c, err := r.Cookie(cookieName)
	if err != nil || !v.valid(c.Value) {
		unauthorized(w)
		return
	}
	v.mux.ServeHTTP(w, r)
}

func (v *View) valid(tok string) bool {
	return subtle.ConstantTimeCompare([]byte(tok), []byte(v.token)) == 1
}

// login trades the token in the URL for a cookie and sends the browser on without the token
// in its address bar.
func (v *View) login(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet || !v.valid(r.URL.Query().Get("token")) {
		unauthorized(w)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: v.token, Path: Prefix, HttpOnly: true, Secure: true, SameSite: http.SameSiteStrictMode})
	http.Redirect(w, r, Prefix+"/", http.StatusSeeOther)
}

func unauthorized(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write([]byte("401 Unauthorized\n"))
}

func loopback(remote string) bool {
	host, _, err := net.SplitHostPort(remote)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// caller is whose view of ARM the tree shows.
func (v *View) caller() arm.Caller {
	return arm.Caller{ObjectID: v.o.OwnerObjectID, TenantID: v.o.TenantID}
}

// principalNames maps object ids to display names, for pages that name principals.
func (v *View) principalNames(ctx context.Context) (map[string]entra.Principal, error) {
	ps, err := v.o.Directory.Principals(ctx, v.o.TenantID)
	if err != nil {
		return nil, fmt.Errorf("list principals: %w", err)
	}
	out := make(map[string]entra.Principal, len(ps))
	for _, p := range ps {
		out[strings.ToLower(p.ObjectID)] = p
	}
	return out, nil
}
