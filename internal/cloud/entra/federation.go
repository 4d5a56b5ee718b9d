package entra

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// Bounds on fetching an external issuer's documents: it is someone else's server, so every fetch
// has a deadline, a size cap, and a cache so a burst of token requests makes one fetch.
const (
	issuerFetchTimeout = 10 * time.Second
	issuerDocLimit     = 1 << 20
	issuerCacheTTL     = 5 * time.Minute
	issuerMinRefresh   = 30 * time.Second // an unknown kid refetches at most this often
)

// issuerKeys fetches and caches OIDC issuers' signing keys.
type issuerKeys struct {
	client *http.Client
	now    func() time.Time

	mu      sync.Mutex
	entries map[string]*issuerEntry
}

type issuerEntry struct {
	mu      sync.Mutex // held while fetching, so concurrent requests wait for one fetch
	keys    *jose.JSONWebKeySet
	fetched time.Time
}

func newIssuerKeys(client *http.Client, now func() time.Time) *issuerKeys {
	return &issuerKeys{client: client, now: now, entries: map[string]*issuerEntry{}}
}

// key returns the issuer's key with this kid (the only key when kid is empty and the set has
// one). A cached set is refreshed when it is old, or when the kid is unknown and the set was not
// fetched within issuerMinRefresh (the issuer may have rotated).
func (k *issuerKeys) key(ctx context.Context, issuer, kid string) (any, error) {
	k.mu.Lock()
	e, ok := k.entries[issuer]
	if !ok {
		e = &issuerEntry{}
		k.entries[issuer] = e
	}
	k.mu.Unlock()

	e.mu.Lock()
	defer e.mu.Unlock()
	now := k.now()
	if e.keys == nil || now.Sub(e.fetched) > issuerCacheTTL || now.Before(e.fetched) {
		if err := k.refresh(ctx, issuer, e); err != nil {
			return nil, err
		}
	}
	if key, ok := findKey(e.keys, kid); ok {
		return key, nil
	}
	if now.Sub(e.fetched) < issuerMinRefresh {
		return nil, errKeyNotFound
	}
	if err := k.refresh(ctx, issuer, e); err != nil {
		return nil, err
	}
	if key, ok := findKey(e.keys, kid); ok {
		return key, nil
	}
	return nil, errKeyNotFound
}

var errKeyNotFound = errors.New("signing key not found in the issuer's JWKS")

func findKey(set *jose.JSONWebKeySet, kid string) (any, bool) {
	var candidates []jose.JSONWebKey
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if kid == "" || k.KeyID == kid {
			candidates = append(candidates, k)
		}
	}
	if len(candidates) != 1 || !candidates[0].IsPublic() {
		return nil, false
	}
	return candidates[0].Key, true
}

func (k *issuerKeys) refresh(ctx context.Context, issuer string, e *issuerEntry) error {
	var disc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := k.getJSON(ctx, strings.TrimSuffix(issuer, "/")+"/.well-known/openid-configuration", &disc); err != nil {
		return fmt.Errorf("fetch discovery document: %w", err)
	}
	if disc.Issuer != issuer {
		return fmt.Errorf("discovery document names issuer %q, not %q", disc.Issuer, issuer)
	}
	var set jose.JSONWebKeySet
	if err := k.getJSON(ctx, disc.JWKSURI, &set); err != nil {
		return fmt.Errorf("fetch JWKS: %w", err)
	}
	e.keys, e.fetched = &set, k.now()
	return nil
}

func (k *issuerKeys) getJSON(ctx context.Context, rawURL string, v any) error {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("%q is not an https URL", rawURL)
	}
	ctx, cancel := context.WithTimeout(ctx, issuerFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return err
	}
	// Kubernetes serves its JWKS as application/jwk-set+json and answers 406 to a strict Accept.
	req.Header.Set("Accept", "application/json, application/jwk-set+json, */*")
	resp, err := k.client.Do(req)
	if err != nil {
		return fmt.Errorf("get %s: %w", u.Redacted(), err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("get %s: status %d", u.Redacted(), resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, issuerDocLimit+1))
	if err != nil {
		return fmt.Errorf("read %s: %w", u.Redacted(), err)
	}
	if len(body) > issuerDocLimit {
		return fmt.Errorf("%s is larger than %d bytes", u.Redacted(), issuerDocLimit)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("decode %s: %w", u.Redacted(), err)
	}
	return nil
}

// NewIssuerClient is the HTTP client for issuers' documents: its own timeouts, https only, even
// across redirects.
func NewIssuerClient(transport http.RoundTripper) *http.Client {
	return &http.Client{
		Transport: transport,
		Timeout:   issuerFetchTimeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if req.URL.Scheme != "https" || len(via) >= 5 {
				return errors.New("refusing redirect")
			}
			return nil
		},
	}
}
