// Package storage is the local cloud's storage data planes: blob, queue and table for every
// storage account, served by one Azurite process behind a front that authorizes each request
// as Azure does (Shared Key and Shared Key Lite with the account's two keys as ARM holds them,
// account and service SAS, Entra ID tokens with the storage data roles) and then forwards it to
// Azurite signed with Azurite's own key. Azurite never sees a client's credentials.
package storage

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/entra"
)

// Audience is the resource storage tokens are issued for (any account); a token for one
// account's endpoint (https://NAME.blob.core.windows.net) is accepted there too.
const Audience = "https://storage.azure.com"

// ErrAccountNotFound is returned by Accounts for a name no storage account has.
var ErrAccountNotFound = errors.New("storage account not found")

// Account is what the front needs of a storage account.
type Account struct {
	Name     string
	ID       string   // the ARM id: the scope of role assignments
	TenantID string   // tokens must come from it
	Keys     [][]byte // key1, key2 as listKeys returns them (decoded)
}

// Accounts finds storage accounts by name (the Microsoft.Storage provider).
type Accounts interface {
	Account(ctx context.Context, name string) (Account, error)
}

// TokenVerifier checks access tokens of the cloud's Entra ID (entra.Service implements it).
type TokenVerifier interface {
	Verify(ctx context.Context, raw string, accept func(aud string) bool) (*entra.AccessClaims, error)
}

// Authorizer answers RBAC checks (authz.Authorizer implements it); authz.ErrDenied when no
// role assignment grants the action.
type Authorizer interface {
	Check(ctx context.Context, principalID, action, scope string) error
	CheckData(ctx context.Context, principalID, dataAction, scope string) error
}

// Options configure the front.
type Options struct {
	Accounts Accounts
	Tokens   TokenVerifier
	Authz    Authorizer
	Azurite  *Azurite
	Clock    func() time.Time
	Logger   *slog.Logger // never receives keys, signatures or tokens
}

// Service is the front of the storage data planes.
type Service struct {
	o     Options
	proxy *httputil.ReverseProxy
}

// New returns the front.
func New(o Options) *Service {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{o: o}
	// Loopback to Azurite: never through a proxy, and enough idle connections for an SDK's
	// parallel block uploads.
	// Large buffers both ways: a blob's bytes cross in few reads and writes (4 KiB and 32 KiB
	// are the defaults).
	tr := &http.Transport{
		MaxIdleConns: 256, MaxIdleConnsPerHost: 64, IdleConnTimeout: 90 * time.Second,
		WriteBufferSize: copyBufferSize, ReadBufferSize: copyBufferSize,
	}
	s.proxy = &httputil.ReverseProxy{
		Transport:      tr,
		BufferPool:     &copyBuffers,
		Rewrite:        func(*httputil.ProxyRequest) {}, // the request is rewritten before
		ModifyResponse: s.modifyResponse,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.o.Logger.ErrorContext(r.Context(), "Forwarding to Azurite failed", "err", err)
			writeError(w, r, hostService(r.Host), http.StatusServiceUnavailable, "ServerBusy", "The storage engine (Azurite) is not available.")
		},
		// 0: bodies of known length are copied in large buffered writes; streamed ones
		// (unknown length) are still flushed at once.
		FlushInterval: 0,
	}
	return s
}

// copyBufferSize is the size of the buffers a forward copies a body with.
const copyBufferSize = 256 << 10

// copyBuffers are the response-body buffers of every forward (httputil.BufferPool).
var copyBuffers bufferPool

type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, copyBufferSize)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }

// EngineReady reports, without waiting, whether Azurite listens (an account created now is
// served at once).
func (s *Service) EngineReady() bool { return s.o.Azurite.Ready() }

// WaitEngine starts Azurite when it does not run and waits until it listens: nil, or why it
// did not start.
func (s *Service) WaitEngine(ctx context.Context) error { return s.o.Azurite.Wait(ctx) }

// Suffixes are the public DNS suffixes of the data planes, by service.
var Suffixes = map[string]string{"blob": ".blob.core.windows.net", "queue": ".queue.core.windows.net", "table": ".table.core.windows.net"}

// ParseHost returns the account and service of NAME.{blob,queue,table}.core.windows.net
// (canonical host: lower case, no port).
func ParseHost(host string) (account, service string, ok bool) {
	for svc, suffix := range Suffixes {
		if name, found := strings.CutSuffix(host, suffix); found && validAccount(name) {
			return name, svc, true
		}
	}
	return "", "", false
}

