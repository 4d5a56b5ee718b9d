package entra

import (
	"mime"
	"net/url"
	"strings"
)

// maxTokenBody caps a token request; real requests are a few KiB (a projected token is ~1 KiB,
// a certificate assertion with x5c a few KiB).
const maxTokenBody = 64 << 10

// tokenRequest is the form of POST /{tenant}/oauth2/v2.0/token.
type tokenRequest struct {
	GrantType     string
	ClientID      string
	ClientSecret  string
	AssertionType string
	Assertion     string
	Scope         string
}

const assertionTypeJWTBearer = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" //nolint:gosec // a protocol constant, not a credential

// singleValued are the fields that may appear at most once; a repeated one would let two parsers
// disagree on which value counts.
var singleValued = []string{"grant_type", "client_id", "client_secret", "client_assertion_type", "client_assertion", "scope"}

// parseTokenForm parses a token request body. It checks the content type and the encoding only;
// what the fields mean is checked by the token endpoint.
func parseTokenForm(contentType string, body []byte) (tokenRequest, *Error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return tokenRequest{}, errBadRequest("The request body must be application/x-www-form-urlencoded.")
	}
	if len(body) > maxTokenBody {
		return tokenRequest{}, errTooLarge()
	}
	vals, err := url.ParseQuery(string(body))
	if err != nil {
		return tokenRequest{}, errBadRequest("The request body is not a valid form.")
	}
	for _, k := range singleValued {
		if len(vals[k]) > 1 {
			return tokenRequest{}, errBadRequest("The request body contains the parameter '%s' more than once.", k)
		}
	}
	return tokenRequest{
		GrantType:     vals.Get("grant_type"),
		ClientID:      strings.TrimSpace(vals.Get("client_id")),
		ClientSecret:  vals.Get("client_secret"),
		AssertionType: vals.Get("client_assertion_type"),
		Assertion:     vals.Get("client_assertion"),
		Scope:         vals.Get("scope"),
	}, nil
}

// ignoredScopes are the OIDC scopes MSAL adds to every request, client credentials included.
var ignoredScopes = map[string]bool{"openid": true, "offline_access": true, "profile": true}

// resourceFromScope returns the resource of a client-credentials scope: exactly one
// "<resource>/.default", ignoring the OIDC scopes.
func resourceFromScope(scope string) (string, *Error) {
	var resources []string
	for _, s := range strings.Fields(scope) {
		if ignoredScopes[s] {
			continue
		}
		resources = append(resources, s)
	}
	if len(resources) != 1 {
		return "", errInvalidScope(scope)
	}
	res, ok := strings.CutSuffix(resources[0], "/.default")
	if !ok || res == "" {
		return "", errInvalidScope(scope)
	}
	return res, nil
}
