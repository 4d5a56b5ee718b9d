// Package resources is the Microsoft.Resources provider of the local cloud: the one subscription
// (get, list) and resource groups (PUT, GET, HEAD, list, and DELETE as a long-running operation
// that deletes everything the group holds).
package resources

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"unicode"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Types.
const (
	SubscriptionType  = "Microsoft.Resources/subscriptions"
	ResourceGroupType = "Microsoft.Resources/resourceGroups"
)

// API versions: the current Go SDK (armresources/v4 2025-04-01, armsubscriptions 2022-12-01),
// ASO (2020-06-01), the Debian az CLI 2.45 (2022-09-01, subscriptions 2022-12-01) and the
// JavaScript SDK (@azure/arm-resources 2021-04-01, @azure/arm-subscriptions 2016-06-01/2021-01-01).
var (
	SubscriptionVersions = []string{
		"2016-06-01", "2018-06-01", "2019-06-01", "2019-11-01", "2020-01-01", "2021-01-01", "2022-01-01", "2022-09-01", "2022-12-01",
		"2024-03-01", "2024-07-01", "2024-11-01", "2025-01-01", "2025-03-01", "2025-04-01",
	}
	ResourceGroupVersions = []string{
		"2019-05-10", "2019-07-01", "2019-08-01", "2019-10-01", "2020-06-01", "2020-08-01", "2020-10-01", "2021-01-01", "2021-04-01",
		"2022-09-01", "2023-07-01", "2024-03-01", "2024-07-01", "2024-11-01", "2025-01-01", "2025-03-01", "2025-04-01",
	}
)

// Provider serves Microsoft.Resources.
type Provider struct {
	svc *arm.Service
	// SubscriptionName is the display name of the cloud's subscription.
	SubscriptionName string
}

// Register adds the provider's types and routes to svc.
func Register(svc *arm.Service, subscriptionName string) *Provider {
	p := &Provider{svc: svc, SubscriptionName: subscriptionName}
	svc.RegisterType(arm.Type{Name: SubscriptionType, APIVersions: SubscriptionVersions})
	svc.RegisterType(arm.Type{Name: ResourceGroupType, APIVersions: ResourceGroupVersions})
	const (
		sub = "/subscriptions/{subscriptionId}"
		rg  = sub + "/resourceGroups/rg-example"
	)
	read := "Microsoft.Resources/subscriptions/read"
	rgRead := "Microsoft.Resources/subscriptions/resourceGroups/read"
	for _, rt := range []arm.Route{
		{Method: http.MethodGet, Type: SubscriptionType, Collection: true, Action: read, Handle: p.listSubscriptions, Example: "/subscriptions"},
		{Method: http.MethodGet, Type: SubscriptionType, Action: read, Handle: p.getSubscription, Example: sub},
		{Method: http.MethodGet, Type: ResourceGroupType, Collection: true, Action: rgRead, Handle: p.listGroups, Example: sub + "/resourcegroups"},
		{Method: http.MethodPut, Type: ResourceGroupType, Action: "Microsoft.Resources/subscriptions/resourceGroups/write", Handle: p.putGroup, Example: rg},
		{Method: http.MethodGet, Type: ResourceGroupType, Action: rgRead, Handle: p.getGroup, Example: rg},
		{Method: http.MethodHead, Type: ResourceGroupType, Action: rgRead, Handle: p.headGroup, Example: rg},
		{Method: http.MethodDelete, Type: ResourceGroupType, Action: "Microsoft.Resources/subscriptions/resourceGroups/delete", Handle: p.deleteGroup, Example: rg},
	} {
		svc.Handle(rt)
	}
	return p
}

type subscription struct {
	ID                   string            `json:"id"`
	SubscriptionID       string            `json:"subscriptionId"`
	TenantID             string            `json:"tenantId"`
	DisplayName          string            `json:"displayName"`
	State                string            `json:"state"`
	AuthorizationSource  string            `json:"authorizationSource"`
	SubscriptionPolicies map[string]string `json:"subscriptionPolicies"`
}

func (p *Provider) subscription() subscription {
	id := p.svc.SubscriptionID()
	return subscription{
		ID: "/subscriptions/" + id, SubscriptionID: id, TenantID: p.svc.TenantID(), DisplayName: p.SubscriptionName,
		State: "Enabled", AuthorizationSource: "RoleBased",
		SubscriptionPolicies: map[string]string{"locationPlacementId": "Public_2014-09-01", "quotaId": "PayAsYouGo_2014-09-01", "spendingLimit": "Off"},
	}
}

func (p *Provider) listSubscriptions(context.Context, *arm.Request) (httpx.Response, error) {
	return httpx.Response{Body: list[subscription]{Value: []subscription{p.subscription()}}}, nil
}

