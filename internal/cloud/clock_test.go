package cloud_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/admin"
)

// TestClockAdminAPI: POST /clock/advance moves every service's clock forward at once (an ARM
// token issued before is refused after it expires on the cloud's clock); it never goes back, and
// a bad advance is refused with the reason and changes nothing.
func TestClockAdminAPI(t *testing.T) {
	e := startFaulty(t, cloud.Options{})
	call := func(token, method, path, body string) (int, []byte) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := (&http.Client{Transport: e.c.Transport()}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	token := func() string {
		t.Helper()
		// A new credential each time: azidentity's cache runs on the machine's clock.
		tok, err := getToken(t, secretCred(t, e.c, e.s.TenantID, e.s.ClientID, e.s.ClientSecret), armScope)
		if err != nil {
			t.Fatal(err)
		}
		return tok.Token
	}
	clockURL := e.s.URL + admin.Prefix + "/clock"
	groupsURL := e.s.ResourceManagerEndpoint + "/subscriptions/" + e.s.SubscriptionID + "/resourcegroups?api-version=2021-04-01"
	view := func(b []byte) admin.ClockView {
		t.Helper()
		var v admin.ClockView
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("clock answer %s: %v", b, err)
		}
		return v
	}

	before := token()
	if st, b := call(before, http.MethodGet, groupsURL, ""); st != http.StatusOK {
		t.Fatalf("ARM before the advance: %d %s", st, b)
	}
	st, b := call(before, http.MethodGet, clockURL, "")
	if st != http.StatusOK || view(b).Skew != "0s" {
		t.Fatalf("GET clock: %d %s", st, b)
	}
	start := view(b).Now

	for _, bad := range []string{`{"by":"-1s"}`, `{"by":"0s"}`, `{"by":"49h"}`, `{"by":"soon"}`, `not json`} {
		st, b := call(before, http.MethodPost, clockURL+"/advance", bad)
		if st != http.StatusBadRequest || !strings.Contains(string(b), "Invalid") {
			t.Errorf("advance %s: %d %s, want 400", bad, st, b)
		}
	}
	st, b = call(before, http.MethodPost, clockURL+"/advance", `{"by":"2h"}`)
	if st != http.StatusOK || view(b).Skew != "2h0m0s" || view(b).Now.Sub(start) < 2*time.Hour {
		t.Fatalf("advance 2h: %d %s (clock was %s)", st, b, start)
	}

	// The token issued before has expired on the cloud's clock; a new one is good.
	if st, b := call(before, http.MethodGet, groupsURL, ""); st != http.StatusUnauthorized || !strings.Contains(string(b), "ExpiredAuthenticationToken") {
		t.Errorf("ARM with a token expired on the cloud's clock: %d %s, want 401 ExpiredAuthenticationToken", st, b)
	}
	if st, b := call(token(), http.MethodGet, groupsURL, ""); st != http.StatusOK {
		t.Errorf("ARM with a token issued after the advance: %d %s", st, b)
	}
}