func hostService(host string) string {
	h := strings.ToLower(host)
	if i := strings.IndexByte(h, ':'); i >= 0 {
		h = h[:i]
	}
	_, svc, _ := ParseHost(h)
	return svc
}

func validAccount(name string) bool {
	if len(name) < 3 || len(name) > 24 {
		return false
	}
	for _, c := range name {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// Handler serves host (canonical); ErrAccountNotFound when no account answers there, which a
// router reports as the name not resolving.
func (s *Service) Handler(ctx context.Context, host string) (http.Handler, error) {
	name, svc, ok := ParseHost(host)
	if !ok {
		return nil, ErrAccountNotFound
	}
	if _, err := s.o.Accounts.Account(ctx, name); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, name, svc) }), nil
}

func (s *Service) serve(w http.ResponseWriter, r *http.Request, name, svc string) {
	acct, err := s.o.Accounts.Account(r.Context(), name)
	if errors.Is(err, ErrAccountNotFound) {
		writeError(w, r, svc, http.StatusNotFound, "ResourceNotFound", "The specified resource does not exist.")
		return
	}
	if err != nil {
		writeError(w, r, svc, http.StatusInternalServerError, "InternalError", "The server encountered an internal error.")
		return
	}
	o := classify(r, svc)
	if e := s.authorize(r, acct, svc, o); e != nil {
		s.o.Logger.InfoContext(r.Context(), "Storage request refused", "account", name, "service", svc, "method", r.Method, "code", e.code)
		writeError(w, r, svc, e.status, e.code, e.msg)
		return
	}
	base, err := s.o.Azurite.Endpoint(r.Context(), svc)
	if err != nil {
		s.o.Logger.ErrorContext(r.Context(), "Azurite is not available", "err", err)
		writeError(w, r, svc, http.StatusServiceUnavailable, "ServerBusy", "The storage engine (Azurite) is not available: "+err.Error())
		return
	}
	// An anonymous read goes on without the cloud's SAS, so that Azurite answers it by the
	// container's public access level, as Azure does, rather than as the account's owner.
	signed := r.Header.Get("Authorization") != "" || r.URL.Query().Has("sig")
	s.forward(w, r, acct.Name, svc, base, signed)
}

// authError is a refusal in the storage error format.
type authError struct {
	status    int
	code, msg string
}

func (s *Service) authorize(r *http.Request, acct Account, svc string, o op) *authError {
	h := r.Header.Get("Authorization")
	switch {
	case strings.HasPrefix(h, "SharedKey ") || strings.HasPrefix(h, "SharedKeyLite "):
		if !checkSharedKey(r, svc, acct.Name, h, acct.Keys) {
			return &authError{http.StatusForbidden, "AuthenticationFailed", authFailed + "\nThe MAC signature found in the HTTP request is not the same as any computed signature."}
		}
		return nil
	case len(h) > 7 && strings.EqualFold(h[:7], "Bearer "):
		return s.authorizeToken(r, acct, svc, o, strings.TrimSpace(h[7:]))
	case h != "":
		return &authError{http.StatusForbidden, "InvalidAuthenticationInfo", "Authentication information is not given in the correct format. Check the value of Authorization header."}
	case r.URL.Query().Has("sig"):
		if err := checkSAS(r.URL.Query(), svc, acct.Name, o, acct.Keys, s.o.Clock()); err != nil {
			var se *sasError
			errors.As(err, &se)
			return &authError{http.StatusForbidden, se.code, se.msg}
		}
		return nil
	case svc == "blob" && (r.Method == http.MethodGet || r.Method == http.MethodHead) && o.container != "":
		return nil // anonymous read: Azurite applies the container's public access level
	}
	return &authError{http.StatusUnauthorized, "NoAuthenticationInformation", "Server failed to authenticate the request. Please refer to the information in the www-authenticate header."}
}

