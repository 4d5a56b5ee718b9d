// Package redis is the Microsoft.Cache provider of the local cloud: Azure Cache for Redis, each
// cache a real redis-server the engines supervisor runs (TLS on its sslPort, the plain port only
// with enableNonSslPort), with listKeys and regenerateKey (both keys valid at once; a regenerated
// key stops working, the other keeps working) and firewall rules (enforced by the engine's
// fronts: engines/front.go). A
// create is a long-running operation that runs the engine; an engine that fails to start leaves
// the cache provisioningState Failed with its error.
package redis

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/engines"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Types.
const (
	CacheType         = "Microsoft.Cache/redis"
	FirewallType      = CacheType + "/firewallRules"
	listKeysType      = CacheType + "/listKeys"
	regenerateKeyType = CacheType + "/regenerateKey"
	action            = "Microsoft.Cache/redis/"
)

// Versions are the accepted api-versions: armredis/v3 sends 2024-11-01; ASO v2.13 2020-12-01,
// 2023-04-01 and 2023-08-01; the rest are other published ones.
var Versions = []string{
	"2020-06-01", "2020-12-01", "2021-06-01", "2022-05-01", "2022-06-01", "2023-04-01", "2023-08-01",
	"2024-03-01", "2024-04-01-preview", "2024-11-01",
}

