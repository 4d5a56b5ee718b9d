package importer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"
)

// armReader is the ARM access the importer uses: reads only.
type armReader interface {
	// get reads a resource as ARM returns it.
	get(ctx context.Context, id, apiVersion string) (map[string]any, error)
	// list reads a collection (a parent's children of one type), every page; filter is ARM's
	// $filter or "".
	list(ctx context.Context, path, apiVersion, filter string) ([]map[string]any, error)
	// groupResources lists the ids and types of a resource group's top-level resources.
	groupResources(ctx context.Context, subscription, group string) ([]listed, error)
	// resourceTypes are a provider's registered types (without the namespace, as ARM lists them:
	// "namespaces", "namespaces/queues") and each one's api-versions.
	resourceTypes(ctx context.Context, subscription, namespace string) (map[string][]string, error)
}

// listed is one entry of a resource group's resource list.
type listed struct{ ID, Type string }

// sdkReader reads through the Azure SDK for Go: armresources' generic client for resources,
// resource groups and providers, and an arm.Client pipeline for child collections, which the
// generic client has no call for.
type sdkReader struct {
	cred azcore.TokenCredential
	opts *arm.ClientOptions
	pl   runtime.Pipeline
	base string

	mu        sync.Mutex
	clients   map[string]*armresources.Client
	providers map[string]*armresources.ProvidersClient
	types     map[string]map[string][]string // by subscription/namespace, lower case: read once
}

func newSDKReader(cred azcore.TokenCredential, opts *arm.ClientOptions) (*sdkReader, error) {
	c, err := arm.NewClient("cerulean-import", "v1.0.0", cred, opts)
	if err != nil {
		return nil, fmt.Errorf("create ARM client: %w", err)
	}
	return &sdkReader{cred: cred, opts: opts, pl: c.Pipeline(), base: strings.TrimSuffix(c.Endpoint(), "/"),
		clients: map[string]*armresources.Client{}, providers: map[string]*armresources.ProvidersClient{},
		types: map[string]map[string][]string{}}, nil
}

func (r *sdkReader) client(subscription string) (*armresources.Client, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[subscription]; ok {
		return c, nil
	}
	c, err := armresources.NewClient(subscription, r.cred, r.opts)
	if err != nil {
		return nil, fmt.Errorf("create ARM client: %w", err)
	}
	r.clients[subscription] = c
	return c, nil
}

// get is GetByID with the type's api-version; the body is decoded from the raw answer, so no
// member the SDK's GenericResource does not model is lost.
func (r *sdkReader) get(ctx context.Context, id, apiVersion string) (map[string]any, error) {
	c, err := r.client(subscriptionOf(id))
	if err != nil {
		return nil, err
	}
	var resp *http.Response
	if _, err := c.GetByID(policy.WithCaptureResponse(ctx, &resp), id, apiVersion, nil); err != nil {
		return nil, err
	}
	raw, err := runtime.Payload(resp)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", id, err)
	}
	return decodeObject(raw, id)
}

func (r *sdkReader) list(ctx context.Context, path, apiVersion, filter string) ([]map[string]any, error) {
	var out []map[string]any
	q := url.Values{"api-version": {apiVersion}}
	if filter != "" {
		q.Set("$filter", filter)
	}
	next := r.base + path + "?" + q.Encode()
	for next != "" {
		req, err := runtime.NewRequest(ctx, http.MethodGet, next)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", path, err)
		}
		req.Raw().Header.Set("Accept", "application/json")
		resp, err := r.pl.Do(req)
		if err != nil {
			return nil, err
		}
		if !runtime.HasStatusCode(resp, http.StatusOK) {
			return nil, runtime.NewResponseError(resp)
		}
		var page struct {
			Value    []map[string]any `json:"value"`
			NextLink string           `json:"nextLink"`
		}
		if err := runtime.UnmarshalAsJSON(resp, &page); err != nil {
			return nil, fmt.Errorf("list %s: %w", path, err)
		}
		out = append(out, page.Value...)
		next = page.NextLink
	}
	return out, nil
}

func (r *sdkReader) groupResources(ctx context.Context, subscription, group string) ([]listed, error) {
	c, err := r.client(subscription)
	if err != nil {
		return nil, err
	}
	var out []listed
	pager := c.NewListByResourceGroupPager(group, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, res := range page.Value {
			if res != nil && res.ID != nil && res.Type != nil {
				out = append(out, listed{ID: *res.ID, Type: *res.Type})
			}
		}
	}
	return out, nil
}

func (r *sdkReader) resourceTypes(ctx context.Context, subscription, namespace string) (map[string][]string, error) {
	key := strings.ToLower(subscription + "/" + namespace)
	r.mu.Lock()
	if types, ok := r.types[key]; ok {
		r.mu.Unlock()
		return types, nil
	}
	c, ok := r.providers[subscription]
	if !ok {
		var err error
		if c, err = armresources.NewProvidersClient(subscription, r.cred, r.opts); err != nil {
			r.mu.Unlock()
			return nil, fmt.Errorf("create ARM client: %w", err)
		}
		r.providers[subscription] = c
	}
	r.mu.Unlock()
	p, err := c.Get(ctx, namespace, nil)
	if err != nil {
		return nil, err
	}
	types := map[string][]string{}
	for _, rt := range p.ResourceTypes {
		if rt == nil || rt.ResourceType == nil {
			continue
		}
		var versions []string
		for _, v := range rt.APIVersions {
			if v != nil {
				versions = append(versions, *v)
			}
		}
		types[*rt.ResourceType] = versions
	}
	r.mu.Lock()
	r.types[key] = types
	r.mu.Unlock()
	return types, nil
}

// newestStable is the greatest api-version without a suffix (-preview, -beta).
func newestStable(versions []string) string {
	best := ""
	for _, v := range versions {
		if len(v) == len("2006-01-02") && v > best {
			best = v
		}
	}
	return best
}

var errNoVersion = errors.New("no api-version")

func decodeObject(raw []byte, what string) (map[string]any, error) {
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil || out == nil {
		return nil, fmt.Errorf("read %s: ARM's answer is not a JSON object", what)
	}
	return out, nil
}