func (s *Service) authorizeToken(r *http.Request, acct Account, svc string, o op, raw string) *authError {
	endpoint := "https://" + acct.Name + Suffixes[svc]
	claims, err := s.o.Tokens.Verify(r.Context(), raw, func(string) bool { return true })
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return &authError{http.StatusUnauthorized, "InvalidAuthenticationInfo", "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.\nLifetime validation failed. The token is expired."}
	case err != nil:
		return &authError{http.StatusUnauthorized, "InvalidAuthenticationInfo", "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.\nThe token is invalid."}
	}
	if !slices.ContainsFunc(claims.Audience, func(a string) bool {
		a = strings.TrimSuffix(strings.ToLower(a), "/")
		return a == Audience || a == endpoint
	}) {
		return &authError{http.StatusUnauthorized, "InvalidAuthenticationInfo", "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.\nAudience validation failed. Audience did not match."}
	}
	if acct.TenantID != "" && !strings.EqualFold(claims.TenantID, acct.TenantID) {
		return &authError{http.StatusUnauthorized, "InvalidAuthenticationInfo", "Server failed to authenticate the request. Please refer to the information in the www-authenticate header.\nIssuer validation failed. Issuer did not match."}
	}
	if svc == "blob" && (r.URL.Query().Get("comp") == "acl") {
		return &authError{http.StatusForbidden, "AuthorizationPermissionMismatch", "This request is not authorized to perform this operation using this permission."}
	}
	scope := acct.ID + o.scope
	check := s.o.Authz.Check
	if o.data {
		check = s.o.Authz.CheckData
	}
	if err := check(r.Context(), claims.ObjectID, accountActions+o.action, scope); err != nil {
		if errors.Is(err, authz.ErrDenied) {
			return &authError{http.StatusForbidden, "AuthorizationPermissionMismatch", "This request is not authorized to perform this operation using this permission."}
		}
		return &authError{http.StatusInternalServerError, "InternalError", "The server encountered an internal error."}
	}
	return nil
}

// forward sends r to Azurite under the account's product-style host, with the client's
// credentials replaced by an account SAS of Azurite's key when signed (the client's own were
// checked), with none otherwise.
func (s *Service) forward(w http.ResponseWriter, r *http.Request, account, svc, base string, signed bool) {
	u, err := url.Parse(base)
	if err != nil {
		writeError(w, r, svc, http.StatusInternalServerError, "InternalError", "The server encountered an internal error.")
		return
	}
	out := r.Clone(r.Context())
	out.Header.Del("Authorization")
	q := r.URL.Query()
	for k := range q {
		if sasParams[strings.ToLower(k)] {
			q.Del(k)
		}
	}
	raw := q.Encode()
	if signed {
		if raw != "" {
			raw += "&"
		}
		raw += forwardSAS(account, s.o.Azurite.Key(), s.o.Clock()).Encode()
	}
	out.URL = &url.URL{Scheme: u.Scheme, Host: u.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: raw}
	out.Host = account + Suffixes[svc]
	out.RequestURI = ""
	s.proxy.ServeHTTP(w, out)
}

// modifyResponse turns the http:// URLs Azurite writes into listings into the public https://
// ones (Azurite is reached over plain HTTP on loopback).
func (s *Service) modifyResponse(resp *http.Response) error {
	r := resp.Request
	ct := resp.Header.Get("Content-Type")
	svc := hostService(r.Host)
	if svc == "" || resp.Body == nil {
		return nil
	}
	listing := (svc != "table" && r.URL.Query().Get("comp") == "list" && strings.Contains(ct, "xml")) ||
		(svc == "table" && strings.Contains(ct, "json"))
	if !listing {
		return nil
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	b = bytes.ReplaceAll(b, []byte("http://"+r.Host), []byte("https://"+r.Host))
	resp.Body = io.NopCloser(bytes.NewReader(b))
	resp.ContentLength = int64(len(b))
	resp.Header.Set("Content-Length", strconv.Itoa(len(b)))
	return nil
}

// writeError answers in the service's error format: XML for blob and queue, JSON (OData) for
// table, with the x-ms-error-code header every SDK reads.
func writeError(w http.ResponseWriter, r *http.Request, svc string, status int, code, msg string) {
	w.Header().Set("x-ms-error-code", code)
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer authorization_uri=https://login.microsoftonline.com/common/oauth2/authorize resource_id=`+Audience)
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	if svc == "table" {
		w.Header().Set("Content-Type", "application/json;odata=minimalmetadata;streaming=true;charset=utf-8")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"odata.error":{"code":%q,"message":{"lang":"en-US","value":%q}}}`, code, msg)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(msg))
	_, _ = fmt.Fprintf(w, `<?xml version="1.0" encoding="utf-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`, code, b.String())
}
