// Package managedidentity is the Microsoft.ManagedIdentity provider of the local cloud:
// user-assigned identities, each of which is also a principal of the cloud's Entra ID that can
// get tokens (with xms_mirid = its resource id), and their federated identity credentials, kept
// on that principal so the next token request sees every change.
package managedidentity

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Types.
const (
	IdentityType   = "Microsoft.ManagedIdentity/userAssignedIdentities"
	FederatedType  = "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials"
	identityAction = "Microsoft.ManagedIdentity/userAssignedIdentities/"
	ficAction      = "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials/"
)

// Versions are the api-versions accepted: armmsi 2024-11-30, ASO 2023-01-31, the Debian az CLI 2.45 2022-01-31-preview, the
// JavaScript SDK (@azure/arm-msi) 2023-01-31, and the other published versions.
var Versions = []string{
	"2015-08-31-preview", "2018-11-30", "2021-09-30-preview", "2022-01-31-preview", "2023-01-31",
	"2023-07-31-preview", "2024-11-30", "2025-01-31-preview", "2025-05-31-preview",
}

var (
	identityName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{2,127}$`)
	ficName      = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_-]{2,119}$`)
)

// Provider serves Microsoft.ManagedIdentity.
type Provider struct {
	svc *arm.Service
	dir *entra.Directory
}

// Register adds the provider's types and routes to svc; dir is where identities' principals live.
func Register(svc *arm.Service, dir *entra.Directory) *Provider {
	p := &Provider{svc: svc, dir: dir}
	svc.RegisterType(arm.Type{Name: IdentityType, APIVersions: Versions})
	svc.RegisterType(arm.Type{Name: FederatedType, APIVersions: Versions})
	const (
		rg  = "/subscriptions/{subscriptionId}/resourceGroups/rg-example"
		mi  = rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id-example"
		fic = mi + "/federatedIdentityCredentials/fic-example"
	)
	for _, rt := range []arm.Route{
		{Method: http.MethodGet, Type: IdentityType, Collection: true, Action: identityAction + "read", Handle: p.listIdentities, Example: rg + "/providers/Microsoft.ManagedIdentity/userAssignedIdentities"},
		{Method: http.MethodPut, Type: IdentityType, Action: identityAction + "write", Handle: p.putSpec().Serve, Example: mi},
		{Method: http.MethodPatch, Type: IdentityType, Action: identityAction + "write", Handle: p.patchIdentity, Example: mi},
		{Method: http.MethodGet, Type: IdentityType, Action: identityAction + "read", Handle: p.getIdentity, Example: mi},
		{Method: http.MethodDelete, Type: IdentityType, Action: identityAction + "delete", Handle: p.deleteIdentity, Example: mi},
		{Method: http.MethodGet, Type: FederatedType, Collection: true, Action: ficAction + "read", Handle: p.listFICs, Example: mi + "/federatedIdentityCredentials"},
		{Method: http.MethodPut, Type: FederatedType, Action: ficAction + "write", Handle: p.putFIC, Example: fic},
		{Method: http.MethodGet, Type: FederatedType, Action: ficAction + "read", Handle: p.getFIC, Example: fic},
		{Method: http.MethodDelete, Type: FederatedType, Action: ficAction + "delete", Handle: p.deleteFIC, Example: fic},
	} {
		svc.Handle(rt)
	}
	svc.OnDelete(IdentityType, func(tx *store.Tx, r arm.Resource) error {
		var props identityProperties
		if err := json.Unmarshal(r.Properties, &props); err != nil {
			return err
		}
		return dir.DeletePrincipalTx(tx, props.TenantID, props.ClientID)
	})
	return p
}

type identityProperties struct {
	TenantID    string `json:"tenantId"`
	PrincipalID string `json:"principalId"`
	ClientID    string `json:"clientId"`
}

type identityJSON struct {
	ID         string             `json:"id"`
	Name       string             `json:"name"`
	Type       string             `json:"type"`
	Location   string             `json:"location"`
	Tags       map[string]string  `json:"tags,omitempty"`
	Properties identityProperties `json:"properties"`
}

