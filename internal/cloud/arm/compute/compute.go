// Package compute is the Microsoft.Compute provider of the local cloud: virtual machines and
// virtual machine scale sets, only as far as identity needs them. Nothing runs; a resource is a
// record with a location, tags, the client's properties (kept loosely, so whatever a real client
// sends for a minimal VM is accepted) and an identity: a system-assigned one, which is a principal
// of the cloud's Entra ID with xms_mirid = the resource's id, and user-assigned ones, which the
// caller must be allowed to assign. The managed-identity endpoints (package msi) read the
// assignments through AssignedTx.
package compute

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Types.
const (
	VirtualMachineType = "Microsoft.Compute/virtualMachines"
	ScaleSetType       = "Microsoft.Compute/virtualMachineScaleSets"
)

// Versions are the accepted api-versions: armcompute/v8 and @azure/arm-compute 25 send
// 2026-04-01, azure-mgmt-compute 38 2026-03-01; the rest are the published versions that older
// SDKs, aad-pod-identity and the Azure CLI send.
var Versions = []string{
	"2017-03-30", "2017-12-01", "2018-04-01", "2018-06-01", "2018-10-01", "2019-03-01", "2019-07-01", "2019-12-01",
	"2020-06-01", "2020-12-01", "2021-03-01", "2021-04-01", "2021-07-01", "2021-11-01", "2022-03-01", "2022-08-01",
	"2022-11-01", "2023-03-01", "2023-07-01", "2023-09-01", "2024-03-01", "2024-07-01", "2024-11-01", "2025-04-01",
	"2025-11-01", "2026-03-01", "2026-04-01",
}

// Names: 1 to 64 letters, digits, '-', '_' and '.', starting with a letter or digit and not
// ending with '.' or '-' (Azure's rule for Linux VMs; Windows' 15-character limit is not applied).
var computeName = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9_.-]{0,62}[a-zA-Z0-9_])?$`)

// kind is what differs between the two types.
type kind struct {
	typ    string
	action string // the RBAC action prefix
	idProp string // the property holding the generated unique id
}

var (
	vmKind   = kind{typ: VirtualMachineType, action: "Microsoft.Compute/virtualMachines/", idProp: "vmId"}
	vmssKind = kind{typ: ScaleSetType, action: "Microsoft.Compute/virtualMachineScaleSets/", idProp: "uniqueId"}
)

// Provider serves Microsoft.Compute.
type Provider struct {
	svc *arm.Service
	dir *entra.Directory
}

// Register adds the provider's types and routes to svc; dir holds system-assigned identities'
// principals.
func Register(svc *arm.Service, dir *entra.Directory) *Provider {
	p := &Provider{svc: svc, dir: dir}
	const rg = "/subscriptions/{subscriptionId}/resourceGroups/rg-example/providers/"
	for _, k := range []kind{vmKind, vmssKind} {
		svc.RegisterType(arm.Type{Name: k.typ, APIVersions: Versions})
		example := rg + k.typ + "/example"
		for _, rt := range []arm.Route{
			{Method: http.MethodPut, Type: k.typ, Action: k.action + "write", Handle: p.put(k), Example: example},
			{Method: http.MethodPatch, Type: k.typ, Action: k.action + "write", Handle: p.patch(k), Example: example},
			{Method: http.MethodGet, Type: k.typ, Action: k.action + "read", Handle: p.get, Example: example},
			{Method: http.MethodDelete, Type: k.typ, Action: k.action + "delete", Handle: p.delete, Example: example},
		} {
			svc.Handle(rt)
		}
		// Deleting the resource (or its group) deletes its system-assigned principal.
		svc.OnDelete(k.typ, func(tx *store.Tx, r arm.Resource) error {
			var st stored
			if err := json.Unmarshal(r.Properties, &st); err != nil {
				return err
			}
			if st.Identity != nil && st.Identity.System {
				return dir.DeletePrincipalTx(tx, st.Identity.TenantID, st.Identity.ClientID)
			}
			return nil
		})
	}
	return p
}

// stored is what the provider keeps in arm.Resource.Properties.
type stored struct {
	Properties json.RawMessage `json:"properties,omitempty"` // the client's, without secrets
	Identity   *identity       `json:"identity,omitempty"`
	SKU        json.RawMessage `json:"sku,omitempty"`
	Zones      json.RawMessage `json:"zones,omitempty"`
	Plan       json.RawMessage `json:"plan,omitempty"`
	UniqueID   string          `json:"uniqueId"`
	Created    time.Time       `json:"created"`
}

// body is a PUT or PATCH body. Everything but location, tags and identity is kept as sent.
type body struct {
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags"`
	Identity   *identityBody     `json:"identity"`
	Properties json.RawMessage   `json:"properties"`
	SKU        json.RawMessage   `json:"sku"`
	Zones      json.RawMessage   `json:"zones"`
	Plan       json.RawMessage   `json:"plan"`
}

