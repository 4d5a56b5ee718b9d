// Package msi serves managed-identity tokens to code running on the local cloud's compute
// (virtual machines and scale sets), in the two protocols the Azure SDKs speak:
//
//   - App Service style: GET {IDENTITY_ENDPOINT}?api-version=2019-08-01&resource=R with header
//     X-IDENTITY-HEADER: {IDENTITY_HEADER}. The SDKs read both variables from the environment.
//   - IMDS style: GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource=R with header
//     Metadata: true, and the same X-IDENTITY-HEADER naming the compute resource, so that a node
//     agent can ask on behalf of its node.
//
// Either way the header is a per-resource secret that names the compute resource (see
// Secrets), and a token is issued only for an identity assigned to that resource: its
// system-assigned identity, or one of its user-assigned identities selected by client_id,
// object_id or msi_res_id.
package msi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/arm/compute"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// HeaderName carries the identity header in both styles.
const HeaderName = "X-IDENTITY-HEADER"

// Options configure the service.
type Options struct {
	Store   *store.Store
	Entra   *entra.Service
	Secrets *Secrets
	Logger  *slog.Logger // nil = discard; never receives headers or tokens
}

// Service is the managed-identity endpoints.
type Service struct {
	o   Options
	log *slog.Logger
}

// New returns the service.
func New(o Options) *Service {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Service{o: o, log: o.Logger}
}

// Register adds the two endpoints to mux.
func (s *Service) Register(mux *http.ServeMux) {
	mux.Handle(AppServicePath, httpx.Adapt(s.log, s.handler(AppService), writeError(s.log, AppService)))
	mux.Handle(IMDSPath, httpx.Adapt(s.log, s.handler(IMDS), writeError(s.log, IMDS)))
}

// tokenJSON is the success body. IMDS sends its numbers as strings; App Service's expires_on is
// a number.
type tokenJSON struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token"`
	ExpiresIn    string `json:"expires_in"`
	ExpiresOn    any    `json:"expires_on"`
	ExtExpiresIn string `json:"ext_expires_in"`
	NotBefore    any    `json:"not_before"`
	Resource     string `json:"resource"`
	TokenType    string `json:"token_type"`
	ClientID     string `json:"client_id"`
}

func (s *Service) handler(style Style) httpx.Handler {
	return func(r *http.Request) (httpx.Response, error) {
		if r.Method != http.MethodGet {
			return httpx.Response{}, &Error{Status: http.StatusMethodNotAllowed, Code: "invalid_request", Message: "Only GET is supported."}
		}
		// IMDS answers a request without Metadata: true first, whatever else it carries
		// (DefaultAzureCredential's probe relies on any answer).
		if style == IMDS && !strings.EqualFold(r.Header.Get("Metadata"), "true") {
			return httpx.Response{}, errRequest("Required metadata header not specified")
		}
		q, err := ParseTokenQuery(r.URL.RawQuery, style)
		if err != nil {
			return httpx.Response{}, err
		}
		id, err := s.o.Secrets.Resource(r.Header.Get(HeaderName))
		if err != nil {
			return httpx.Response{}, &Error{Status: http.StatusUnauthorized, Code: "invalid_request",
				Message: "The " + HeaderName + " header is missing or is not the identity header of a compute resource."}
		}
		tok, err := s.Token(r.Context(), id.String(), q)
		if err != nil {
			return httpx.Response{}, err
		}
		body := tokenJSON{
			AccessToken: tok.AccessToken, ExpiresIn: strconv.FormatInt(tok.ExpiresIn, 10),
			ExtExpiresIn: strconv.FormatInt(tok.ExpiresIn, 10), Resource: q.Resource, TokenType: "Bearer", ClientID: tok.ClientID,
			ExpiresOn: strconv.FormatInt(tok.ExpiresOn.Unix(), 10), NotBefore: strconv.FormatInt(tok.NotBefore.Unix(), 10),
		}
		if style == AppService {
			body.ExpiresOn, body.NotBefore = tok.ExpiresOn.Unix(), tok.NotBefore.Unix()
		}
		return httpx.Response{Body: body}, nil
	}
}