func identityView(r arm.Resource) identityJSON {
	v := identityJSON{ID: r.ID, Name: r.Name, Type: r.Type, Location: r.Location, Tags: r.Tags}
	_ = json.Unmarshal(r.Properties, &v.Properties)
	return v
}

// placed checks that an identity id is where identities live: directly in a resource group.
func placed(id armid.ID, depth int) error {
	if id.ResourceGroup() == "" || len(id.Segments) != depth {
		return arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", id.ResourceType())
	}
	return nil
}

// putSpec is the identity's PUT on the skeleton: a create makes the identity's principal in
// the same transaction (the service makes its ids); an update changes only the tags.
func (p *Provider) putSpec() arm.Put[arm.Envelope] {
	return arm.Put[arm.Envelope]{
		Type: IdentityType, Depth: 3,
		Name: func(name string) error {
			if !identityName.MatchString(name) {
				return arm.ErrInvalidName(name, "User assigned identity names must start with a letter or digit, have 3 to 128 characters, and contain only letters, digits, '-' and '_'.")
			}
			return nil
		},
		Apply: func(tx *store.Tx, res *arm.Resource, created bool, _ *arm.Envelope) error {
			if !created {
				return nil
			}
			pr, err := p.dir.CreatePrincipalTx(tx, entra.Principal{
				TenantID: p.svc.TenantID(), Kind: entra.KindManagedIdentity, DisplayName: res.Name, ResourceID: res.ID,
			})
			if err != nil {
				return err
			}
			res.Properties, err = json.Marshal(identityProperties{TenantID: pr.TenantID, PrincipalID: pr.ObjectID, ClientID: pr.ClientID})
			return err
		},
		View: func(r arm.Resource) any { return identityView(r) },
	}
}

func (p *Provider) patchIdentity(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID, 3); err != nil {
		return httpx.Response{}, err
	}
	return p.svc.PatchTags(ctx, r, func(res arm.Resource) any { return identityView(res) })
}

func (p *Provider) getIdentity(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID, 3); err != nil {
		return httpx.Response{}, err
	}
	res, err := p.svc.GetInGroup(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: identityView(res)}, nil
}

func (p *Provider) deleteIdentity(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID, 3); err != nil {
		return httpx.Response{}, err
	}
	found, err := p.svc.DeleteIfPresent(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.Deleted(found), nil
}

type list[T any] struct {
	Value    []T    `json:"value"`
	NextLink string `json:"nextLink,omitempty"`
}

func (p *Provider) listIdentities(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	all, err := p.svc.List(ctx, r.ID, IdentityType, arm.GroupExistsTx)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.ListResponse(all, identityView), nil
}

// Federated identity credentials.

type ficProperties struct {
	Issuer    string   `json:"issuer"`
	Subject   string   `json:"subject"`
	Audiences []string `json:"audiences"`
}

type ficJSON struct {
	ID         string        `json:"id"`
	Name       string        `json:"name"`
	Type       string        `json:"type"`
	Properties ficProperties `json:"properties"`
}

func ficView(identityID string, f entra.FederatedCredential) ficJSON {
	return ficJSON{
		ID: identityID + "/federatedIdentityCredentials/" + f.Name, Name: f.Name, Type: FederatedType,
		Properties: ficProperties{Issuer: f.Issuer, Subject: f.Subject, Audiences: f.Audiences},
	}
}

// owner loads the identity a credential id names, and its principal.
func (p *Provider) owner(ctx context.Context, id armid.ID) (arm.Resource, entra.Principal, error) {
	if err := placed(id, 4); err != nil {
		return arm.Resource{}, entra.Principal{}, err
	}
	var res arm.Resource
	var pr entra.Principal
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		if res, err = arm.GetTx(tx, id.Parent()); err != nil {
			return err
		}
		var props identityProperties
		if err := json.Unmarshal(res.Properties, &props); err != nil {
			return err
		}
		pr, err = p.dir.PrincipalTx(tx, props.TenantID, props.ClientID)
		return err
	})
	return res, pr, err
}

func findFIC(pr entra.Principal, name string) (entra.FederatedCredential, bool) {
	for _, f := range pr.FederatedCredentials {
		if strings.EqualFold(f.Name, name) {
			return f, true
		}
	}
	return entra.FederatedCredential{}, false
}

