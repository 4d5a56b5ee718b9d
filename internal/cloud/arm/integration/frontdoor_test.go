package integration_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cerulean/cerulean/internal/cloud"
	cloudarm "github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// routeURL is the route's example path with the newest api-version its type accepts.
func (e *env) routeURL(t *testing.T, rt cloudarm.Route) string {
	t.Helper()
	if rt.Example == "" {
		t.Fatalf("route %s %s has no Example", rt.Method, rt.Type)
	}
	v := e.c.ARM().APIVersions(rt.Type)
	return strings.ReplaceAll(rt.Example, "{subscriptionId}", e.s.SubscriptionID) + "?api-version=" + v[len(v)-1]
}

// TestEveryRouteAuthenticatesAndAuthorizes walks the whole route table: no token, a bad
// token, a token for another audience are 401; a valid token of a principal without a role is
// 403 AuthorizationFailed; and none of them writes anything.
func TestEveryRouteAuthenticatesAndAuthorizes(t *testing.T) {
	e := start(t)
	p, cred := cloudtest.NewPrincipal(t, e.c, "no-role")
	roleless := cloudtest.Token(t, cred, armScope)
	graph := cloudtest.Token(t, cred, "https://graph.microsoft.com/.default")
	// A structurally valid token signed by someone else.
	forged := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"aud": "https://management.core.windows.net/", "oid": p.ObjectID})
		s, _ := tok.SignedString([]byte("not the cloud's key"))
		return s
	}()
	routes := e.c.ARM().Routes()
	if len(routes) < 20 {
		t.Fatalf("only %d routes", len(routes))
	}
	commits := e.c.Store().Commits()
	body := `{"location":"eastus","properties":{"issuer":"https://i.example","subject":"s","audiences":["a"]}}`
	for _, rt := range routes {
		u := e.routeURL(t, rt)
		name := rt.Method + " " + rt.Example
		for _, tc := range []struct{ token, code string }{
			{"", "AuthenticationFailed"},
			{"garbage", "InvalidAuthenticationToken"},
			{forged, "InvalidAuthenticationToken"},
			{graph, "InvalidAuthenticationTokenAudience"},
		} {
			st, h, b := e.do(t, rt.Method, u, tc.token, body)
			if rt.Method == http.MethodHead {
				if st != http.StatusUnauthorized || h.Get("x-ms-error-code") != tc.code {
					t.Errorf("%s with token %.10q: %d %s", name, tc.token, st, h.Get("x-ms-error-code"))
				}
				continue
			}
			if st != http.StatusUnauthorized || errorCode(b) != tc.code || !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer authorization_uri=") {
				t.Errorf("%s with token %.10q: %d %v", name, tc.token, st, b)
			}
		}
		st, h, b := e.do(t, rt.Method, u, roleless, body)
		if rt.Method == http.MethodHead {
			if st != http.StatusForbidden || h.Get("x-ms-error-code") != "AuthorizationFailed" {
				t.Errorf("%s without a role: %d %s", name, st, h.Get("x-ms-error-code"))
			}
			continue
		}
		if st != http.StatusForbidden || errorCode(b) != "AuthorizationFailed" {
			t.Errorf("%s without a role: %d %v", name, st, b)
		} else if msg := b["error"].(map[string]any)["message"].(string); !strings.Contains(msg, p.ObjectID) || !strings.Contains(msg, "/") {
			t.Errorf("%s: message %q names neither the principal nor the scope", name, msg)
		}
	}
	if got := e.c.Store().Commits(); got != commits {
		t.Errorf("rejected requests wrote %d times", got-commits)
	}
	// Tokens for the other ARM audience, with or without the slash, are accepted.
	for _, scope := range []string{"https://management.azure.com/.default", "https://management.azure.com//.default"} {
		tok := cloudtest.Token(t, e.cred, scope)
		if st, _, b := e.do(t, http.MethodGet, "/subscriptions/"+e.s.SubscriptionID+"?api-version=2022-12-01", tok, ""); st != http.StatusOK {
			t.Errorf("audience of %s: %d %v", scope, st, b)
		}
	}
	if strings.Contains(e.logs.String(), roleless) || strings.Contains(e.logs.String(), e.s.ClientSecret) {
		t.Error("a token or secret reached the logs")
	}
}

