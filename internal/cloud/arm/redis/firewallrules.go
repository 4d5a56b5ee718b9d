package redis

import (
	"context"
	"encoding/json"
	"net/http"
	"net/netip"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// The caches' firewall rules: ARM children whose ranges the engine's front enforces.

func ruleView(r arm.Resource) ruleJSON {
	var rp ruleProps
	_ = json.Unmarshal(r.Properties, &rp)
	return ruleJSON{ID: r.ID, Name: r.Name, Type: FirewallType, Properties: rp}
}

func (p *Provider) firewallSpec() arm.Put[struct{ Properties ruleProps }] {
	type body = struct{ Properties ruleProps }
	return arm.Put[body]{
		Type: FirewallType, Depth: 4, Child: true,
		Name: func(name string) error {
			if !ruleName.MatchString(name) {
				return arm.ErrInvalidName(name, "Firewall rule names must have 1 to 64 letters, digits and '_'.")
			}
			return nil
		},
		Check: func(_ context.Context, _ *arm.Request, b *body) error {
			s, err1 := netip.ParseAddr(b.Properties.StartIP)
			e, err2 := netip.ParseAddr(b.Properties.EndIP)
			if err1 != nil || err2 != nil || !s.Is4() || !e.Is4() || e.Less(s) {
				return arm.Errorf(http.StatusBadRequest, "InvalidRequestBody", "The firewall rule's startIP and endIP must be IPv4 addresses, startIP not after endIP.")
			}
			return nil
		},
		Apply: func(tx *store.Tx, res *arm.Resource, _ bool, b *body) error {
			var err error
			if res.Properties, err = json.Marshal(b.Properties); err != nil {
				return err
			}
			id, err := armid.Parse(res.ID)
			if err != nil {
				return err
			}
			rules, err := firewallTx(tx, id.Parent(), "", res)
			if err != nil {
				return err
			}
			p.eng.SetRedisFirewall(id.Parent().Name(), rules)
			return nil
		},
		View: func(r arm.Resource) any { return ruleView(r) },
	}
}

func (p *Provider) getRule(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	res, err := p.svc.GetInGroup(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: ruleView(res)}, nil
}

func (p *Provider) listRules(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var all []arm.Resource
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		if _, err := arm.GetTx(tx, r.ID.Parent()); err != nil {
			return err
		}
		var err error
		all, err = arm.ListTx(tx, r.ID.Parent(), FirewallType)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.ListResponse(all, ruleView), nil
}

func (p *Provider) deleteRule(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	found, err := p.svc.DeleteIfPresent(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.Deleted(found), nil
}

// onDeleteRule takes a deleted rule out of the cache's fronts (unless the cache goes too).
func (p *Provider) onDeleteRule(tx *store.Tx, r arm.Resource) error {
	id, err := armid.Parse(r.ID)
	if err != nil {
		return err
	}
	cache, err := arm.GetTx(tx, id.Parent())
	if err != nil {
		return nil //nolint:nilerr // the cache is gone
	}
	var st stored
	if json.Unmarshal(cache.Properties, &st) == nil && st.ProvisioningState == arm.StateDeleting {
		return nil // the cache goes with its rules: its fronts must not open meanwhile
	}
	rules, err := firewallTx(tx, id.Parent(), r.ID, nil)
	if err != nil {
		return err
	}
	p.eng.SetRedisFirewall(id.Parent().Name(), rules)
	return nil
}
