// Package generic answers, in the local cloud, for well-known ARM resource types it does not
// model (Service Bus, Event Hubs, Cosmos DB, virtual networks, container registries, Application
// Insights, Log Analytics): ARM clients and Cerulean's generic kind can be tested against them.
// Each type stores the body it was given, provisions (as a long-running operation where the
// real provider does) to provisioningState Succeeded, and serves GET, LIST, PATCH (a merge) and
// DELETE through the front door's RBAC; children live under their parents and go with them.
// The common POST actions answer with key material of the cloud's own, kept in the store and
// rotated by the regenerate actions. There is no data plane behind any of them: no broker,
// database or registry answers at the endpoints the resources report (docs/cloud.md).
package generic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

const opProvision = "generic.provision"

// Provider serves the table's types.
type Provider struct {
	svc   *arm.Service
	kinds map[string]*kind // by lower-case type
}

// Types lists the resource types the provider answers for.
func Types() []string {
	out := make([]string, 0, len(kinds))
	for _, k := range kinds {
		out = append(out, k.Type)
	}
	return out
}

// Versions are the api-versions a type of the table accepts (nil if it is not in the table).
func Versions(typ string) []string {
	for _, k := range kinds {
		if strings.EqualFold(k.Type, typ) {
			return append([]string(nil), k.Versions...)
		}
	}
	return nil
}

// Register adds the table's types, their routes and the provisioning operation to svc.
func Register(svc *arm.Service) *Provider {
	p := &Provider{svc: svc, kinds: map[string]*kind{}}
	for i := range kinds {
		k := &kinds[i]
		p.kinds[strings.ToLower(k.Type)] = k
		p.register(k)
	}
	svc.RegisterOperation(opProvision, p.runProvision)
	return p
}

func (p *Provider) register(k *kind) {
	p.svc.RegisterType(arm.Type{Name: k.Type, APIVersions: k.Versions, VersionError: p.versionError})
	one, list := example(k.Type)
	a := k.Type + "/"
	routes := []arm.Route{
		{Method: http.MethodPut, Type: k.Type, Action: a + "write", Handle: p.put(k), Example: one},
		{Method: http.MethodGet, Type: k.Type, Action: a + "read", Handle: p.get(k), Example: one},
		{Method: http.MethodDelete, Type: k.Type, Action: a + "delete", Handle: p.delete(k), Example: one},
		{Method: http.MethodGet, Type: k.Type, Collection: true, Action: a + "read", Handle: p.list(k), Example: list},
	}
	if depth(k.Type) == 3 {
		routes = append(routes, arm.Route{Method: http.MethodPatch, Type: k.Type, Action: a + "write", Handle: p.patch(k), Example: one})
	}
	for _, rt := range routes {
		p.svc.Handle(rt)
	}
	if k.Keys == nil {
		return
	}
	for _, act := range k.Keys.Actions {
		t := k.Type + "/" + act.Name
		p.svc.RegisterType(arm.Type{Name: t, APIVersions: k.Versions, VersionError: p.versionError})
		p.svc.Handle(arm.Route{Method: http.MethodPost, Type: t, Collection: true, Action: a + act.Name + "/action",
			Handle: p.post(k, act), Example: one + "/" + act.Name})
	}
}

// depth is the number of id segments of a resource of typ in a resource group.
func depth(typ string) int { return 2 + strings.Count(typ, "/") }

// example is a path to a resource of typ and to its collection, for the route table.
func example(typ string) (one, list string) {
	parts := strings.Split(typ, "/")
	one = "/subscriptions/{subscriptionId}/resourceGroups/rg-example/providers/" + parts[0]
	for _, seg := range parts[1:] {
		list = one + "/" + seg
		one = list + "/" + strings.ToLower(seg[:1]) + "-example"
	}
	return one, list
}

// stored is what the provider keeps in arm.Resource.Properties. provisioningState is at the top
// so that the front door's delete can mark it.
type stored struct {
	// Body is the request body without what ARM keeps itself (id, name, type; location and tags
	// of a top-level resource) and without read-only properties.
	Body              map[string]json.RawMessage `json:"body"`
	ProvisioningState string                     `json:"provisioningState"`
	// Keys are the resource's key material and generated ids, by name (never in a GET).
	Keys map[string]string `json:"keys,omitempty"`
}

// view is a stored resource with its kind, for rendering.
type view struct {
	res arm.Resource
	st  stored
	k   *kind
}

func decode(k *kind, res arm.Resource) (view, error) {
	v := view{res: res, k: k}
	if err := json.Unmarshal(res.Properties, &v.st); err != nil {
		return v, fmt.Errorf("decode %s: %w", res.ID, err)
	}
	return v, nil
}