// Token is an issued token.
type Token struct {
	AccessToken          string
	ClientID             string
	ExpiresIn            int64
	NotBefore, ExpiresOn time.Time
}

// errNotAssigned is IMDS's answer for an identity the resource does not have.
func errNotAssigned() *Error { return errRequest("Identity not found") }

// Token issues a token for the identity q selects among those assigned to the compute resource
// computeID, for in-process callers (a node agent in the same process, the benchmarks).
func (s *Service) Token(ctx context.Context, computeID string, q TokenQuery) (Token, error) {
	var p entra.Principal
	err := s.o.Store.View(ctx, func(tx *store.Tx) error {
		id, err := parseCompute(computeID)
		if err != nil {
			return err
		}
		a, err := compute.AssignedTx(tx, id)
		var ae *arm.Error
		if errors.As(err, &ae) {
			return errRequest("The compute resource named by the identity header was not found.")
		} else if err != nil {
			return err
		}
		sel, ok := choose(a, q)
		if !ok {
			return errNotAssigned()
		}
		p, err = s.o.Entra.Directory.PrincipalTx(tx, sel.TenantID, sel.ClientID)
		if errors.Is(err, entra.ErrNotFound) {
			return errNotAssigned() // the identity was deleted after it was assigned
		}
		return err
	})
	if err != nil {
		return Token{}, err
	}
	raw, exp, err := s.o.Entra.IssueManagedIdentityToken(ctx, p, q.Resource)
	if err != nil {
		return Token{}, fmt.Errorf("issue managed identity token: %w", err)
	}
	life := s.o.Entra.TokenLifetime()
	return Token{AccessToken: raw, ClientID: p.ClientID, ExpiresIn: int64(life / time.Second), ExpiresOn: exp, NotBefore: exp.Add(-life)}, nil
}

// choose picks the identity q asks for: with no selector the system-assigned one, or else the
// only user-assigned one (as IMDS does); by client id or object id any assigned one; by
// resource id a user-assigned one.
func choose(a compute.Assigned, q TokenQuery) (compute.Principal, bool) {
	all := a.UserAssigned
	if a.System != nil {
		all = append([]compute.Principal{*a.System}, all...)
	}
	switch q.By {
	case ByDefault:
		if a.System != nil {
			return *a.System, true
		}
		if len(a.UserAssigned) == 1 {
			return a.UserAssigned[0], true
		}
	case ByClientID, ByObjectID, ByResourceID:
		for _, p := range all {
			v := map[string]string{ByClientID: p.ClientID, ByObjectID: p.ObjectID, ByResourceID: p.ResourceID}[q.By]
			if v != "" && strings.EqualFold(v, q.Value) {
				return p, true
			}
		}
	}
	return compute.Principal{}, false
}

// Error is a managed-identity endpoint error.
type Error struct {
	Status  int
	Code    string // the OAuth error: invalid_request, invalid_resource
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errRequest(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: fmt.Sprintf(format, args...)}
}

// writeError renders errors: IMDS as {"error","error_description"}, App Service as
// {"statusCode","message","correlationId"}.
func writeError(log *slog.Logger, style Style) httpx.ErrorWriter {
	return func(w http.ResponseWriter, r *http.Request, err error) int {
		var e *Error
		if !errors.As(err, &e) {
			log.ErrorContext(r.Context(), "Token request failed", "path", r.URL.Path, "err", err)
			e = &Error{Status: http.StatusInternalServerError, Code: "server_error", Message: "The token could not be issued."}
		}
		var body any = map[string]string{"error": e.Code, "error_description": e.Message}
		if style == AppService {
			body = map[string]any{"statusCode": e.Status, "message": e.Message, "correlationId": uuid.NewString()}
		}
		return httpx.Write(w, httpx.Response{Status: e.Status, Body: body})
	}
}

func parseCompute(s string) (armid.ID, error) {
	id, err := armid.Parse(s)
	if err != nil {
		return armid.ID{}, errRequest("The compute resource id is invalid.")
	}
	if err := compute.CheckComputeID(id); err != nil {
		return armid.ID{}, errRequest("The compute resource id is invalid.")
	}
	return id, nil
}