// TestFrontDoorErrors covers routing, api-version and body validation: each is 400/404 with
// ARM's code, and nothing is written.
func TestFrontDoorErrors(t *testing.T) {
	e := start(t)
	tok := cloudtest.Token(t, e.cred, armScope)
	sub := "/subscriptions/" + e.s.SubscriptionID
	if st, _, b := e.do(t, http.MethodPut, sub+"/resourcegroups/rg?api-version=2021-04-01", tok, `{"location":"eastus"}`); st != http.StatusCreated {
		t.Fatalf("create group: %d %v", st, b)
	}
	mi := sub + "/resourceGroups/rg/providers/Microsoft.ManagedIdentity/userAssignedIdentities/"
	fic := mi + "app/federatedIdentityCredentials/"
	if st, _, b := e.do(t, http.MethodPut, mi+"app?api-version=2023-01-31", tok, `{"location":"eastus"}`); st != http.StatusCreated {
		t.Fatalf("create identity: %d %v", st, b)
	}
	commits := e.c.Store().Commits()
	long := strings.Repeat("a", 129)
	for _, tc := range []struct {
		name, method, path, body string
		status                   int
		code                     string
	}{
		{"no api-version", "GET", sub, "", 400, "MissingApiVersionParameter"},
		{"unknown api-version", "GET", sub + "/resourcegroups/rg?api-version=2099-01-01", "", 400, "InvalidApiVersionParameter"},
		{"api-version of another type", "GET", mi + "app?api-version=2021-04-01", "", 400, "InvalidApiVersionParameter"},
		{"unknown type", "GET", sub + "/resourceGroups/rg/providers/Microsoft.Nope/things/x?api-version=2021-04-01", "", 404, "InvalidResourceType"},
		{"unknown subscription", "GET", "/subscriptions/00000000-0000-0000-0000-000000000001/resourcegroups/rg?api-version=2021-04-01", "", 404, "SubscriptionNotFound"},
		{"malformed subscription", "GET", "/subscriptions/nope/resourcegroups?api-version=2021-04-01", "", 400, "InvalidSubscriptionId"},
		{"unparsable id", "GET", sub + "/resourceGroups/rg/things/x?api-version=2021-04-01", "", 400, "InvalidResourceId"},
		{"unknown provider namespace", "GET", sub + "/providers/Microsoft.Nope?api-version=2021-04-01", "", 404, "InvalidResourceNamespace"},
		{"missing group", "GET", sub + "/resourcegroups/none?api-version=2021-04-01", "", 404, "ResourceGroupNotFound"},
		{"missing identity", "GET", mi + "none?api-version=2023-01-31", "", 404, "ResourceNotFound"},
		{"unsupported method", "PATCH", sub + "/resourcegroups/rg?api-version=2021-04-01", `{}`, 405, "MethodNotAllowed"},
		{"bad JSON", "PUT", sub + "/resourcegroups/rg2?api-version=2021-04-01", `{"location":`, 400, "InvalidRequestContent"},
		{"not an object", "PUT", sub + "/resourcegroups/rg2?api-version=2021-04-01", `["eastus"]`, 400, "InvalidRequestContent"},
		{"trailing data", "PUT", sub + "/resourcegroups/rg2?api-version=2021-04-01", `{"location":"eastus"} {}`, 400, "InvalidRequestContent"},
		{"empty body", "PUT", sub + "/resourcegroups/rg2?api-version=2021-04-01", ``, 400, "InvalidRequestContent"},
		{"wrong type", "PUT", sub + "/resourcegroups/rg2?api-version=2021-04-01", `{"location":1}`, 400, "InvalidRequestContent"},
		{"wrong type of tags", "PUT", mi + "mi2?api-version=2023-01-31", `{"location":"eastus","tags":{"a":1}}`, 400, "InvalidRequestContent"},
		{"no location", "PUT", sub + "/resourcegroups/rg2?api-version=2021-04-01", `{}`, 400, "LocationRequired"},
		{"group name too long", "PUT", sub + "/resourcegroups/" + strings.Repeat("g", 91) + "?api-version=2021-04-01", `{"location":"eastus"}`, 400, "InvalidResourceGroup"},
		{"group name bad character", "PUT", sub + "/resourcegroups/a%2Cb?api-version=2021-04-01", `{"location":"eastus"}`, 400, "InvalidResourceGroup"},
		{"identity name too short", "PUT", mi + "ab?api-version=2023-01-31", `{"location":"eastus"}`, 400, "InvalidResourceName"},
		{"identity name too long", "PUT", mi + long + "?api-version=2023-01-31", `{"location":"eastus"}`, 400, "InvalidResourceName"},
		{"credential name bad", "PUT", fic + "-x?api-version=2023-01-31", `{"properties":{"issuer":"https://i","subject":"s","audiences":["a"]}}`, 400, "InvalidResourceName"},
		{"credential audiences not a list", "PUT", fic + "fic1?api-version=2023-01-31", `{"properties":{"issuer":"https://i","subject":"s","audiences":"a"}}`, 400, "InvalidRequestContent"},
		{"credential without subject", "PUT", fic + "fic1?api-version=2023-01-31", `{"properties":{"issuer":"https://i","audiences":["a"]}}`, 400, "BadRequest"},
		{"credential with two audiences", "PUT", fic + "fic1?api-version=2023-01-31", `{"properties":{"issuer":"https://i","subject":"s","audiences":["a","b"]}}`, 400, "BadRequest"},
		{"body over the cap", "PUT", sub + "/resourcegroups/rg2?api-version=2021-04-01", `{"location":"eastus","tags":{"a":"` + strings.Repeat("x", 70<<10) + `"}}`, 400, "RequestContentTooLarge"},
		{"too many tags", "PUT", sub + "/resourcegroups/rg2?api-version=2021-04-01", `{"location":"eastus","tags":{` + manyTags(51) + `}}`, 400, "InvalidTagCount"},
		{"identity outside a group", "PUT", sub + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/app?api-version=2023-01-31", `{"location":"eastus"}`, 404, "InvalidResourceType"},
		{"assignment principal not a GUID", "PUT", sub + "/providers/Microsoft.Authorization/roleAssignments/6a0a1c1e-4a43-4f6e-9b0c-1b2f7e0f0a11?api-version=2022-04-01",
			`{"properties":{"roleDefinitionId":"` + e.roleDefID("acdd72a7-3385-48ef-bd42-f606fba81ae7") + `","principalId":"x"}}`, 400, "InvalidPrincipalId"},
		{"assignment at the root", "PUT", "/providers/Microsoft.Authorization/roleAssignments/6a0a1c1e-4a43-4f6e-9b0c-1b2f7e0f0a11?api-version=2022-04-01",
			`{"properties":{"roleDefinitionId":"` + e.roleDefID("acdd72a7-3385-48ef-bd42-f606fba81ae7") + `","principalId":"` + e.s.ObjectID + `"}}`, 400, "BadRequest"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, h, b := e.do(t, tc.method, tc.path, tok, tc.body)
			wantARMError(t, st, h, b, tc.status, tc.code)
		})
	}
	if got := e.c.Store().Commits(); got != commits {
		t.Errorf("rejected requests wrote %d times", got-commits)
	}
}