func (p *Provider) decode(r *arm.Request, k kind) (body, error) {
	if id := r.ID; id.ResourceGroup() == "" || len(id.Segments) != 3 {
		return body{}, arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", k.typ)
	}
	if name := r.ID.Name(); !computeName.MatchString(name) {
		return body{}, arm.ErrInvalidName(name, "Names must have 1 to 64 letters, digits, '-', '_' or '.', start with a letter or digit and not end with '.' or '-'.")
	}
	var b body
	if err := r.Decode(&b); err != nil {
		return body{}, err
	}
	if err := arm.ValidateTags(b.Tags); err != nil {
		return body{}, err
	}
	if len(b.Properties) > 0 && !isObject(b.Properties) {
		return body{}, arm.ErrInvalidContent("the value at 'properties' must be an object.")
	}
	return b, nil
}

// put is the PUT skeleton with the identity planned (and the assign actions checked) before
// the transaction, from what is stored now; the transaction applies the plan.
func (p *Provider) put(k kind) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		var want plan
		var checked []armid.ID
		spec := arm.Put[body]{
			Type: k.typ, Depth: 3, Name: checkName,
			Check: func(ctx context.Context, r *arm.Request, b *body) error {
				if len(b.Properties) > 0 && !isObject(b.Properties) {
					return arm.ErrInvalidContent("the value at 'properties' must be an object.")
				}
				var err error
				want, checked, err = p.planWrite(ctx, r, k, b.Identity, false)
				return err
			},
			Apply: func(tx *store.Tx, res *arm.Resource, created bool, b *body) error {
				st := stored{UniqueID: uuid.NewString(), Created: p.svc.Now().UTC()}
				if !created {
					if err := json.Unmarshal(res.Properties, &st); err != nil {
						return err
					}
				}
				var err error
				if st.Identity, err = p.applyTx(tx, r.ID, st.Identity, want, checked); err != nil {
					return err
				}
				if st.Properties, err = withoutSecrets(b.Properties); err != nil {
					return err
				}
				st.SKU, st.Zones, st.Plan = b.SKU, b.Zones, b.Plan
				res.Properties, err = json.Marshal(st)
				return err
			},
			View: func(r arm.Resource) any { return view(r, k) },
		}
		return spec.Serve(ctx, r)
	}
}

func checkName(name string) error {
	if !computeName.MatchString(name) {
		return arm.ErrInvalidName(name, "Names must have 1 to 64 letters, digits, '-', '_' or '.', start with a letter or digit and not end with '.' or '-'.")
	}
	return nil
}

func (p *Provider) patch(k kind) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		b, err := p.decode(r, k)
		if err != nil {
			return httpx.Response{}, err
		}
		return p.write(ctx, r, k, func(cur *arm.Resource, st *stored) error {
			if b.Tags != nil {
				cur.Tags = b.Tags
			}
			if len(b.Properties) > 0 {
				merged, err := mergePatch(st.Properties, b.Properties)
				if err != nil {
					return err
				}
				if st.Properties, err = withoutSecrets(merged); err != nil {
					return err
				}
			}
			for _, f := range []struct {
				dst *json.RawMessage
				src json.RawMessage
			}{{&st.SKU, b.SKU}, {&st.Zones, b.Zones}, {&st.Plan, b.Plan}} {
				if len(f.src) > 0 {
					*f.dst = f.src
				}
			}
			return nil
		}, b.Identity)
	}
}

// planWrite plans the identity from what is stored now and checks the assign action for each
// identity added.
func (p *Provider) planWrite(ctx context.Context, r *arm.Request, k kind, ib *identityBody, merge bool) (plan, []armid.ID, error) {
	var cur *identity
	if err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		res, err := arm.GetTx(tx, r.ID)
		if arm.IsNotFound(err) {
			return nil // a create; the write transaction checks again
		} else if err != nil {
			return err
		}
		var st stored
		if err := json.Unmarshal(res.Properties, &st); err != nil {
			return err
		}
		cur = st.Identity
		return nil
	}); err != nil {
		return plan{}, nil, err
	}
	want, err := p.planIdentity(cur, ib, merge)
	if err != nil {
		return plan{}, nil, err
	}
	checked := added(cur, want)
	if err := p.checkAssign(ctx, r, k.action+"write", checked); err != nil {
		return plan{}, nil, err
	}
	return want, checked, nil
}

