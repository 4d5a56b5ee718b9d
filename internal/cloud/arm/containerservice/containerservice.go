// Package containerservice is the Microsoft.ContainerService provider of the local cloud:
// managed clusters, with only what identity needs — the OIDC issuer and the workload identity
// switch. A cluster can be bound to a real local control plane, whose service-account issuer then
// becomes the cluster's issuerURL, so federated credentials name an issuer that really signs tokens.
package containerservice

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// ClusterType is the managed cluster resource type.
const ClusterType = "Microsoft.ContainerService/managedClusters"

const clusterAction = "Microsoft.ContainerService/managedClusters/"

// Versions are the accepted api-versions: armcontainerservice/v6 sends 2025-02-01,
// @azure/arm-containerservice 25.5 2026-06-01, azure-mgmt-containerservice 41.6.0b2
// 2026-05-02-preview, Azure Service Operator 2024-09-01, and the other stable versions current
// SDKs and the CLI send.
var Versions = []string{
	"2023-08-01", "2024-01-01", "2024-02-01", "2024-05-01", "2024-07-01", "2024-08-01", "2024-09-01",
	"2024-10-01", "2025-01-01", "2025-02-01", "2025-03-01", "2025-04-01", "2025-05-01", "2025-07-01",
	"2026-05-02-preview", "2026-06-01",
}

