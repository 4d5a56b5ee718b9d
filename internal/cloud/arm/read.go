package arm

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
)

// Read answers a GET of id as ARM would to caller, through the same route and handler, but
// without a token or an RBAC check: for the cloud's own read-only views (the web view), which
// authenticate their user themselves. The api-version is the newest the type accepts.
func (s *Service) Read(ctx context.Context, id string, caller Caller) (json.RawMessage, error) {
	parsed, err := armid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("parse resource id: %w", err)
	}
	rt, err := s.route(http.MethodGet, parsed)
	if err != nil {
		return nil, err
	}
	versions := s.APIVersions(rt.Type)
	if versions == nil {
		versions = s.allVersions()
	}
	if len(versions) == 0 {
		return nil, fmt.Errorf("no api-version for %s", rt.Type)
	}
	version := slices.Max(versions) // dates: the newest sorts last
	u := s.o.BaseURL + parsed.String() + "?api-version=" + url.QueryEscape(version)
	hr, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	res, err := rt.Handle(ctx, &Request{HTTP: hr, ID: parsed, APIVersion: version, Caller: caller, svc: s})
	if err != nil {
		return nil, err
	}
	b, err := json.MarshalIndent(res.Body, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", id, err)
	}
	return b, nil
}
