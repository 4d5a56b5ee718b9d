package keyvault

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/azurenames"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
)

// Audience is the resource Key Vault tokens are issued for; the 401 challenge names it.
const Audience = "https://vault.azure.net"

// TokenVerifier checks access tokens of the cloud's Entra ID (entra.Service implements it).
type TokenVerifier interface {
	Verify(ctx context.Context, raw string, accept func(aud string) bool) (*entra.AccessClaims, error)
}

// DataAuthorizer answers RBAC data-action checks (authz.Authorizer implements it); it returns
// authz.ErrDenied when no role assignment grants the action.
type DataAuthorizer interface {
	CheckData(ctx context.Context, principalID, dataAction, scope string) error
}

// caller is the authenticated principal of a request.
type caller struct {
	ObjectID string
	TenantID string
	AppID    string
}

func (c caller) String() string { return fmt.Sprintf("appid=%s;oid=%s", c.AppID, c.ObjectID) }

// authenticate checks the bearer token: signed by the cloud's keys, within its lifetime, for
// the Key Vault audience, from the vault's tenant. Every failure is a 401 carrying the
// challenge, so a client that had no token (or the wrong one) learns where to get one. Nothing
// of the token reaches an error or a log.
func (s *Service) authenticate(r *http.Request, v Vault) (caller, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return caller{}, s.unauthorized(v, "AKV10000: Request is missing a Bearer or PoP token.")
	}
	raw, ok := cutBearer(h)
	if !ok {
		return caller{}, s.unauthorized(v, "AKV10001: Authorization header is not a Bearer token.")
	}
	claims, err := s.o.Tokens.Verify(r.Context(), raw, func(string) bool { return true })
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return caller{}, s.unauthorized(v, "AKV10013: The token is expired.")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return caller{}, s.unauthorized(v, "AKV10014: The token is not yet valid.")
	case err != nil:
		return caller{}, s.unauthorized(v, "AKV10010: The token is invalid.")
	}
	if !slices.ContainsFunc(claims.Audience, isVaultAudience) {
		return caller{}, s.unauthorized(v, "AKV10022: Invalid audience. Expected "+Audience+".")
	}
	if !strings.EqualFold(claims.TenantID, v.TenantID) {
		return caller{}, s.unauthorized(v, "AKV10032: Invalid issuer. The token is not from the vault's tenant.")
	}
	if claims.ObjectID == "" {
		return caller{}, s.unauthorized(v, "AKV10010: The token has no object id.")
	}
	return caller{ObjectID: claims.ObjectID, TenantID: claims.TenantID, AppID: claims.AppID}, nil
}

func cutBearer(h string) (string, bool) {
	scheme, raw, ok := strings.Cut(h, " ")
	raw = strings.TrimSpace(raw)
	return raw, ok && strings.EqualFold(scheme, "Bearer") && raw != ""
}

// isVaultAudience accepts https://vault.azure.net with or without the trailing slash.
func isVaultAudience(aud string) bool {
	return strings.EqualFold(strings.TrimSuffix(aud, "/"), Audience)
}

func (s *Service) unauthorized(v Vault, msg string) *Error {
	e := errorf(http.StatusUnauthorized, "Unauthorized", "%s", msg)
	e.Header = http.Header{"Www-Authenticate": {s.challenge(v)}}
	return e
}

// challenge is the WWW-Authenticate value: the authority with the vault's tenant (clients take
// the tenant from its 4th '/' segment) and the resource to get a token for. A client that
// reached the vault under its public name is sent to Azure's public authority, which it reaches
// through the same proxy.
func (s *Service) challenge(v Vault) string {
	authority := s.o.AuthorityURL + "/" + v.TenantID
	if v.public {
		authority = azurenames.Authority(v.TenantID)
	}
	return fmt.Sprintf(`Bearer authorization="%s", resource="%s"`, authority, Audience)
}

// permission is what an operation needs: an RBAC data action and an access-policy permission.
type permission struct {
	dataAction string
	policy     string
}

const secretActions = "Microsoft.KeyVault/vaults/secrets/"

var permissions = map[op]permission{
	opGet:          {secretActions + "getSecret/action", "get"},
	opSet:          {secretActions + "setSecret/action", "set"},
	opUpdate:       {secretActions + "update/action", "set"},
	opList:         {secretActions + "readMetadata/action", "list"},
	opListVersions: {secretActions + "readMetadata/action", "list"},
	opDelete:       {secretActions + "delete", "delete"},
	opGetDeleted:   {secretActions + "readMetadata/action", "get"},
	opListDeleted:  {secretActions + "readMetadata/action", "list"},
	opRecover:      {secretActions + "recover/action", "recover"},
	opPurge:        {secretActions + "purge/action", "purge"},
	opBackup:       {secretActions + "backup/action", "backup"},
	opRestore:      {secretActions + "restore/action", "restore"},
}

// authorize decides from the vault's permission model, before anything about the secret is
// looked up, so a denied caller cannot learn which names exist.
func (s *Service) authorize(ctx context.Context, v Vault, c caller, rt route) error {
	p := permissions[rt.op]
	if v.RBAC {
		scope := v.ResourceID
		if rt.name != "" {
			scope += "/" + rt.kind.collection() + "/" + rt.name
		}
		err := s.o.Authz.CheckData(ctx, c.ObjectID, p.dataAction, scope)
		if d, ok := s.o.Authz.(interface {
			DeniedReason(ctx context.Context, principalID, action, scope string) string
		}); ok && errors.Is(err, authz.ErrDenied) {
			reqlog.SetReason(ctx, d.DeniedReason(ctx, c.ObjectID, p.dataAction, scope))
		}
		if errors.Is(err, authz.ErrDenied) {
			return errorf(http.StatusForbidden, "Forbidden",
				"Caller is not authorized to perform action on resource.\r\nIf role assignments, deny assignments or role definitions were changed recently, please observe propagation time.\r\nCaller: %s\r\nAction: '%s'\r\nResource: '%s'\r\nAssignment: (not found)\r\nDecisionReason: null\r\nVault: %s;location=%s\r\n",
				c, p.dataAction, strings.ToLower(scope), v.Name, v.Location).inner("ForbiddenByRbac")
		}
		if err != nil {
			return fmt.Errorf("authorize %s: %w", p.dataAction, err)
		}
		return nil
	}
	for _, ap := range v.AccessPolicies {
		if grants(ap, c, rt.kind, p.policy) {
			return nil
		}
	}
	return errorf(http.StatusForbidden, "Forbidden",
		"The user, group or application '%s' does not have %s %s permission on key vault '%s;location=%s'. For help resolving this issue, please see https://go.microsoft.com/fwlink/?linkid=2125287",
		c, rt.kind.collection(), p.policy, v.Name, v.Location).inner("AccessDenied")
}

// grants reports whether an access policy gives the caller a permission on a kind of object. A
// policy with an applicationId is a compound identity: both the object and the application
// must match.
func grants(ap AccessPolicy, c caller, k kind, perm string) bool {
	if !strings.EqualFold(ap.ObjectID, c.ObjectID) || !strings.EqualFold(ap.TenantID, c.TenantID) {
		return false
	}
	if ap.ApplicationID != "" && !strings.EqualFold(ap.ApplicationID, c.AppID) {
		return false
	}
	list := ap.Permissions.Secrets
	switch k {
	case kindKey:
		list = ap.Permissions.Keys
	case kindCert:
		list = ap.Permissions.Certificates
	}
	for _, p := range list {
		if strings.EqualFold(p, perm) || strings.EqualFold(p, "all") {
			return true
		}
	}
	return false
}