// AKS: 1-63 characters, letters, digits, '-' and '_', starting and ending with a letter or digit.
var clusterName = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9])?$`)

// ErrNotBound reports a cluster that has no local control plane behind it.
var ErrNotBound = errors.New("cluster is not bound to a local control plane")

// Provider serves Microsoft.ContainerService.
type Provider struct {
	svc *arm.Service
}

// Register adds the provider's type and routes to svc.
func Register(svc *arm.Service) *Provider {
	p := &Provider{svc: svc}
	svc.RegisterType(arm.Type{Name: ClusterType, APIVersions: Versions})
	const (
		rg = "/subscriptions/{subscriptionId}/resourceGroups/rg-example"
		mc = rg + "/providers/Microsoft.ContainerService/managedClusters/aks-example"
	)
	for _, rt := range []arm.Route{
		{Method: http.MethodGet, Type: ClusterType, Collection: true, Action: clusterAction + "read", Handle: p.list, Example: rg + "/providers/Microsoft.ContainerService/managedClusters"},
		{Method: http.MethodPut, Type: ClusterType, Action: clusterAction + "write", Handle: p.putSpec().Serve, Example: mc},
		{Method: http.MethodPatch, Type: ClusterType, Action: clusterAction + "write", Handle: p.patch, Example: mc},
		{Method: http.MethodGet, Type: ClusterType, Action: clusterAction + "read", Handle: p.get, Example: mc},
		{Method: http.MethodDelete, Type: ClusterType, Action: clusterAction + "delete", Handle: p.delete, Example: mc},
	} {
		svc.Handle(rt)
	}
	return p
}

// properties are what the cloud keeps of a cluster. Everything else a client sends is accepted
// and returned unchanged in other, so real clients' full bodies round-trip.
type properties struct {
	OIDCIssuerEnabled       bool `json:"oidcIssuerEnabled"`
	WorkloadIdentityEnabled bool `json:"workloadIdentityEnabled"`
	// IssuerID makes an unbound cluster's issuer URL unique and stable, as AKS's is.
	IssuerID string `json:"issuerId"`
	// BoundIssuerURL is the service-account issuer of the local control plane behind the cluster.
	BoundIssuerURL string                     `json:"boundIssuerUrl,omitempty"`
	Other          map[string]json.RawMessage `json:"other,omitempty"`
}

type clusterBody struct {
	Location   string                     `json:"location"`
	Tags       map[string]string          `json:"tags"`
	Properties map[string]json.RawMessage `json:"properties"`
}

type oidcIssuerProfile struct {
	Enabled   *bool  `json:"enabled,omitempty"`
	IssuerURL string `json:"issuerURL,omitempty"`
}

type securityProfile struct {
	WorkloadIdentity *struct {
		Enabled *bool `json:"enabled,omitempty"`
	} `json:"workloadIdentity,omitempty"`
}

// issuerURL is the cluster's OIDC issuer: the bound control plane's, or one in AKS's shape under
// the cloud's address for a cluster with nothing behind it (it signs no tokens).
func (p *Provider) issuerURL(props properties) string {
	if props.BoundIssuerURL != "" {
		return props.BoundIssuerURL
	}
	return p.svc.BaseURL() + "/oidc/" + p.svc.TenantID() + "/" + props.IssuerID + "/"
}

func (p *Provider) view(r arm.Resource) map[string]any {
	var props properties
	_ = json.Unmarshal(r.Properties, &props)
	out := map[string]any{}
	for k, v := range props.Other {
		out[k] = v
	}
	oidc := map[string]any{"enabled": props.OIDCIssuerEnabled}
	if props.OIDCIssuerEnabled {
		oidc["issuerURL"] = p.issuerURL(props)
	}
	out["oidcIssuerProfile"] = oidc
	sec := map[string]any{}
	if raw, ok := props.Other["securityProfile"]; ok {
		_ = json.Unmarshal(raw, &sec)
	}
	sec["workloadIdentity"] = map[string]any{"enabled": props.WorkloadIdentityEnabled}
	out["securityProfile"] = sec
	out["provisioningState"] = arm.StateSucceeded
	out["powerState"] = map[string]string{"code": "Running"}
	view := map[string]any{
		"id": r.ID, "name": r.Name, "type": ClusterType, "location": r.Location, "properties": out,
	}
	if len(r.Tags) > 0 {
		view["tags"] = r.Tags
	}
	return view
}

// placed checks that an id names a cluster directly in a resource group.
func placed(id armid.ID) error {
	if id.ResourceGroup() == "" || len(id.Segments) != 3 {
		return arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", id.ResourceType())
	}
	return nil
}

// merge applies a request body to the stored properties. Turning the OIDC issuer off again, and
// workload identity without the issuer, are refused as AKS refuses them.
func merge(cur properties, body map[string]json.RawMessage) (properties, error) {
	next := cur
	next.Other = map[string]json.RawMessage{}
	for k, v := range body {
		switch k {
		case "oidcIssuerProfile", "provisioningState", "powerState":
		default:
			next.Other[k] = v
		}
	}
	if raw, ok := body["oidcIssuerProfile"]; ok {
		var o oidcIssuerProfile
		if err := arm.DecodeJSON(raw, &o); err != nil {
			return cur, err
		}
		if o.Enabled != nil {
			if cur.OIDCIssuerEnabled && !*o.Enabled {
				return cur, arm.Errorf(http.StatusBadRequest, "OIDCIssuerFeatureCannotBeDisabled", "OIDC issuer feature cannot be disabled once it is enabled.")
			}
			next.OIDCIssuerEnabled = *o.Enabled
		}
	}
	if raw, ok := body["securityProfile"]; ok {
		var s securityProfile
		if err := arm.DecodeJSON(raw, &s); err != nil {
			return cur, err
		}
		if s.WorkloadIdentity != nil && s.WorkloadIdentity.Enabled != nil {
			next.WorkloadIdentityEnabled = *s.WorkloadIdentity.Enabled
		}
	}
	if next.WorkloadIdentityEnabled && !next.OIDCIssuerEnabled {
		return cur, arm.Errorf(http.StatusBadRequest, "OIDCIssuerNotEnabled", "Enabling workload identity requires the OIDC issuer to be enabled (properties.oidcIssuerProfile.enabled).")
	}
	return next, nil
}

// putSpec is the cluster's PUT on the skeleton: a create gets its issuer id, every PUT merges
// the body's properties into the stored ones.
func (p *Provider) putSpec() arm.Put[clusterBody] {
	return arm.Put[clusterBody]{
		Type: ClusterType, Depth: 3,
		Name: func(name string) error {
			if !clusterName.MatchString(name) {
				return arm.ErrInvalidName(name, "Managed cluster names must have 1 to 63 characters, contain only letters, digits, '-' and '_', and start and end with a letter or digit.")
			}
			return nil
		},
		Apply: func(_ *store.Tx, res *arm.Resource, created bool, b *clusterBody) error {
			var props properties
			if created {
				props.IssuerID = uuid.NewString()
			} else if err := json.Unmarshal(res.Properties, &props); err != nil {
				return fmt.Errorf("decode stored cluster: %w", err)
			}
			props, err := merge(props, b.Properties)
			if err != nil {
				return err
			}
			res.Properties, err = json.Marshal(props)
			return err
		},
		View: func(r arm.Resource) any { return p.view(r) },
	}
}

// patch updates tags, as the SDK's BeginUpdateTags does.
func (p *Provider) patch(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID); err != nil {
		return httpx.Response{}, err
	}
	return p.svc.PatchTags(ctx, r, func(res arm.Resource) any { return p.view(res) })
}

func (p *Provider) get(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID); err != nil {
		return httpx.Response{}, err
	}
	var out arm.Resource
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		if err := arm.CheckGroupTx(tx, r.ID); err != nil {
			return err
		}
		var err error
		out, err = arm.GetTx(tx, r.ID)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: p.view(out)}, nil
}

// delete is long-running, as AKS's is: the SDK's poller expects 202 (or 204 when there is
// nothing to delete).
func (p *Provider) delete(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID); err != nil {
		return httpx.Response{}, err
	}
	var cur arm.Resource
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		cur, err = arm.GetTx(tx, r.ID)
		return err
	})
	if arm.IsNotFound(err) {
		return httpx.Response{Status: http.StatusNoContent}, nil
	}
	if err != nil {
		return httpx.Response{}, err
	}
	return p.svc.BeginDelete(ctx, r, cur)
}

func (p *Provider) list(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	all, err := p.svc.List(ctx, r.ID, ClusterType, arm.CheckGroupTx)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.ListResponse(all, p.view), nil
}

// Bind puts a local control plane behind an existing cluster: its issuerURL becomes issuer, the
// control plane's service-account issuer. It is an in-process call, not an ARM route, because
// it decides which issuer a cluster stands for.
func Bind(ctx context.Context, svc *arm.Service, clusterID, issuer string) error {
	id, err := armid.Parse(clusterID)
	if err != nil {
		return fmt.Errorf("bind cluster: %w", err)
	}
	if u, err := url.Parse(issuer); err != nil || u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("bind cluster: issuer %q is not an https URL", issuer)
	}
	_, err = arm.UpdateProperties(ctx, svc.Store(), id, func(cur *arm.Resource, props *properties) error {
		if !strings.EqualFold(cur.Type, ClusterType) {
			return fmt.Errorf("%s is a %s", clusterID, cur.Type)
		}
		props.BoundIssuerURL = issuer
		return nil
	})
	if err != nil {
		return fmt.Errorf("bind cluster: %w", err)
	}
	return nil
}