var (
	cacheName = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9]|-[a-zA-Z0-9]){0,62}$`)
	ruleName  = regexp.MustCompile(`^[a-zA-Z0-9_]{1,64}$`)
)

const opCreate = "redis.create"

// Provider serves Microsoft.Cache/redis.
type Provider struct {
	svc *arm.Service
	eng *engines.Supervisor
}

// Register adds the provider's types, routes and operation to svc; eng runs the caches.
func Register(svc *arm.Service, eng *engines.Supervisor) *Provider {
	p := &Provider{svc: svc, eng: eng}
	for _, t := range []string{CacheType, FirewallType, listKeysType, regenerateKeyType} {
		svc.RegisterType(arm.Type{Name: t, APIVersions: Versions})
	}
	const (
		rg = "/subscriptions/{subscriptionId}/resourceGroups/rg-example"
		c  = rg + "/providers/Microsoft.Cache/redis/cache-example"
	)
	for _, rt := range []arm.Route{
		{Method: http.MethodPut, Type: CacheType, Action: action + "write", Handle: p.put, Example: c},
		{Method: http.MethodPatch, Type: CacheType, Action: action + "write", Handle: p.patch, Example: c},
		{Method: http.MethodGet, Type: CacheType, Action: action + "read", Handle: p.get, Example: c},
		{Method: http.MethodDelete, Type: CacheType, Action: action + "delete", Handle: p.delete, Example: c},
		{Method: http.MethodGet, Type: CacheType, Collection: true, Action: action + "read", Handle: p.list, Example: rg + "/providers/Microsoft.Cache/redis"},
		{Method: http.MethodPost, Type: listKeysType, Collection: true, Action: action + "listKeys/action", Handle: p.listKeys, Example: c + "/listKeys"},
		{Method: http.MethodPost, Type: regenerateKeyType, Collection: true, Action: action + "regenerateKey/action", Handle: p.regenerateKey, Example: c + "/regenerateKey"},
		{Method: http.MethodPut, Type: FirewallType, Action: action + "firewallRules/write", Handle: p.firewallSpec().Serve, Example: c + "/firewallRules/allow"},
		{Method: http.MethodGet, Type: FirewallType, Action: action + "firewallRules/read", Handle: p.getRule, Example: c + "/firewallRules/allow"},
		{Method: http.MethodGet, Type: FirewallType, Collection: true, Action: action + "firewallRules/read", Handle: p.listRules, Example: c + "/firewallRules"},
		{Method: http.MethodDelete, Type: FirewallType, Action: action + "firewallRules/delete", Handle: p.deleteRule, Example: c + "/firewallRules/allow"},
	} {
		svc.Handle(rt)
	}
	svc.RegisterOperation(opCreate, p.runCreate)
	svc.OnDelete(CacheType, func(_ *store.Tx, r arm.Resource) error { return p.eng.RemoveRedis(r.Name) })
	svc.OnDelete(FirewallType, p.onDeleteRule)
	return p
}

// stored is what the provider keeps in arm.Resource.Properties; the keys are kept because
// listKeys returns them.
type stored struct {
	Other             map[string]json.RawMessage `json:"other,omitempty"`
	SKU               sku                        `json:"sku"`
	NonSSL            bool                       `json:"enableNonSslPort"`
	Keys              [2]string                  `json:"keys"`
	ProvisioningState string                     `json:"provisioningState"`
	Error             string                     `json:"error,omitempty"`
	Port              int                        `json:"port"`
	SSLPort           int                        `json:"sslPort"`
	Created           time.Time                  `json:"created"`
}

type sku struct {
	Name     string `json:"name"`
	Family   string `json:"family"`
	Capacity int    `json:"capacity"`
}

type cacheBody struct {
	Properties map[string]json.RawMessage `json:"properties"`
}

type cacheProps struct {
	SKU    *sku  `json:"sku"`
	NonSSL *bool `json:"enableNonSslPort"`
}

func decodeProps(raw map[string]json.RawMessage) (cacheProps, error) {
	var cp cacheProps
	b, _ := json.Marshal(raw)
	return cp, arm.DecodeJSON(b, &cp)
}

func checkSKU(s *sku) error {
	if s == nil || s.Name == "" {
		return arm.Errorf(http.StatusBadRequest, "MissingRequiredProperty", "The 'properties.sku' property is required.")
	}
	fam := map[string]string{"Basic": "C", "Standard": "C", "Premium": "P"}[s.Name]
	switch {
	case fam == "":
		return arm.Errorf(http.StatusBadRequest, "InvalidRequestBody", "The value '%s' of 'sku.name' is invalid: use Basic, Standard or Premium.", clip(s.Name, 32))
	case s.Family != fam:
		return arm.Errorf(http.StatusBadRequest, "InvalidRequestBody", "The 'sku.family' of a %s cache must be '%s'.", s.Name, fam)
	case s.Capacity < 0 || s.Capacity > 6 || (fam == "P" && s.Capacity < 1) || (fam == "P" && s.Capacity > 5):
		return arm.Errorf(http.StatusBadRequest, "InvalidRequestBody", "The 'sku.capacity' %d is not valid for family %s.", s.Capacity, fam)
	}
	return nil
}

func newKey() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

func (p *Provider) put(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var op arm.Operation
	spec := arm.Put[cacheBody]{
		Type: CacheType, Depth: 3,
		Name: func(name string) error {
			if !cacheName.MatchString(name) {
				return arm.ErrInvalidName(name, "Cache names must have 1 to 63 letters, digits and single hyphens, starting and ending with a letter or digit.")
			}
			return nil
		},
		Check: func(_ context.Context, _ *arm.Request, b *cacheBody) error {
			cp, err := decodeProps(b.Properties)
			if err != nil {
				return err
			}
			return checkSKU(cp.SKU)
		},
		Apply: func(tx *store.Tx, res *arm.Resource, created bool, b *cacheBody) error {
			cp, _ := decodeProps(b.Properties)
			var st stored
			if created {
				all, err := arm.ListTx(tx, armid.Root, CacheType)
				if err != nil {
					return err
				}
				for _, c := range all {
					if strings.EqualFold(c.Name, res.Name) {
						return arm.Errorf(http.StatusConflict, "NameNotAvailable", "The name '%s' is already in use by another cache.", res.Name)
					}
				}
				st = stored{Keys: [2]string{newKey(), newKey()}, ProvisioningState: "Creating", Created: p.svc.Now().UTC()}
				if op, err = p.svc.NewOperationTx(tx, r, opCreate, res.ID); err != nil {
					return err
				}
			} else if err := json.Unmarshal(res.Properties, &st); err != nil {
				return err
			}
			st.SKU = *cp.SKU
			if cp.NonSSL != nil {
				st.NonSSL = *cp.NonSSL
			}
			st.Other = otherProps(b.Properties, st.Other)
			var err error
			res.Properties, err = json.Marshal(st)
			return err
		},
		View: func(res arm.Resource) any { return view(res) },
	}
	res, _, err := spec.Run(ctx, r)
	if err != nil {
		return httpx.Response{}, err
	}
	if res.Created {
		p.svc.Launch(op)
		return p.svc.Accepted(http.StatusCreated, op, view(res.Resource)), nil
	}
	if err := p.apply(ctx, res.Resource); err != nil {
		return httpx.Response{}, err
	}
	return spec.Response(res), nil
}

// apply brings a running cache's engine in line with its resource (the plain port).
func (p *Provider) apply(ctx context.Context, res arm.Resource) error {
	var st stored
	if err := json.Unmarshal(res.Properties, &st); err != nil {
		return err
	}
	if st.ProvisioningState != arm.StateSucceeded {
		return nil
	}
	id, err := armid.Parse(res.ID)
	if err != nil {
		return err
	}
	fw, err := p.firewall(ctx, id)
	if err != nil {
		return err
	}
	if _, err = p.eng.StartRedis(ctx, engines.RedisCache{Name: res.Name, Keys: st.Keys, NonTLSPort: st.NonSSL, Firewall: fw}); err != nil {
		return err
	}
	return p.reapplyFirewall(ctx, id, res.Name)
}

// reapplyFirewall gives the running cache its firewall rules again: a rule put while it started
// reached no engine, and the start used the rules read before, so the cache would admit
// clients the rule leaves out. In a write transaction, so that a rule's own write (also in one)
// comes wholly before or after.
func (p *Provider) reapplyFirewall(ctx context.Context, id armid.ID, name string) error {
	return p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		rules, err := firewallTx(tx, id, "", nil)
		if err != nil {
			return err
		}
		p.eng.SetRedisFirewall(name, rules)
		return nil
	})
}

// firewall reads the cache's firewall rules.
func (p *Provider) firewall(ctx context.Context, cache armid.ID) ([]engines.IPRange, error) {
	var fw []engines.IPRange
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		fw, err = firewallTx(tx, cache, "", nil)
		return err
	})
	return fw, err
}

// firewallTx reads the cache's firewall rules; skip leaves one out (a rule being deleted),
// extra replaces or adds one (a rule being written).
func firewallTx(tx *store.Tx, cache armid.ID, skip string, extra *arm.Resource) ([]engines.IPRange, error) {
	all, err := arm.ListTx(tx, cache, FirewallType)
	if err != nil {
		return nil, err
	}
	var out []engines.IPRange
	add := func(f arm.Resource) {
		var rp ruleProps
		_ = json.Unmarshal(f.Properties, &rp)
		s, err1 := netip.ParseAddr(rp.StartIP)
		e, err2 := netip.ParseAddr(rp.EndIP)
		if err1 == nil && err2 == nil {
			out = append(out, engines.IPRange{Start: s, End: e})
		}
	}
	for _, f := range all {
		if !strings.EqualFold(f.ID, skip) && (extra == nil || !strings.EqualFold(f.ID, extra.ID)) {
			add(f)
		}
	}
	if extra != nil {
		add(*extra)
	}
	return out, nil
}

func otherProps(in, cur map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range in {
		switch k {
		case "sku", "enableNonSslPort", "provisioningState", "hostName", "port", "sslPort", "accessKeys":
		default:
			out[k] = v
		}
	}
	return out
}

// patch updates tags, sku, enableNonSslPort and the client's other properties.
func (p *Provider) patch(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var b struct {
		Tags       map[string]string          `json:"tags"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	if err := arm.ValidateTags(b.Tags); err != nil {
		return httpx.Response{}, err
	}
	cp, err := decodeProps(b.Properties)
	if err != nil {
		return httpx.Response{}, err
	}
	if cp.SKU != nil {
		if err := checkSKU(cp.SKU); err != nil {
			return httpx.Response{}, err
		}
	}
	out, err := arm.UpdateProperties(ctx, p.svc.Store(), r.ID, func(res *arm.Resource, st *stored) error {
		if b.Tags != nil {
			res.Tags = b.Tags
		}
		if cp.SKU != nil {
			st.SKU = *cp.SKU
		}
		if cp.NonSSL != nil {
			st.NonSSL = *cp.NonSSL
		}
		st.Other = otherProps(b.Properties, st.Other)
		return nil
	})
	if err != nil {
		return httpx.Response{}, err
	}
	if err := p.apply(ctx, out); err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: view(out)}, nil
}

