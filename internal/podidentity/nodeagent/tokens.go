package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
)

// Token is an access token as the node's managed-identity endpoint issued it.
type Token struct {
	AccessToken string
	ClientID    string
	Resource    string
	ExpiresOn   time.Time
	NotBefore   time.Time
}

// Identity selects one of the node's identities: by client id, else by resource id; or a
// service principal (an AzureIdentity of type 1 or 2), whose token comes from Entra ID.
type Identity struct {
	ClientID   string
	ResourceID string
	sp         *aadv1.AzureIdentity
}

func (i Identity) key() string {
	if i.sp != nil {
		// A changed AzureIdentity (another Secret, tenant or client) is another entry.
		return "s:" + string(i.sp.UID) + "@" + i.sp.ResourceVersion
	}
	if i.ClientID != "" {
		return "c:" + strings.ToLower(i.ClientID)
	}
	return "r:" + strings.ToLower(i.ResourceID)
}

// Source gets tokens for the node's identities.
type Source interface {
	Token(ctx context.Context, id Identity, resource string) (Token, error)
}

// UpstreamError is an error answer of the node's managed-identity endpoint, in IMDS's shape.
type UpstreamError struct {
	Status      int
	Code        string `json:"error"`
	Description string `json:"error_description"`
}

func (e *UpstreamError) Error() string {
	return fmt.Sprintf("managed-identity endpoint answered %d %s: %s", e.Status, e.Code, e.Description)
}

// IMDSSource asks an IMDS-style endpoint: Azure's IMDS (http://169.254.169.254, no header) or
// the local cloud's IMDS-style endpoint with the node's identity header.
type IMDSSource struct {
	// Endpoint is the base URL, e.g. http://169.254.169.254 or https://127.0.0.1:8443.
	Endpoint string
	// Header is the local cloud's X-IDENTITY-HEADER of the node's VM or VMSS; empty for Azure.
	Header string
	// Client makes the calls; it must trust the endpoint's CA.
	Client *http.Client
}

// IdentityHeaderName is the local cloud's identity header.
const IdentityHeaderName = "X-IDENTITY-HEADER"

// Token asks the endpoint for a token of id for resource.
func (s *IMDSSource) Token(ctx context.Context, id Identity, resource string) (Token, error) {
	q := url.Values{"api-version": {"2018-02-01"}, "resource": {resource}}
	switch {
	case id.ClientID != "":
		q.Set("client_id", id.ClientID)
	case id.ResourceID != "":
		q.Set("msi_res_id", id.ResourceID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(s.Endpoint, "/")+imdsTokenPath+"?"+q.Encode(), nil)
	if err != nil {
		return Token{}, fmt.Errorf("build token request: %w", err)
	}
	req.Header.Set("Metadata", "true")
	if s.Header != "" {
		req.Header.Set(IdentityHeaderName, s.Header)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return Token{}, fmt.Errorf("request token: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Token{}, fmt.Errorf("read token answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		ue := &UpstreamError{}
		if json.Unmarshal(body, ue) != nil || ue.Code == "" {
			ue.Code, ue.Description = "unknown_error", http.StatusText(resp.StatusCode)
		}
		ue.Status = resp.StatusCode
		return Token{}, ue
	}
	var t struct {
		AccessToken string          `json:"access_token"`
		ClientID    string          `json:"client_id"`
		Resource    string          `json:"resource"`
		ExpiresOn   json.RawMessage `json:"expires_on"`
		NotBefore   json.RawMessage `json:"not_before"`
	}
	if err := json.Unmarshal(body, &t); err != nil || t.AccessToken == "" {
		return Token{}, errors.New("decode token answer: not an IMDS token")
	}
	exp, err := unixField(t.ExpiresOn)
	if err != nil {
		return Token{}, fmt.Errorf("decode expires_on: %w", err)
	}
	nbf, _ := unixField(t.NotBefore)
	return Token{AccessToken: t.AccessToken, ClientID: t.ClientID, Resource: resource, ExpiresOn: exp, NotBefore: nbf}, nil
}

// unixField reads IMDS's seconds, sent as a string or a number.
func unixField(raw json.RawMessage) (time.Time, error) {
	s := strings.Trim(string(raw), `"`)
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("parse seconds %q: %w", s, err)
	}
	return time.Unix(n, 0), nil
}

// RefreshBefore is how long before expiry a cached token stops being served.
const RefreshBefore = 5 * time.Minute

// Cache serves tokens per identity and resource until RefreshBefore their expiry; concurrent
// misses for one key make one upstream call.
type Cache struct {
	src   Source
	now   func() time.Time
	group singleflight.Group
	calls atomic.Int64

	mu      sync.Mutex
	entries map[string]Token
}

// NewCache wraps src; now is the clock (time.Now when nil).
func NewCache(src Source, now func() time.Time) *Cache {
	if now == nil {
		now = time.Now
	}
	return &Cache{src: src, now: now, entries: map[string]Token{}}
}

// UpstreamCalls is how many calls the cache made to its source.
func (c *Cache) UpstreamCalls() int64 { return c.calls.Load() }

// Token returns a cached token of id for resource, or gets one.
func (c *Cache) Token(ctx context.Context, id Identity, resource string) (Token, bool, error) {
	key := id.key() + "|" + resource
	c.mu.Lock()
	t, ok := c.entries[key]
	c.mu.Unlock()
	if ok && c.now().Before(t.ExpiresOn.Add(-RefreshBefore)) {
		return t, true, nil
	}
	v, err, _ := c.group.Do(key, func() (any, error) {
		c.calls.Add(1)
		// The call is shared: one caller's cancellation must not fail the others.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		t, err := c.src.Token(cctx, id, resource)
		if err != nil {
			return Token{}, err
		}
		c.mu.Lock()
		c.entries[key] = t
		c.mu.Unlock()
		return t, nil
	})
	if err != nil {
		return Token{}, false, err
	}
	return v.(Token), false, nil
}
