package faults

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestParseYAMLAndJSON(t *testing.T) {
	y := `
seed: 7
rules:
  - name: slow-reads
    method: GET
    latency: 50ms
  - name: flaky-identities
    method: PUT
    resourceType: Microsoft.ManagedIdentity/userAssignedIdentities
    status: 503
    count: 2
    retryAfter: 10ms
  - method: DELETE
    resourceType: Microsoft.Resources/resourceGroups
    lro: {polls: 3, result: Failed, code: Conflict}
`
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if c.Seed != 7 || len(c.Rules) != 3 || time.Duration(c.Rules[0].Latency) != 50*time.Millisecond ||
		c.Rules[1].Count != 2 || time.Duration(c.Rules[1].RetryAfter) != 10*time.Millisecond || c.Rules[2].LRO.Polls != 3 {
		t.Errorf("parsed %+v", c)
	}
	j := `{"rules":[{"resourceType":"keyvault","status":429,"rate":0.5}]}`
	if c, err := Parse([]byte(j)); err != nil || c.Rules[0].Status != 429 || c.Rules[0].Rate != 0.5 {
		t.Errorf("json: %+v %v", c, err)
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"unknown field", `rules: [{status: 500, colour: red}]`, `unknown field "colour"`},
		{"status", `rules: [{status: 404}]`, "rules[0]: status 404 is not one of 500, 503, 409, 429"},
		{"method", `rules: [{method: FETCH, status: 500}]`, `method "FETCH"`},
		{"type", `rules: [{resourceType: vaults, status: 500}]`, `resourceType "vaults"`},
		{"rate", `rules: [{status: 500, rate: 2}]`, "rate 2 is not between 0 and 1"},
		{"count", `rules: [{status: 500, count: -1}]`, "count -1 is negative"},
		{"latency", `rules: [{latency: 1h}]`, "latency 1h0m0s is not between"},
		{"bad duration", `rules: [{latency: soon}]`, `parse duration "soon"`},
		{"nothing", `rules: [{method: GET}]`, "the rule does nothing"},
		{"status and lro", `rules: [{method: PUT, status: 500, lro: {polls: 1}}]`, "status and lro exclude each other"},
		{"lro on a read", `rules: [{method: GET, lro: {polls: 1}}]`, "an lro rule needs method PUT, PATCH, POST or DELETE"},
		{"lro on keyvault", `rules: [{method: PUT, resourceType: keyvault, lro: {polls: 1}}]`, "ARM writes only"},
		{"lro result", `rules: [{method: PUT, lro: {polls: 1, result: Maybe}}]`, `lro.result "Maybe"`},
		{"not yaml", "rules: [", "yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.in))
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want ErrInvalid containing %q", err, tc.want)
			}
		})
	}
}

func TestDecideCountsAndOrder(t *testing.T) {
	i := New()
	err := i.Set(Config{Rules: []Rule{
		{Name: "slow", Latency: Duration(time.Millisecond)},
		{Name: "two-503s", Method: "put", ResourceType: "Microsoft.ManagedIdentity/userAssignedIdentities", Status: 503, Count: 2},
		{Name: "kv", ResourceType: "keyvault", Status: 429, RetryAfter: Duration(5 * time.Millisecond)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	put := Request{Service: ServiceARM, Method: http.MethodPut, ResourceType: "microsoft.managedidentity/userassignedidentities"}
	for n := range 2 {
		d := i.Decide(put)
		if d.Status != 503 || d.Rule != "slow,two-503s" || d.Latency != time.Millisecond || d.RetryAfter != DefaultRetryAfter {
			t.Fatalf("put %d: %+v", n, d)
		}
	}
	if d := i.Decide(put); d.Status != 0 || d.Rule != "slow" {
		t.Errorf("third put: %+v", d)
	}
	if d := i.Decide(Request{Service: ServiceKeyVault, Method: http.MethodGet}); d.Status != 429 || d.RetryAfter != 5*time.Millisecond {
		t.Errorf("keyvault: %+v", d)
	}
	if d := i.Decide(Request{Service: ServiceEntra, Method: http.MethodPost}); d.Status != 0 {
		t.Errorf("entra: %+v", d)
	}
	if _, left := i.Config(); left[1] != 0 || left[0] != -1 {
		t.Errorf("left = %v", left)
	}
	// An invalid configuration leaves the active one.
	if err := i.Set(Config{Rules: []Rule{{Status: 418}}}); err == nil {
		t.Fatal("418 accepted")
	}
	if c, _ := i.Config(); len(c.Rules) != 3 {
		t.Errorf("rules after a refused Set: %d", len(c.Rules))
	}
}

// TestDecideSeeded: the same seed gives the same faults; the rate is roughly honoured.
func TestDecideSeeded(t *testing.T) {
	run := func(seed uint64) string {
		i := New()
		if err := i.Set(Config{Seed: seed, Rules: []Rule{{Status: 500, Rate: 0.3}}}); err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for range 200 {
			if i.Decide(Request{Service: ServiceARM, Method: http.MethodGet}).Status != 0 {
				b.WriteByte('x')
			} else {
				b.WriteByte('.')
			}
		}
		return b.String()
	}
	a, b := run(42), run(42)
	if a != b {
		t.Errorf("same seed, different faults:\n%s\n%s", a, b)
	}
	if n := strings.Count(a, "x"); n < 30 || n > 90 {
		t.Errorf("%d of 200 failed at rate 0.3", n)
	}
	if run(43) == a {
		t.Errorf("another seed gave the same sequence")
	}
}

func TestNilInjector(t *testing.T) {
	var i *Injector
	if d := i.Decide(Request{Service: ServiceARM, Method: http.MethodGet}); d.Fired() {
		t.Errorf("nil injector fired: %+v", d)
	}
}

func TestAnswerShapes(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	arm := Answer(ServiceARM, "r", 429, 1500*time.Millisecond, now)
	if arm.Header.Get("Retry-After") != "2" || arm.Header.Get("X-Ms-Retry-After-Ms") != "1500" || arm.Header.Get("X-Ms-Error-Code") != "TooManyRequests" {
		t.Errorf("arm headers %v", arm.Header)
	}
	kv := Answer(ServiceKeyVault, "r", 429, time.Second, now).Body.(map[string]any)["error"].(map[string]string)
	if kv["code"] != "Throttled" || !strings.Contains(kv["message"], "injected fault 'r'") {
		t.Errorf("keyvault body %v", kv)
	}
	e := Answer(ServiceEntra, "r", 503, time.Second, now).Body.(map[string]any)
	if e["error"] != "temporarily_unavailable" || !strings.HasPrefix(e["error_description"].(string), "AADSTS90033: ") {
		t.Errorf("entra body %v", e)
	}
	if h := Answer(ServiceARM, "r", 500, time.Second, now).Header; h.Get("Retry-After") != "" {
		t.Errorf("500 with Retry-After: %v", h)
	}
}
