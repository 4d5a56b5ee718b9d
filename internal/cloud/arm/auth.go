package arm

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// authenticate verifies the bearer token: signed by the cloud's keys, in its validity window,
// issued by the cloud's tenant, for one of ARM's audiences. Nothing of the token reaches an
// error message or a log.
func (s *Service) authenticate(r *http.Request) (Caller, error) {
	authz := r.Header.Get("Authorization")
	if authz == "" {
		return Caller{}, s.unauthorized("AuthenticationFailed", "Authentication failed. The 'Authorization' header is missing.")
	}
	raw, ok := strings.CutPrefix(authz, "Bearer ")
	if !ok || raw == "" {
		return Caller{}, s.unauthorized("InvalidAuthenticationToken", "Authentication failed. The 'Authorization' header is provided in an invalid format.")
	}
	claims, err := s.o.Tokens.Verify(r.Context(), strings.TrimSpace(raw), func(string) bool { return true })
	switch {
	case errors.Is(err, jwt.ErrTokenExpired):
		return Caller{}, s.unauthorized("ExpiredAuthenticationToken", "The access token expiry UTC time is earlier than current UTC time.")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return Caller{}, s.unauthorized("InvalidAuthenticationToken", "The access token is not yet valid.")
	case err != nil:
		return Caller{}, s.unauthorized("InvalidAuthenticationToken", "The access token is invalid.")
	}
	if !acceptedAudience(claims.Audience) {
		return Caller{}, s.unauthorized("InvalidAuthenticationTokenAudience", "The access token has been obtained for wrong audience or resource. It should exactly match with one of the allowed audiences 'https://management.core.windows.net/','https://management.azure.com/'.")
	}
	if !strings.EqualFold(claims.TenantID, s.o.TenantID) {
		return Caller{}, s.unauthorized("InvalidAuthenticationTokenTenant", "The access token is from the wrong issuer. It must match the tenant associated with this subscription.")
	}
	if claims.ObjectID == "" {
		return Caller{}, s.unauthorized("InvalidAuthenticationToken", "The access token has no object id.")
	}
	return Caller{ObjectID: claims.ObjectID, TenantID: claims.TenantID, AppID: claims.AppID}, nil
}

func acceptedAudience(auds jwt.ClaimStrings) bool {
	for _, a := range auds {
		for _, want := range Audiences {
			if strings.EqualFold(strings.TrimSuffix(a, "/"), want) {
				return true
			}
		}
	}
	return false
}

func (s *Service) unauthorized(code, msg string) *Error {
	e := Errorf(http.StatusUnauthorized, code, "%s", msg)
	e.Header = http.Header{"Www-Authenticate": {fmt.Sprintf(
		`Bearer authorization_uri="%s/%s", error="invalid_token", error_description="%s"`, s.o.BaseURL, s.o.TenantID, msg)}}
	return e
}

func itoa(n int) string { return strconv.Itoa(n) }
