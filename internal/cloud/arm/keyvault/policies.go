package keyvault

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	kv "github.com/cerulean/cerulean/internal/cloud/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

type policiesBody struct {
	Properties *struct {
		AccessPolicies []kv.AccessPolicy `json:"accessPolicies"`
	} `json:"properties"`
}

type policiesJSON struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Location   string `json:"location,omitempty"`
	Properties struct {
		AccessPolicies []kv.AccessPolicy `json:"accessPolicies"`
	} `json:"properties"`
}

// updateAccessPolicies is PUT .../vaults/{name}/accessPolicies/{add|replace|remove}: entries
// are matched on tenant, object and application; add merges permissions into a match (or
// appends), replace sets a match's permissions (or appends), remove takes permissions away and
// drops an entry left with none (or the whole entry when none are named).
func (p *Provider) updateAccessPolicies(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID, 4); err != nil {
		return httpx.Response{}, err
	}
	kind := strings.ToLower(r.ID.Name())
	if kind != "add" && kind != "replace" && kind != "remove" {
		return httpx.Response{}, arm.ErrBadRequest("The access policy operation '%s' is not valid; use add, replace or remove.", clipName(r.ID.Name()))
	}
	var b policiesBody
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	if b.Properties == nil || len(b.Properties.AccessPolicies) == 0 {
		return httpx.Response{}, arm.ErrBadRequest("The 'properties.accessPolicies' list is required.")
	}
	if err := validatePolicies(b.Properties.AccessPolicies); err != nil {
		return httpx.Response{}, err
	}
	var out policiesJSON
	err := p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		if err := arm.CheckGroupTx(tx, r.ID); err != nil {
			return err
		}
		cur, props, err := p.updateTx(tx, r.ID.Parent(), func(_ *arm.Resource, props *vaultProperties) error {
			props.AccessPolicies = applyPolicies(props.AccessPolicies, b.Properties.AccessPolicies, kind)
			return validatePolicies(props.AccessPolicies)
		})
		if err != nil {
			return err
		}
		out = policiesJSON{ID: cur.ID + "/accessPolicies/" + kind, Name: kind, Type: accessPolicyType, Location: cur.Location}
		out.Properties.AccessPolicies = props.AccessPolicies
		return nil
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Status: http.StatusOK, Body: out}, nil
}

func samePrincipal(a, b kv.AccessPolicy) bool {
	return strings.EqualFold(a.TenantID, b.TenantID) && strings.EqualFold(a.ObjectID, b.ObjectID) &&
		strings.EqualFold(a.ApplicationID, b.ApplicationID)
}

func applyPolicies(cur, changes []kv.AccessPolicy, kind string) []kv.AccessPolicy {
	out := slices.Clone(cur)
	for _, ch := range changes {
		i := slices.IndexFunc(out, func(e kv.AccessPolicy) bool { return samePrincipal(e, ch) })
		switch {
		case i < 0 && kind != "remove":
			out = append(out, ch)
		case i < 0:
		case kind == "add":
			out[i].Permissions = union(out[i].Permissions, ch.Permissions)
		case kind == "replace":
			out[i].Permissions = ch.Permissions
		case empty(ch.Permissions):
			out = slices.Delete(out, i, i+1)
		default:
			out[i].Permissions = subtract(out[i].Permissions, ch.Permissions)
			if empty(out[i].Permissions) {
				out = slices.Delete(out, i, i+1)
			}
		}
	}
	if out == nil {
		out = []kv.AccessPolicy{}
	}
	return out
}

func empty(p kv.Permissions) bool {
	return len(p.Keys)+len(p.Secrets)+len(p.Certificates)+len(p.Storage) == 0
}

func union(a, b kv.Permissions) kv.Permissions {
	u := func(x, y []string) []string {
		out := slices.Clone(x)
		for _, v := range y {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
		return out
	}
	return kv.Permissions{Keys: u(a.Keys, b.Keys), Secrets: u(a.Secrets, b.Secrets), Certificates: u(a.Certificates, b.Certificates), Storage: u(a.Storage, b.Storage)}
}

func subtract(a, b kv.Permissions) kv.Permissions {
	s := func(x, y []string) []string {
		return slices.DeleteFunc(slices.Clone(x), func(v string) bool { return slices.Contains(y, v) })
	}
	return kv.Permissions{Keys: s(a.Keys, b.Keys), Secrets: s(a.Secrets, b.Secrets), Certificates: s(a.Certificates, b.Certificates), Storage: s(a.Storage, b.Storage)}
}