func (p *Provider) get(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	res, err := p.svc.GetInGroup(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: view(res)}, nil
}

func (p *Provider) list(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	all, err := p.svc.List(ctx, r.ID, CacheType, arm.GroupExistsTx)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.ListResponse(all, view), nil
}

func (p *Provider) delete(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	cur, err := p.svc.GetInGroup(ctx, r.ID)
	if arm.IsNotFound(err) {
		return httpx.Response{Status: http.StatusNoContent}, nil
	} else if err != nil {
		return httpx.Response{}, err
	}
	return p.svc.BeginDelete(ctx, r, cur)
}

type keysJSON struct {
	PrimaryKey   string `json:"primaryKey"`
	SecondaryKey string `json:"secondaryKey"`
}

func (p *Provider) listKeys(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	res, err := p.svc.GetInGroup(ctx, r.ID.Parent())
	if err != nil {
		return httpx.Response{}, err
	}
	var st stored
	if err := json.Unmarshal(res.Properties, &st); err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: keysJSON{PrimaryKey: st.Keys[0], SecondaryKey: st.Keys[1]}}, nil
}

// regenerateKey replaces one key in the store and in the engine, in one transaction: the
// engine is told with the other key, which keeps working.
func (p *Provider) regenerateKey(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var b struct {
		KeyType string `json:"keyType"`
	}
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	i := slices.Index([]string{"primary", "secondary"}, strings.ToLower(b.KeyType))
	if i < 0 {
		return httpx.Response{}, arm.Errorf(http.StatusBadRequest, "InvalidRequestBody", "The 'keyType' must be 'Primary' or 'Secondary'.")
	}
	var keys [2]string
	_, err := arm.UpdateProperties(ctx, p.svc.Store(), r.ID.Parent(), func(res *arm.Resource, st *stored) error {
		other := st.Keys[1-i]
		st.Keys[i] = newKey()
		keys = st.Keys
		return p.eng.SetRedisKeys(ctx, res.Name, other, st.Keys)
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: keysJSON{PrimaryKey: keys[0], SecondaryKey: keys[1]}}, nil
}

// runCreate runs the cache's engine and records the outcome.
func (p *Provider) runCreate(ctx context.Context, id armid.ID) error {
	res, err := p.svc.GetInGroup(ctx, id)
	if arm.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	var st stored
	if err := json.Unmarshal(res.Properties, &st); err != nil {
		return err
	}
	fw, err := p.firewall(ctx, id)
	if err != nil {
		return err
	}
	addrs, engErr := p.eng.StartRedis(ctx, engines.RedisCache{Name: res.Name, Keys: st.Keys, NonTLSPort: st.NonSSL, Firewall: fw})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if engErr == nil {
		engErr = p.reapplyFirewall(ctx, id, res.Name)
	}
	_, err = arm.UpdateProperties(ctx, p.svc.Store(), id, func(_ *arm.Resource, st *stored) error {
		if st.ProvisioningState == arm.StateDeleting {
			return arm.ErrUnchanged
		}
		st.ProvisioningState, st.Error = arm.StateSucceeded, ""
		st.SSLPort, st.Port = int(addrs.TLS.Port()), int(addrs.Plain.Port())
		if engErr != nil {
			st.ProvisioningState, st.Error = "Failed", clip(engErr.Error(), 1024)
		}
		return nil
	})
	if engErr != nil {
		return arm.Errorf(http.StatusInternalServerError, "InternalServerError", "The cache could not be started: %s", clip(engErr.Error(), 1024))
	}
	if arm.IsNotFound(err) {
		return nil
	}
	return err
}

// Start brings back the engines of the caches that ran when the cloud stopped.
func (p *Provider) Start(ctx context.Context) error {
	var ids []armid.ID
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		all, err := arm.ListTx(tx, armid.Root, CacheType)
		for _, r := range all {
			var st stored
			if json.Unmarshal(r.Properties, &st) == nil && st.ProvisioningState == arm.StateSucceeded {
				if id, err := armid.Parse(r.ID); err == nil {
					ids = append(ids, id)
				}
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("list caches: %w", err)
	}
	for _, id := range ids {
		if err := p.runCreate(ctx, id); err != nil && ctx.Err() != nil {
			return err
		}
	}
	return nil
}

type cacheJSON struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags,omitempty"`
	Properties map[string]any    `json:"properties"`
}

// view shows the cache as Azure does: hostName, and the standard ports 6379 and 6380 (what the
// name answers on Azure; the local addresses are in docs/cloud.md).
func view(r arm.Resource) cacheJSON {
	var st stored
	_ = json.Unmarshal(r.Properties, &st)
	props := map[string]any{}
	for k, v := range st.Other {
		props[k] = v
	}
	props["sku"] = st.SKU
	props["enableNonSslPort"] = st.NonSSL
	props["provisioningState"] = st.ProvisioningState
	props["hostName"] = engines.RedisHost(r.Name)
	props["port"] = 6379
	props["sslPort"] = 6380
	props["redisVersion"] = "7.0"
	if _, ok := props["minimumTlsVersion"]; !ok {
		props["minimumTlsVersion"] = "1.2"
	}
	if st.Error != "" {
		props["statusMessage"] = st.Error
	}
	return cacheJSON{ID: r.ID, Name: r.Name, Type: CacheType, Location: r.Location, Tags: r.Tags, Properties: props}
}

// Firewall rules: children whose changes reach the cache's fronts in the same transaction, so
// a rule judges the next connection (engines/front.go).

type ruleProps struct {
	StartIP string `json:"startIP"`
	EndIP   string `json:"endIP"`
}

type ruleJSON struct {
	ID         string    `json:"id"`
	Name       string    `json:"name"`
	Type       string    `json:"type"`
	Properties ruleProps `json:"properties"`
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