// write is PATCH's path: plan the identity (merged into what is stored), then store it and
// edit's changes in one transaction. A missing resource is ARM's 404.
func (p *Provider) write(ctx context.Context, r *arm.Request, k kind, edit func(*arm.Resource, *stored) error, ib *identityBody) (httpx.Response, error) {
	want, checked, err := p.planWrite(ctx, r, k, ib, true)
	if err != nil {
		return httpx.Response{}, err
	}
	var out arm.Resource
	err = p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		if err := arm.CheckGroupTx(tx, r.ID); err != nil {
			return err
		}
		var err error
		out, err = arm.UpdatePropertiesTx(tx, r.ID, func(res *arm.Resource, st *stored) error {
			var err error
			if st.Identity, err = p.applyTx(tx, r.ID, st.Identity, want, checked); err != nil {
				return err
			}
			return edit(res, st)
		})
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Status: http.StatusOK, Body: view(out, k)}, nil
}

func (p *Provider) get(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var res arm.Resource
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		res, err = arm.GetTx(tx, r.ID)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: view(res, kindOf(res.Type))}, nil
}

// delete is synchronous: nothing runs, so there is nothing to wait for.
func (p *Provider) delete(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	found, err := p.svc.DeleteIfPresent(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.Deleted(found), nil
}

func kindOf(typ string) kind {
	if strings.EqualFold(typ, ScaleSetType) {
		return vmssKind
	}
	return vmKind
}

// resourceJSON is a VM or scale set as ARM shows it.
type resourceJSON struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags,omitempty"`
	Identity   *identityJSON     `json:"identity,omitempty"`
	SKU        json.RawMessage   `json:"sku,omitempty"`
	Zones      json.RawMessage   `json:"zones,omitempty"`
	Plan       json.RawMessage   `json:"plan,omitempty"`
	Properties map[string]any    `json:"properties"`
}

func view(r arm.Resource, k kind) resourceJSON {
	var st stored
	_ = json.Unmarshal(r.Properties, &st)
	props := map[string]any{}
	if len(st.Properties) > 0 {
		_ = json.Unmarshal(st.Properties, &props)
	}
	props["provisioningState"] = arm.StateSucceeded
	props[k.idProp] = st.UniqueID
	props["timeCreated"] = st.Created.Format(time.RFC3339Nano)
	return resourceJSON{
		ID: r.ID, Name: r.Name, Type: r.Type, Location: r.Location, Tags: r.Tags, Identity: st.Identity.view(),
		SKU: st.SKU, Zones: st.Zones, Plan: st.Plan, Properties: props,
	}
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' || bytes.Equal(t, []byte("null"))
}

// secretPaths are properties Azure accepts but never returns; they are not stored either.
var secretPaths = [][]string{
	{"osProfile", "adminPassword"},
	{"osProfile", "customData"},
	{"virtualMachineProfile", "osProfile", "adminPassword"},
	{"virtualMachineProfile", "osProfile", "customData"},
	{"userData"},
	{"virtualMachineProfile", "userData"},
}

func withoutSecrets(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, arm.ErrInvalidContent("the value at 'properties' must be an object.")
	}
	for _, path := range secretPaths {
		obj := m
		for i, key := range path {
			if i == len(path)-1 {
				delete(obj, key)
				break
			}
			next, ok := obj[key].(map[string]any)
			if !ok {
				break
			}
			obj = next
		}
	}
	return json.Marshal(m)
}

// mergePatch applies an RFC 7386 merge patch to an object.
func mergePatch(doc, patch json.RawMessage) (json.RawMessage, error) {
	var d, p any
	if len(doc) > 0 {
		if err := json.Unmarshal(doc, &d); err != nil {
			return nil, err
		}
	}
	if err := json.Unmarshal(patch, &p); err != nil {
		return nil, arm.ErrInvalidContent("the value at 'properties' must be an object.")
	}
	return json.Marshal(merge(d, p))
}

func merge(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	for k, v := range pm {
		if v == nil {
			delete(dm, k)
			continue
		}
		dm[k] = merge(dm[k], v)
	}
	return dm
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
