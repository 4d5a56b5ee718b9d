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

// armAPI is the ARM access a pass uses: the few calls it makes, on raw JSON.
type armAPI interface {
	get(ctx context.Context, id, apiVersion string) (map[string]any, error)
	post(ctx context.Context, path, apiVersion string) (map[string]any, error)
	list(ctx context.Context, path, apiVersion, filter string) ([]map[string]any, error)
	beginPut(ctx context.Context, id, apiVersion string, body map[string]any) (*Poller, time.Duration, error)
	beginDelete(ctx context.Context, id, apiVersion string) (*Poller, error)
	beginPost(ctx context.Context, path, apiVersion string) (*Poller, error)
	resume(token string) (*Poller, error)
}

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
	var out map[string]any
	err := c.callJSON(ctx, http.MethodGet, id, apiVersion, nil, &out)
	return out, err
}

// post calls an action (listKeys) and returns its JSON.
func (c *armClient) post(ctx context.Context, path, apiVersion string) (map[string]any, error) {
	var out map[string]any
	err := c.callJSON(ctx, http.MethodPost, path, apiVersion, nil, &out)
	return out, err
}

// list reads a collection with an optional $filter.
func (c *armClient) list(ctx context.Context, path, apiVersion, filter string) ([]map[string]any, error) {
	q := url.Values{}
	if filter != "" {
		q.Set("$filter", filter)
	}
	var out struct {
		Value []map[string]any `json:"value"`
	}
	err := c.callJSON(ctx, http.MethodGet, path, apiVersion, q, &out)
	return out.Value, err
}

// callJSON sends a request without a body that ARM answers with 200 and JSON, decoded into out.
func (c *armClient) callJSON(ctx context.Context, method, path, apiVersion string, query url.Values, out any) error {
	resp, err := c.request(ctx, method, path, apiVersion, query, nil)
	if err != nil {
		return err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK) {
		return runtime.NewResponseError(resp)
	}
	if err := runtime.UnmarshalAsJSON(resp, out); err != nil {
		return fmt.Errorf("decode %s: %w", path, err)
	}
	return nil
}

// beginPut sends the PUT and returns its operation (done already for a synchronous answer) and
// the wait ARM advertised before the first poll.
func (c *armClient) beginPut(ctx context.Context, id, apiVersion string, body map[string]any) (*Poller, time.Duration, error) {
	resp, err := c.request(ctx, http.MethodPut, id, apiVersion, nil, body)
	if err != nil {
		return nil, 0, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusCreated, http.StatusAccepted) {
		return nil, 0, runtime.NewResponseError(resp)
	}
	p, err := runtime.NewPoller[json.RawMessage](resp, c.pl, nil)
	return p, advertisedWait(resp), err
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

// beginPost starts an action ARM may run as an operation (a deleted vault's purge).
func (c *armClient) beginPost(ctx context.Context, path, apiVersion string) (*Poller, error) {
	resp, err := c.request(ctx, http.MethodPost, path, apiVersion, nil, nil)
	if err != nil {
		return nil, err
	}
	if !runtime.HasStatusCode(resp, http.StatusOK, http.StatusAccepted, http.StatusNoContent) {
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

// stepPoller polls an operation once; done reports whether it has ended (err is its failure), wait
// how long ARM asked to wait before the next poll while it runs.
func stepPoller(ctx context.Context, p *Poller) (done bool, wait time.Duration, err error) {
	if !p.Done() {
		resp, err := p.Poll(ctx)
		if err != nil {
			return false, 0, fmt.Errorf("poll operation: %w", err)
		}
		wait = advertisedWait(resp)
	}
	if !p.Done() {
		return false, wait, nil
	}
	if _, err := p.Result(ctx); err != nil {
		return true, 0, err
	}
	return true, 0, nil
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
	if !errors.As(err, &re) {
		return 0
	}
	return advertisedWait(re.RawResponse)
}

// advertisedWait is how long a response asks the client to wait before it asks again
// (retry-after-ms, x-ms-retry-after-ms or Retry-After in seconds, as the SDK reads them); 0 for none.
func advertisedWait(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	for _, h := range []string{"Retry-After-Ms", "X-Ms-Retry-After-Ms"} {
		if n, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get(h))); err == nil && n > 0 {
			return time.Duration(n) * time.Millisecond
		}
	}
	if n, err := strconv.Atoi(strings.TrimSpace(resp.Header.Get("Retry-After"))); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}
