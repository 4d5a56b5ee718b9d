package azure

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
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// PodIdentityCredential gets a pod's token from the node agent's host route (aad-pod-identity's
// NMI protocol): GET {Endpoint}/host/token/?resource=R[&client_id=C] with the podname and podns
// headers, answered with {"token": <IMDS token body>, "clientid": C}. A host-network component
// (the Secrets Store CSI provider) uses it on behalf of the pod it mounts for.
type PodIdentityCredential struct {
	Endpoint     string // e.g. http://127.0.0.1:2579
	PodName      string
	PodNamespace string
	ClientID     string // optional: which of the pod's identities
	Client       *http.Client
}

// ErrPodIdentity reports a refusal by the node agent.
var ErrPodIdentity = errors.New("pod identity token request failed")

// GetToken implements azcore.TokenCredential for a single v1 resource scope.
func (c *PodIdentityCredential) GetToken(ctx context.Context, opts policy.TokenRequestOptions) (azcore.AccessToken, error) {
	if len(opts.Scopes) != 1 {
		return azcore.AccessToken{}, fmt.Errorf("%w: exactly one scope is supported", ErrPodIdentity)
	}
	resource := strings.TrimSuffix(opts.Scopes[0], "/.default")
	q := url.Values{"resource": {resource}}
	if c.ClientID != "" {
		q.Set("client_id", c.ClientID)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(c.Endpoint, "/")+"/host/token/?"+q.Encode(), nil)
	if err != nil {
		return azcore.AccessToken{}, fmt.Errorf("build pod identity request: %w", err)
	}
	req.Header.Set("podname", c.PodName)
	req.Header.Set("podns", c.PodNamespace)
	req.Header.Set("Metadata", "true")
	hc := c.Client
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return azcore.AccessToken{}, fmt.Errorf("%w: %w", ErrPodIdentity, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return azcore.AccessToken{}, fmt.Errorf("read pod identity answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		_ = json.Unmarshal(body, &e)
		return azcore.AccessToken{}, fmt.Errorf("%w for pod %s/%s: HTTP %d %s: %s", ErrPodIdentity, c.PodNamespace, c.PodName, resp.StatusCode, e.Error, e.Description)
	}
	var out struct {
		Token struct {
			AccessToken string          `json:"access_token"`
			ExpiresOn   json.RawMessage `json:"expires_on"`
		} `json:"token"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Token.AccessToken == "" {
		return azcore.AccessToken{}, fmt.Errorf("%w for pod %s/%s: the answer holds no token", ErrPodIdentity, c.PodNamespace, c.PodName)
	}
	exp, err := strconv.ParseInt(strings.Trim(string(out.Token.ExpiresOn), `"`), 10, 64)
	if err != nil {
		return azcore.AccessToken{}, fmt.Errorf("%w for pod %s/%s: expires_on is not a number", ErrPodIdentity, c.PodNamespace, c.PodName)
	}
	return azcore.AccessToken{Token: out.Token.AccessToken, ExpiresOn: time.Unix(exp, 0)}, nil
}
