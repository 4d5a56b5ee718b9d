package msi

import (
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
)

// Style is which of the two protocols a request speaks.
type Style int

// The styles.
const (
	IMDS       Style = iota // GET /metadata/identity/oauth2/token, header Metadata: true
	AppService              // GET {IDENTITY_ENDPOINT}, header X-IDENTITY-HEADER
)

// AppServiceAPIVersion is the App Service protocol version the SDKs send (the older 2017-09-01
// has other parameter names and is not served).
const AppServiceAPIVersion = "2019-08-01"

// imdsMinVersion is the first IMDS version with the identity endpoint; IMDS versions are dates.
const imdsMinVersion = "2018-02-01"

// Selector kinds: which identity a request asks for.
const (
	ByDefault    = ""           // the system-assigned identity, else the only user-assigned one
	ByClientID   = "client_id"  //
	ByObjectID   = "object_id"  // also principal_id
	ByResourceID = "msi_res_id" // also mi_res_id
)

// TokenQuery is a parsed token request.
type TokenQuery struct {
	APIVersion string
	Resource   string // the token's audience
	By         string // a selector kind
	Value      string // the client id, object id or resource id
}

// maxQuery bounds what the parser looks at.
const maxQuery = 8 << 10

// ParseTokenQuery parses and validates the query of a token request; every failure is a 400
// *Error. It is the parser of untrusted input the fuzz target exercises.
func ParseTokenQuery(raw string, style Style) (TokenQuery, error) {
	if len(raw) > maxQuery {
		return TokenQuery{}, errRequest("The query is too long.")
	}
	vals, err := url.ParseQuery(raw)
	if err != nil {
		return TokenQuery{}, errRequest("The query could not be parsed.")
	}
	one := func(names ...string) (string, string, error) {
		var name, v string
		for _, n := range names {
			vs := vals[n]
			if len(vs) == 0 {
				continue
			}
			if len(vs) > 1 || name != "" {
				return "", "", errRequest("The parameter '%s' may be given only once.", names[0])
			}
			name, v = n, vs[0]
		}
		return name, v, nil
	}
	var q TokenQuery
	if _, q.APIVersion, err = one("api-version"); err != nil {
		return TokenQuery{}, err
	}
	if err := checkAPIVersion(q.APIVersion, style); err != nil {
		return TokenQuery{}, err
	}
	if _, q.Resource, err = one("resource"); err != nil {
		return TokenQuery{}, err
	}
	if err := checkResource(q.Resource); err != nil {
		return TokenQuery{}, err
	}
	for _, sel := range []struct {
		kind  string
		names []string
	}{
		{ByClientID, []string{"client_id"}},
		{ByObjectID, []string{"object_id", "principal_id"}},
		{ByResourceID, []string{"msi_res_id", "mi_res_id"}},
	} {
		name, v, err := one(sel.names...)
		if err != nil {
			return TokenQuery{}, err
		}
		if name == "" {
			continue
		}
		if q.By != ByDefault {
			return TokenQuery{}, errRequest("Only one of 'client_id', 'object_id' and 'msi_res_id' may be specified.")
		}
		q.By, q.Value = sel.kind, v
	}
	switch q.By {
	case ByClientID, ByObjectID:
		if _, err := uuid.Parse(q.Value); err != nil || len(q.Value) != 36 {
			return TokenQuery{}, errRequest("The '%s' parameter must be a GUID.", q.By)
		}
	case ByResourceID:
		id, err := armid.Parse(q.Value)
		if err != nil || id.IsCollection() || !strings.EqualFold(id.ResourceType(), "Microsoft.ManagedIdentity/userAssignedIdentities") {
			return TokenQuery{}, errRequest("The 'msi_res_id' parameter must be the resource id of a user-assigned identity.")
		}
	}
	return q, nil
}

func checkAPIVersion(v string, style Style) error {
	if v == "" {
		return errRequest("Required query variable 'api-version' is missing.")
	}
	if style == AppService {
		if v != AppServiceAPIVersion {
			return errRequest("The api-version '%s' is not supported; use '%s'.", clip(v, 32), AppServiceAPIVersion)
		}
		return nil
	}
	if !isDate(v) || v < imdsMinVersion {
		return errRequest("The api-version '%s' is invalid.", clip(v, 32))
	}
	return nil
}

// isDate reports whether v looks like YYYY-MM-DD (digits only, so strings compare as dates).
func isDate(v string) bool {
	if len(v) != 10 || v[4] != '-' || v[7] != '-' {
		return false
	}
	for i, c := range v {
		if i != 4 && i != 7 && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// checkResource accepts what Entra accepts as a resource: an absolute URI (https://vault.azure.net,
// api://app) or an application id; not a v2 scope (no "/.default").
func checkResource(r string) error {
	if r == "" {
		return errRequest("Required query variable 'resource' is missing.")
	}
	if len(r) > 1024 || strings.IndexFunc(r, func(c rune) bool { return unicode.IsSpace(c) || unicode.IsControl(c) }) >= 0 {
		return errResource(r)
	}
	if _, err := uuid.Parse(r); err == nil {
		return nil
	}
	u, err := url.Parse(r)
	if err != nil || u.Scheme == "" || (u.Host == "" && u.Opaque == "") || strings.HasSuffix(r, "/.default") {
		return errResource(r)
	}
	return nil
}

func errResource(r string) *Error {
	return &Error{Status: http.StatusBadRequest, Code: "invalid_resource",
		Message: "AADSTS500011: The resource principal named " + clip(r, 128) + " was not found in the tenant."}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