func validateFIC(name string, props ficProperties) error {
	if !ficName.MatchString(name) {
		return arm.ErrInvalidName(name, "Federated identity credential names must start with a letter or digit, have 3 to 120 characters, and contain only letters, digits, '-' and '_'.")
	}
	u, err := url.Parse(props.Issuer)
	if err != nil || u.Scheme != "https" || u.Host == "" || len(props.Issuer) > 600 {
		return arm.ErrBadRequest("The issuer must be a valid https URL of at most 600 characters.")
	}
	if props.Subject == "" || len(props.Subject) > 600 {
		return arm.ErrBadRequest("The subject must have 1 to 600 characters.")
	}
	if len(props.Audiences) != 1 || props.Audiences[0] == "" || len(props.Audiences[0]) > 600 {
		return arm.ErrBadRequest("Exactly one audience of 1 to 600 characters is supported.")
	}
	return nil
}

func (p *Provider) putFIC(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var body struct {
		Properties ficProperties `json:"properties"`
	}
	name := r.ID.Name()
	if err := r.Decode(&body); err != nil {
		return httpx.Response{}, err
	}
	if err := validateFIC(name, body.Properties); err != nil {
		return httpx.Response{}, err
	}
	res, pr, err := p.owner(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	// Checked here for ARM's messages; the directory checks again atomically.
	if _, exists := findFIC(pr, name); !exists && len(pr.FederatedCredentials) >= entra.MaxFederatedCredentials {
		return httpx.Response{}, arm.ErrBadRequest("Too many Federated Identity Credentials are written to Managed Identity '%s'. A maximum of %d is allowed.", res.ID, entra.MaxFederatedCredentials)
	}
	for _, f := range pr.FederatedCredentials {
		if !strings.EqualFold(f.Name, name) && f.Issuer == body.Properties.Issuer && f.Subject == body.Properties.Subject {
			return httpx.Response{}, arm.Errorf(http.StatusConflict, "Conflict",
				"Federated Identity Credential '%s' already uses this issuer and subject; issuer and subject must be unique per identity.", f.Name)
		}
	}
	fic := entra.FederatedCredential{Name: name, Issuer: body.Properties.Issuer, Subject: body.Properties.Subject, Audiences: body.Properties.Audiences}
	if cur, ok := findFIC(pr, name); ok {
		fic.Name = cur.Name // the name keeps the case of creation
	}
	created, err := p.dir.PutFederatedCredential(ctx, pr.TenantID, pr.ClientID, fic)
	switch {
	case errors.Is(err, entra.ErrNotFound):
		return httpx.Response{}, arm.ErrNotFound(r.ID.Parent())
	case errors.Is(err, entra.ErrConflict):
		return httpx.Response{}, arm.Errorf(http.StatusConflict, "Conflict", "The federated identity credential conflicts with another one of the identity.")
	case errors.Is(err, entra.ErrInvalid):
		return httpx.Response{}, arm.ErrBadRequest("The federated identity credential is invalid.")
	case err != nil:
		return httpx.Response{}, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return httpx.Response{Status: status, Body: ficView(res.ID, fic)}, nil
}

func (p *Provider) getFIC(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	res, pr, err := p.owner(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	f, ok := findFIC(pr, r.ID.Name())
	if !ok {
		return httpx.Response{}, arm.ErrNotFound(r.ID)
	}
	return httpx.Response{Body: ficView(res.ID, f)}, nil
}

func (p *Provider) listFICs(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	res, pr, err := p.owner(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	out := list[ficJSON]{Value: []ficJSON{}}
	for _, f := range pr.FederatedCredentials {
		out.Value = append(out.Value, ficView(res.ID, f))
	}
	return httpx.Response{Body: out}, nil
}

func (p *Provider) deleteFIC(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	_, pr, err := p.owner(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	if _, ok := findFIC(pr, r.ID.Name()); !ok {
		return httpx.Response{Status: http.StatusNoContent}, nil
	}
	if err := p.dir.DeleteFederatedCredential(ctx, pr.TenantID, pr.ClientID, r.ID.Name()); err != nil && !errors.Is(err, entra.ErrNotFound) {
		return httpx.Response{}, err
	}
	return httpx.Response{Status: http.StatusOK}, nil
}