func (p *Provider) getSubscription(context.Context, *arm.Request) (httpx.Response, error) {
	return httpx.Response{Body: p.subscription()}, nil
}

type list[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}

// groupBody is the PUT body of a resource group.
type groupBody struct {
	Location  string            `json:"location"`
	Tags      map[string]string `json:"tags"`
	ManagedBy string            `json:"managedBy"`
}

type groupProperties struct {
	ProvisioningState string `json:"provisioningState"`
}

// ValidGroupName applies Azure's rule: 1-90 letters, digits, '_', '-', '.', '(' or ')', not
// ending in '.'.
func ValidGroupName(name string) bool {
	if name == "" || len(name) > 90 || strings.HasSuffix(name, ".") {
		return false
	}
	for _, r := range name {
		if !(unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_-.()", r)) {
			return false
		}
	}
	return true
}

const groupNameRule = "Resource group names only allow alphanumeric characters, periods, underscores, hyphens and parenthesis, cannot end in a period, and have 1 to 90 characters."

func validLocation(l string) bool {
	if l == "" || len(l) > 64 {
		return false
	}
	for _, r := range l {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == ' ') {
			return false
		}
	}
	return true
}

func (p *Provider) putGroup(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	name := r.ID.ResourceGroup()
	if !ValidGroupName(name) {
		return httpx.Response{}, arm.Errorf(http.StatusBadRequest, "InvalidResourceGroup", "The provided resource group name '%s' has these invalid characters or length. %s", name[:min(len(name), 128)], groupNameRule)
	}
	var body groupBody
	if err := r.Decode(&body); err != nil {
		return httpx.Response{}, err
	}
	if !validLocation(body.Location) {
		return httpx.Response{}, arm.Errorf(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition and must be a location name.")
	}
	if err := arm.ValidateTags(body.Tags); err != nil {
		return httpx.Response{}, err
	}
	props, _ := json.Marshal(groupProperties{ProvisioningState: arm.StateSucceeded})
	var out arm.Resource
	created := false
	err := p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		cur, err := arm.GetTx(tx, r.ID)
		switch {
		case err == nil:
			if g := decodeState(cur); g == arm.StateDeleting {
				return arm.Errorf(http.StatusConflict, "ResourceGroupBeingDeleted", "The resource group '%s' is in deprovisioning state and cannot perform this operation.", cur.Name)
			}
			if !strings.EqualFold(arm.NormalizeLocation(cur.Location), arm.NormalizeLocation(body.Location)) {
				return arm.Errorf(http.StatusConflict, "InvalidResourceGroupLocation",
					"Invalid resource group location '%s'. The Resource group already exists in location '%s'.", body.Location, cur.Location)
			}
			out = cur
		case arm.IsNotFound(err):
			created = true
			out = arm.Resource{ID: r.ID.String(), Name: name, Type: ResourceGroupType, Location: arm.NormalizeLocation(body.Location)}
		default:
			return err
		}
		out.Tags, out.ManagedBy, out.Properties = body.Tags, body.ManagedBy, props
		return arm.PutTx(tx, out)
	})
	if err != nil {
		return httpx.Response{}, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return httpx.Response{Status: status, Body: groupView(out)}, nil
}

func decodeState(r arm.Resource) string {
	var g groupProperties
	_ = json.Unmarshal(r.Properties, &g)
	return g.ProvisioningState
}

type groupJSON struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	ManagedBy  string            `json:"managedBy,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	Properties json.RawMessage   `json:"properties"`
}

func groupView(r arm.Resource) groupJSON {
	return groupJSON{ID: r.ID, Name: r.Name, Type: r.Type, Location: r.Location, ManagedBy: r.ManagedBy, Tags: r.Tags, Properties: r.Properties}
}

func (p *Provider) get(ctx context.Context, id armid.ID) (arm.Resource, error) {
	var out arm.Resource
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		out, err = arm.GetTx(tx, id)
		return err
	})
	if arm.IsNotFound(err) {
		return out, arm.ErrResourceGroupNotFound(id.ResourceGroup())
	}
	return out, err
}

func (p *Provider) getGroup(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	g, err := p.get(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: groupView(g)}, nil
}

func (p *Provider) headGroup(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if _, err := p.get(ctx, r.ID); err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Status: http.StatusNoContent}, nil
}

func (p *Provider) listGroups(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var groups []arm.Resource
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		groups, err = arm.ListTx(tx, r.ID.Parent(), ResourceGroupType)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	out := list[groupJSON]{Value: []groupJSON{}}
	for _, g := range groups {
		out.Value = append(out.Value, groupView(g))
	}
	return httpx.Response{Body: out}, nil
}

func (p *Provider) deleteGroup(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	g, err := p.get(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return p.svc.BeginDelete(ctx, r, g)
}
