// Package identitycreds is a client of Azure's managed-identity data plane ("Managed Identity
// Data Plane API", 2024-01-01): a resource provider POSTs the identity URL ARM gave it
// (x-ms-identity-url) with the resource ids of the user-assigned identities it hosts, and gets
// each identity's credentials, a client certificate registered on the identity's principal, as
// UserAssignedIdentityCredentials (the credentials file of the HyperShift flow).
package identitycreds

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"

	"github.com/cerulean/cerulean/pkg/hcpcredentials"
)

// APIVersion is the data plane's api-version.
const APIVersion = "2024-01-01"

// ErrIncomplete reports an answer without the identity asked for, or without a field a
// credentials file needs.
var ErrIncomplete = errors.New("incomplete managed identity credentials")

// Credentials are one identity's credentials: the credentials file and the identity's id.
type Credentials struct {
	hcpcredentials.File
	ResourceID string `json:"resource_id"`
}

// Options configure a Client.
type Options struct {
	// URL is the identity URL (x-ms-identity-url), query included.
	URL string
	// Credential authenticates the caller; Scope is the token's scope (ARM's audience + "/.default").
	Credential azcore.TokenCredential
	Scope      string
	// ClientOptions are the pipeline's options (transport, retries).
	ClientOptions azcore.ClientOptions
}

// Client asks the data plane for credentials.
type Client struct {
	url      string
	pipeline runtime.Pipeline
}

// New returns a client.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("create identity client: identity URL %q is not an https URL", o.URL)
	}
	if o.Credential == nil || o.Scope == "" {
		return nil, errors.New("create identity client: no credential or scope")
	}
	bearer := runtime.NewBearerTokenPolicy(o.Credential, []string{o.Scope}, nil)
	opts := o.ClientOptions
	return &Client{url: o.URL, pipeline: runtime.NewPipeline("identitycreds", "v1", runtime.PipelineOptions{PerRetry: []policy.Policy{bearer}}, &opts)}, nil
}

// Get returns new credentials for the identity with resource id id. Errors are the data plane's
// *azcore.ResponseError (403 when the caller may not assign the identity), wrapped.
func (c *Client) Get(ctx context.Context, id string) (Credentials, error) {
	u, _ := url.Parse(c.url)
	q := u.Query()
	q.Set("api-version", APIVersion)
	u.RawQuery = q.Encode()
	req, err := runtime.NewRequest(ctx, http.MethodPost, u.String())
	if err != nil {
		return Credentials{}, fmt.Errorf("build credentials request: %w", err)
	}
	if err := runtime.MarshalAsJSON(req, map[string][]string{"identityIds": {id}}); err != nil {
		return Credentials{}, fmt.Errorf("build credentials request: %w", err)
	}
	resp, err := c.pipeline.Do(req)
	if err != nil {
		return Credentials{}, fmt.Errorf("request managed identity credentials: %w", err)
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return Credentials{}, fmt.Errorf("request managed identity credentials: %w", runtime.NewResponseError(resp))
	}
	body, err := runtime.Payload(resp)
	if err != nil {
		return Credentials{}, fmt.Errorf("read managed identity credentials: %w", err)
	}
	var out struct {
		ExplicitIdentities []Credentials `json:"explicit_identities"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return Credentials{}, fmt.Errorf("%w: the answer is not a credentials object", ErrIncomplete)
	}
	for _, ci := range out.ExplicitIdentities {
		if !strings.EqualFold(ci.ResourceID, id) {
			continue
		}
		switch {
		case ci.ClientID == "" || ci.ClientSecret == "" || ci.TenantID == "" || ci.AuthenticationEndpoint == "":
			return Credentials{}, fmt.Errorf("%w: identity %s has no client id, secret, tenant or endpoint", ErrIncomplete, id)
		case ci.NotBefore.IsZero() || ci.NotAfter.IsZero() || ci.RenewAfter.IsZero() || ci.CannotRenewAfter.IsZero():
			return Credentials{}, fmt.Errorf("%w: identity %s has no validity times", ErrIncomplete, id)
		}
		return ci, nil
	}
	return Credentials{}, fmt.Errorf("%w: the answer holds no credentials for %s", ErrIncomplete, id)
}