func manyTags(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, `"t`+strings.Repeat("x", i)+`":"v"`)
	}
	return strings.Join(parts, ",")
}

// TestThrottling: the remaining-budget headers count down and an empty bucket is 429 with
// Retry-After, which azcore honours.
func TestThrottling(t *testing.T) {
	e := startWithLimits(t, cloudarm.Limits{Reads: 3, ReadsPerSecond: 0.5, Writes: 2, WritesPerSecond: 0.5})
	tok := cloudtest.Token(t, e.cred, armScope)
	u := "/subscriptions/" + e.s.SubscriptionID + "?api-version=2022-12-01"
	var last string
	for i := range 3 {
		st, h, _ := e.do(t, http.MethodGet, u, tok, "")
		if st != http.StatusOK {
			t.Fatalf("read %d: %d", i, st)
		}
		last = h.Get("x-ms-ratelimit-remaining-subscription-reads")
	}
	if last != "0" {
		t.Errorf("remaining reads after 3 of 3 = %q", last)
	}
	st, h, b := e.do(t, http.MethodGet, u, tok, "")
	wantARMError(t, st, h, b, http.StatusTooManyRequests, "SubscriptionRequestsThrottled")
	if h.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After: %v", h)
	}
	// Writes have their own bucket.
	st, h, _ = e.do(t, http.MethodPut, "/subscriptions/"+e.s.SubscriptionID+"/resourcegroups/rg?api-version=2021-04-01", tok, `{"location":"eastus"}`)
	if st != http.StatusCreated || h.Get("x-ms-ratelimit-remaining-subscription-writes") != "1" {
		t.Errorf("write: %d %v", st, h)
	}
}

// TestExpiredToken: a token past its exp (by the cloud's clock) is 401 ExpiredAuthenticationToken.
func TestExpiredToken(t *testing.T) {
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	c := cloudtest.Start(t, cloud.Options{Clock: clock})
	e := &env{c: c, s: c.Settings(), logs: &cloudtest.SyncBuffer{}}
	tok := cloudtest.Token(t, cloudtest.OwnerCred(t, e.c), armScope)
	u := "/subscriptions/" + e.s.SubscriptionID + "?api-version=2022-12-01"
	if st, _, b := e.do(t, http.MethodGet, u, tok, ""); st != http.StatusOK {
		t.Fatalf("fresh token: %d %v", st, b)
	}
	mu.Lock()
	now = now.Add(2 * time.Hour)
	mu.Unlock()
	st, h, b := e.do(t, http.MethodGet, u, tok, "")
	wantARMError(t, st, h, b, http.StatusUnauthorized, "ExpiredAuthenticationToken")
}