// render is the resource as ARM answers for it: the body the client gave, the envelope, and
// properties with provisioningState and what the provider computes.
func (v view) render() map[string]any {
	out := map[string]any{}
	for key, raw := range v.st.Body {
		out[key] = raw
	}
	props := map[string]any{}
	if raw, ok := v.st.Body["properties"]; ok {
		_ = json.Unmarshal(raw, &props)
		if props == nil {
			props = map[string]any{}
		}
	}
	props["provisioningState"] = v.st.ProvisioningState
	if v.k.Computed != nil {
		v.k.Computed(v, props)
	}
	out["properties"] = props
	out["id"], out["name"], out["type"] = v.res.ID, v.res.Name, v.k.Type
	if depth(v.k.Type) == 3 {
		out["location"] = v.res.Location
		if len(v.res.Tags) > 0 {
			out["tags"] = v.res.Tags
		} else {
			delete(out, "tags")
		}
	}
	return out
}

func (p *Provider) render(k *kind) func(arm.Resource) any {
	return func(res arm.Resource) any {
		v, err := decode(k, res)
		if err != nil {
			return map[string]any{"id": res.ID, "name": res.Name, "type": k.Type}
		}
		return v.render()
	}
}

// envelopeKeys are ARM's own fields of a body; readOnly are properties only the service sets.
var (
	envelopeKeys = []string{"id", "name", "type", "etag", "systemData"}
	readOnly     = []string{"provisioningState"}
)

// bodyOf is what is stored of a request body.
func bodyOf(k *kind, in map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := maps.Clone(in)
	for _, key := range envelopeKeys {
		delete(out, key)
	}
	if depth(k.Type) == 3 {
		delete(out, "location")
		delete(out, "tags")
	}
	raw, ok := out["properties"]
	if !ok || string(raw) == "null" {
		delete(out, "properties")
		return out, nil
	}
	var props map[string]json.RawMessage
	if err := json.Unmarshal(raw, &props); err != nil || props == nil {
		return nil, arm.ErrInvalidContent("the value at 'properties' must be a JSON object.")
	}
	for _, key := range readOnly {
		delete(props, key)
	}
	b, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	out["properties"] = b
	return out, nil
}

func (p *Provider) put(k *kind) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		var op arm.Operation
		type body = map[string]json.RawMessage
		var stateBody body
		spec := arm.Put[body]{
			Type: k.Type, Depth: depth(k.Type), Child: depth(k.Type) > 3, CreatedStatus: k.CreatedStatus,
			Name: checkName,
			Check: func(_ context.Context, _ *arm.Request, b *body) error {
				var err error
				stateBody, err = bodyOf(k, *b)
				return err
			},
			Apply: func(tx *store.Tx, res *arm.Resource, created bool, _ *body) error {
				var st stored
				if !created {
					if err := json.Unmarshal(res.Properties, &st); err != nil {
						return err
					}
				}
				st.Body = stateBody
				switch {
				case !k.LRO:
					st.ProvisioningState = arm.StateSucceeded
				case created:
					st.ProvisioningState = "Creating"
				default:
					st.ProvisioningState = "Updating"
				}
				if created {
					st.Keys = k.Keys.generate()
					if err := p.createRootRule(tx, k, *res); err != nil {
						return err
					}
				}
				if k.LRO {
					var err error
					if op, err = p.svc.NewOperationTx(tx, r, opProvision, res.ID); err != nil {
						return err
					}
				}
				var err error
				res.Properties, err = json.Marshal(st)
				return err
			},
			View: p.render(k),
		}
		res, _, err := spec.Run(ctx, r)
		if err != nil {
			return httpx.Response{}, err
		}
		if !k.LRO {
			return spec.Response(res), nil
		}
		p.svc.Launch(op)
		return p.svc.Accepted(spec.Response(res).Status, op, p.render(k)(res.Resource)), nil
	}
}

// name is what ARM accepts as a resource name of any type: the providers' own rules are
// narrower, and not modelled.
var name = regexp.MustCompile(`^[^<>%&:\\?/*#|"]{1,260}$`)

func checkName(n string) error {
	if !name.MatchString(n) || strings.HasSuffix(n, ".") || strings.HasSuffix(n, " ") {
		return arm.ErrInvalidName(n, "Resource names may not contain '<>%&:\\?/*#|\"', end in '.' or ' ', or be longer than 260 characters.")
	}
	return nil
}

// createRootRule adds the default authorization rule Service Bus and Event Hubs give a new
// namespace, with all rights and keys of its own.
func (p *Provider) createRootRule(tx *store.Tx, k *kind, ns arm.Resource) error {
	if k.RootRule == "" {
		return nil
	}
	rk := p.kinds[strings.ToLower(k.RootRule)]
	id := ns.ID + "/authorizationRules/RootManageSharedAccessKey"
	st := stored{
		Body:              map[string]json.RawMessage{"properties": json.RawMessage(`{"rights":["Listen","Manage","Send"]}`)},
		ProvisioningState: arm.StateSucceeded, Keys: rk.Keys.generate(),
	}
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	return arm.PutTx(tx, arm.Resource{ID: id, Name: "RootManageSharedAccessKey", Type: rk.Type, Properties: b})
}

