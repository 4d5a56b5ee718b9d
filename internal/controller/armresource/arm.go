package armresource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
)

// armClient holds the few ARM calls the reconciler makes, on raw JSON: one pipeline (one
// credential) per instance.
type armClient struct {
	pl       runtime.Pipeline
	endpoint string
}

// Poller is an ARM long-running operation.
type Poller = runtime.Poller[json.RawMessage]

func newARMClient(cred azcore.TokenCredential, opts *arm.ClientOptions) (*armClient, error) {
	c, err := arm.NewClient("cerulean-manager", "v1.0.0", cred, opts)
	if err != nil {
		return nil, fmt.Errorf("create ARM client: %w", err)
	}
	return &armClient{pl: c.Pipeline(), endpoint: strings.TrimSuffix(c.Endpoint(), "/")}, nil
}

func (c *armClient) request(ctx context.Context, method, path, apiVersion string, query url.Values, body any) (*http.Response, error) {
	req, err := runtime.NewRequest(ctx, method, c.endpoint+path)
	if err != nil {
		return nil, fmt.Errorf("build ARM request: %w", err)
	}
	q := req.Raw().URL.Query()
	for k, v := range query {
		q[k] = v
	}
	q.Set("api-version", apiVersion)
	req.Raw().URL.RawQuery = q.Encode()
	req.Raw().Header.Set("Accept", "application/json")
	if body != nil {
		if err := runtime.MarshalAsJSON(req, body); err != nil {
			return nil, fmt.Errorf("encode ARM body: %w", err)
		}
	}
	return c.pl.Do(req)
}

// get reads a resource; a missing one is an *azcore.ResponseError with status 404.
func (c *armClient) get(ctx context.Context, id, apiVersion string) (map[string]any, error) {
	resp, err := c.request(ctx, http.MethodGet, id, apiVersion, nil, nil)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return nil, runtime.NewResponseError(resp)
	}
	var out map[string]any
	if err := runtime.UnmarshalAsJSON(resp, &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", id, err)
	}
	return out, nil
}

// post calls an action (listKeys) and returns its JSON.
func (c *armClient) post(ctx context.Context, path, apiVersion string) (map[string]any, error) {
	resp, err := c.request(ctx, http.MethodPost, path, apiVersion, nil, nil)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return nil, runtime.NewResponseError(resp)
	}
	var out map[string]any
	if err := runtime.UnmarshalAsJSON(resp, &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return out, nil
}

// list reads a collection with an optional $filter.
func (c *armClient) list(ctx context.Context, path, apiVersion, filter string) ([]map[string]any, error) {
	q := url.Values{}
	if filter != "" {
		q.Set("$filter", filter)
	}
	resp, err := c.request(ctx, http.MethodGet, path, apiVersion, q, nil)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return nil, runtime.NewResponseError(resp)
	}
	var out struct {
		Value []map[string]any `json:"value"`
	}
	if err := runtime.UnmarshalAsJSON(resp, &out); err != nil {
		return nil, fmt.Errorf("decode %s: %w", path, err)
	}
	return out.Value, nil
}

// beginPut sends the PUT and returns its operation (done already for a synchronous answer).
func (c *armClient) beginPut(ctx context.Context, id, apiVersion string, body map[string]any) (*Poller, error) {
	resp, err := c.request(ctx, http.MethodPut, id, apiVersion, nil, body)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusCreated, http.StatusAccepted) {
		return nil, runtime.NewResponseError(resp)
	}
	return runtime.NewPoller[json.RawMessage](resp, c.pl, nil)
}

// beginDelete sends the DELETE; a resource already gone is a 404 ResponseError.
func (c *armClient) beginDelete(ctx context.Context, id, apiVersion string) (*Poller, error) {
	resp, err := c.request(ctx, http.MethodDelete, id, apiVersion, nil, nil)
	if err != nil {
		return nil, err
	}
	if runtime.HasStatusCode(resp, http.StatusNoContent) || runtime.HasStatusCode(resp, http.StatusNotFound) {
		_ = resp.Body.Close()
		return nil, errGone
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusAccepted) {
		return nil, runtime.NewResponseError(resp)
	}
	return runtime.NewPoller[json.RawMessage](resp, c.pl, nil)
}

// resume continues an operation from its resume token.
func (c *armClient) resume(token string) (*Poller, error) {
	p, err := runtime.NewPollerFromResumeToken[json.RawMessage](token, c.pl, nil)
	if err != nil {
		return nil, fmt.Errorf("resume operation: %w", err)
	}
	return p, nil
}

// errGone is a DELETE of a resource that no longer exists.
var errGone = errors.New("resource already gone")

// step polls an operation once; done reports whether it has ended (err is its failure).
func step(ctx context.Context, p *Poller) (done bool, err error) {
	if !p.Done() {
		if _, err := p.Poll(ctx); err != nil {
			return false, fmt.Errorf("poll operation: %w", err)
		}
	}
	if !p.Done() {
		return false, nil
	}
	if _, err := p.Result(ctx); err != nil {
		return true, err
	}
	return true, nil
}

// statusCode is the HTTP status of an ARM error, 0 for another error.
func statusCode(err error) int {
	var re *azcore.ResponseError
	if errors.As(err, &re) {
		return re.StatusCode
	}
	return 0
}

// isNotFound reports an ARM 404.
func isNotFound(err error) bool { return statusCode(err) == http.StatusNotFound }

// retryAfter is the Retry-After an ARM error advertised (seconds), 0 for none.
func retryAfter(err error) time.Duration {
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.RawResponse == nil {
		return 0
	}
	s := re.RawResponse.Header.Get("Retry-After")
	if n, perr := strconv.Atoi(strings.TrimSpace(s)); perr == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}