// runProvision ends a PUT's long-running operation: the resource is Succeeded (unless a delete
// started meanwhile or it is gone). Idempotent, as resumed operations need.
func (p *Provider) runProvision(ctx context.Context, id armid.ID) error {
	_, err := arm.UpdateProperties(ctx, p.svc.Store(), id, func(_ *arm.Resource, st *stored) error {
		if st.ProvisioningState == arm.StateDeleting || st.ProvisioningState == arm.StateSucceeded {
			return arm.ErrUnchanged
		}
		st.ProvisioningState = arm.StateSucceeded
		return nil
	})
	if arm.IsNotFound(err) {
		return nil
	}
	return err
}

func (p *Provider) get(k *kind) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		if err := checkDepth(k, r.ID); err != nil {
			return httpx.Response{}, err
		}
		res, err := p.svc.GetInGroup(ctx, r.ID)
		if err != nil {
			return httpx.Response{}, err
		}
		return httpx.Response{Body: p.render(k)(res)}, nil
	}
}

// checkDepth refuses a type's path outside a resource group, as ARM does.
func checkDepth(k *kind, id armid.ID) error {
	if id.ResourceGroup() == "" || len(id.Segments) != depth(k.Type) {
		return arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", k.Type)
	}
	return nil
}

// list answers a top-level type by subscription or resource group, and a child type under its
// parent (which must exist).
func (p *Provider) list(k *kind) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		if depth(k.Type) == 3 {
			all, err := p.svc.List(ctx, r.ID, k.Type, arm.GroupExistsTx)
			if err != nil {
				return httpx.Response{}, err
			}
			return arm.ListResponse(all, p.render(k)), nil
		}
		parent := r.ID.Parent()
		if parent.ResourceGroup() == "" || len(parent.Segments) != depth(k.Type)-1 {
			return httpx.Response{}, arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be listed at this scope.", k.Type)
		}
		var all []arm.Resource
		err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
			if err := arm.GroupExistsTx(tx, parent); err != nil {
				return err
			}
			if _, err := arm.GetTx(tx, parent); err != nil {
				return err
			}
			var err error
			all, err = arm.ListTx(tx, parent, k.Type)
			return err
		})
		if err != nil {
			return httpx.Response{}, err
		}
		return arm.ListResponse(all, p.render(k)), nil
	}
}

// patch merges the body into the stored one (RFC 7396: objects merge, null removes, anything
// else replaces); tags, when given, replace the resource's.
func (p *Provider) patch(k *kind) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		if err := checkDepth(k, r.ID); err != nil {
			return httpx.Response{}, err
		}
		var b map[string]json.RawMessage
		if err := r.Decode(&b); err != nil {
			return httpx.Response{}, err
		}
		var tags map[string]string
		if raw, ok := b["tags"]; ok {
			if err := arm.DecodeJSON(raw, &tags); err != nil && string(raw) != "null" {
				return httpx.Response{}, arm.ErrInvalidContent("the value at 'tags' must be an object of strings.")
			}
			if err := arm.ValidateTags(tags); err != nil {
				return httpx.Response{}, err
			}
		}
		in, err := bodyOf(k, b)
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
				if st.Body, err = mergeBody(st.Body, in); err != nil {
					return err
				}
				// Merges could grow a body past what one PUT may send: refuse that too.
				if b, err := json.Marshal(st.Body); err != nil {
					return err
				} else if len(b) > arm.DefaultMaxBody {
					return arm.Errorf(http.StatusBadRequest, "RequestContentTooLarge", "The merged resource would exceed the maximum size of %d bytes.", arm.DefaultMaxBody)
				}
				if _, ok := b["tags"]; ok {
					res.Tags = tags
				}
				return nil
			})
			return err
		})
		if err != nil {
			return httpx.Response{}, err
		}
		return httpx.Response{Body: p.render(k)(out)}, nil
	}
}

func (p *Provider) delete(k *kind) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		if err := checkDepth(k, r.ID); err != nil {
			return httpx.Response{}, err
		}
		if !k.AsyncDelete {
			if err := p.groupExists(ctx, r.ID); err != nil {
				return httpx.Response{}, err
			}
			found, err := p.svc.DeleteIfPresent(ctx, r.ID)
			if err != nil {
				return httpx.Response{}, err
			}
			return arm.Deleted(found), nil
		}
		cur, err := p.svc.GetInGroup(ctx, r.ID)
		if arm.IsNotFound(err) && !isGroupMissing(err) {
			return httpx.Response{Status: http.StatusNoContent}, nil
		} else if err != nil {
			return httpx.Response{}, err
		}
		return p.svc.BeginDelete(ctx, r, cur)
	}
}

func (p *Provider) groupExists(ctx context.Context, id armid.ID) error {
	return p.svc.Store().View(ctx, func(tx *store.Tx) error { return arm.GroupExistsTx(tx, id) })
}

func isGroupMissing(err error) bool {
	var e *arm.Error
	return errors.As(err, &e) && e.Code == "ResourceGroupNotFound"
}
