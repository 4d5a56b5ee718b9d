// Package storage is the Microsoft.Storage provider of the local cloud: storage accounts (create,
// update, get, list, delete, listKeys, regenerateKey, primaryEndpoints, checkNameAvailability)
// and their blob containers, queues and tables as ARM children. The data planes
// (internal/cloud/storage) answer under the accounts' public names and authorize with the keys
// kept here; the children live in the data plane, so ARM and the data plane always agree.
package storage

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Types.
const (
	AccountType       = "Microsoft.Storage/storageAccounts"
	listKeysType      = "Microsoft.Storage/storageAccounts/listKeys"
	regenerateKeyType = "Microsoft.Storage/storageAccounts/regenerateKey"
	nameCheckType     = "Microsoft.Storage/checkNameAvailability"
	action            = "Microsoft.Storage/storageAccounts/"
	opCreate          = "storage.create"
)

// Provisioning states of an account (Azure's names).
const (
	stateCreating = "Creating"
	stateFailed   = "Failed"
)

// Versions are the accepted api-versions: armstorage/v2 sends 2025-01-01, @azure/arm-storage 21
// 2026-09-01, azure-mgmt-storage 2025-08-01, ASO 2023-01-01; the rest are other published ones.
var Versions = []string{
	"2019-06-01", "2021-01-01", "2021-02-01", "2021-04-01", "2021-06-01", "2021-08-01", "2021-09-01", "2022-05-01",
	"2022-09-01", "2023-01-01", "2023-04-01", "2023-05-01", "2024-01-01", "2025-01-01", "2025-06-01",
	"2025-08-01", "2026-09-01",
}

// Account names are global: 3 to 24 lower-case letters and digits.
var accountName = regexp.MustCompile(`^[a-z0-9]{3,24}$`)

const nameRule = "Storage account names must be between 3 and 24 characters in length and use numbers and lower-case letters only."

// Provider serves Microsoft.Storage.
type Provider struct {
	svc  *arm.Service
	base string    // the cloud's origin
	data DataPlane // nil until SetDataPlane
}

// Register adds the provider's types and routes to svc; baseURL is the cloud's origin.
func Register(svc *arm.Service, baseURL string) *Provider {
	p := &Provider{svc: svc, base: strings.TrimSuffix(baseURL, "/")}
	for _, t := range []string{AccountType, listKeysType, regenerateKeyType, nameCheckType} {
		svc.RegisterType(arm.Type{Name: t, APIVersions: Versions})
	}
	const (
		sub = "/subscriptions/{subscriptionId}"
		rg  = sub + "/resourceGroups/rg-example"
		sa  = rg + "/providers/Microsoft.Storage/storageAccounts/stexample"
	)
	// An action's scope is the account (the collection's parent: the default).
	for _, rt := range []arm.Route{
		{Method: http.MethodPut, Type: AccountType, Action: action + "write", Handle: p.put, Example: sa},
		{Method: http.MethodPatch, Type: AccountType, Action: action + "write", Handle: p.patch, Example: sa},
		{Method: http.MethodGet, Type: AccountType, Action: action + "read", Handle: p.get, Example: sa},
		{Method: http.MethodDelete, Type: AccountType, Action: action + "delete", Handle: p.delete, Example: sa},
		{Method: http.MethodGet, Type: AccountType, Collection: true, Action: action + "read", Handle: p.list, Example: rg + "/providers/Microsoft.Storage/storageAccounts"},
		{Method: http.MethodPost, Type: listKeysType, Collection: true, Action: action + "listkeys/action", Handle: p.listKeys, Example: sa + "/listKeys"},
		{Method: http.MethodPost, Type: regenerateKeyType, Collection: true, Action: action + "regeneratekey/action", Handle: p.regenerateKey, Example: sa + "/regenerateKey"},
		{Method: http.MethodPost, Type: nameCheckType, Collection: true, Action: "Microsoft.Storage/checkNameAvailability/read", Handle: p.checkName, Example: sub + "/providers/Microsoft.Storage/checkNameAvailability"},
	} {
		svc.Handle(rt)
	}
	p.registerChildren()
	svc.RegisterOperation(opCreate, p.runCreate)
	return p
}

// stored is what the provider keeps in arm.Resource.Properties. The keys are kept in the clear:
// listKeys must return them.
type stored struct {
	Properties json.RawMessage `json:"properties,omitempty"` // the client's
	SKU        string          `json:"sku"`
	Kind       string          `json:"kind"`
	Keys       []key           `json:"keys"`
	Created    time.Time       `json:"created"`
	// State is the provisioningState: "" (accounts stored before it existed) and Succeeded
	// are served; Creating waits for Azurite; Failed carries Azurite's error in Error.
	State string `json:"provisioningState,omitempty"`
	Error string `json:"error,omitempty"`
}

// live reports whether the account is served.
func (st stored) live() bool { return st.State == "" || st.State == arm.StateSucceeded }

type key struct {
	Name    string    `json:"keyName"`
	Value   string    `json:"value"`
	Created time.Time `json:"creationTime"`
}

type body struct {
	Location string            `json:"location"`
	Tags     map[string]string `json:"tags"`
	Kind     string            `json:"kind"`
	SKU      *struct {
		Name string `json:"name"`
	} `json:"sku"`
	Properties json.RawMessage `json:"properties"`
}

func placed(id armid.ID) error {
	if id.ResourceGroup() == "" || len(id.Segments) != 3 {
		return arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", AccountType)
	}
	return nil
}

func newKey(name string, now time.Time) key {
	b := make([]byte, 64)
	_, _ = rand.Read(b)
	return key{Name: name, Value: base64.StdEncoding.EncodeToString(b), Created: now}
}

// putSpec is the account's PUT on the skeleton. Storage answers a create with 200 (or 202),
// never 201: armstorage accepts only those.
func (p *Provider) putSpec() arm.Put[body] {
	return arm.Put[body]{
		Type: AccountType, Depth: 3, CreatedStatus: http.StatusOK,
		Name: func(name string) error {
			if !accountName.MatchString(name) {
				return arm.Errorf(http.StatusBadRequest, "AccountNameInvalid", "%s is not a valid storage account name. %s", clip(name, 64), nameRule)
			}
			return nil
		},
		Check: func(_ context.Context, _ *arm.Request, b *body) error {
			switch {
			case b.SKU == nil || b.SKU.Name == "" || len(b.SKU.Name) > 64:
				return arm.Errorf(http.StatusBadRequest, "MissingRequiredProperty", "The 'sku.name' property is required.")
			case len(b.Kind) > 64:
				return arm.ErrBadRequest("The 'kind' property is invalid.")
			case len(b.Properties) > 0 && !isObject(b.Properties):
				return arm.ErrInvalidContent("the value at 'properties' must be an object.")
			}
			if b.Kind == "" {
				b.Kind = "StorageV2"
			}
			return nil
		},
		Apply: func(tx *store.Tx, res *arm.Resource, created bool, b *body) error {
			var st stored
			if created {
				if taken, err := p.takenTx(tx, res.Name); err != nil {
					return err
				} else if taken {
					return arm.Errorf(http.StatusConflict, "StorageAccountAlreadyTaken", "The storage account named %s is already taken.", res.Name)
				}
				now := p.svc.Now().UTC()
				st = stored{Keys: []key{newKey("key1", now), newKey("key2", now)}, Created: now}
			} else if err := json.Unmarshal(res.Properties, &st); err != nil {
				return err
			}
			st.SKU, st.Kind, st.Properties = b.SKU.Name, b.Kind, b.Properties
			var err error
			res.Properties, err = json.Marshal(st)
			return err
		},
		View: func(r arm.Resource) any { return p.view(r) },
	}
}

// put creates or updates an account. A create (or a PUT of a failed account, which retries it)
// is served at once when Azurite listens; otherwise it is a long-running operation that waits
// for Azurite and ends the account Succeeded, or Failed with Azurite's error (202 and no body,
// as Azure answers a create it has not finished).
func (p *Provider) put(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	spec := p.putSpec()
	ready := p.data == nil || p.data.EngineReady()
	var op arm.Operation
	apply := spec.Apply
	spec.Apply = func(tx *store.Tx, res *arm.Resource, created bool, b *body) error {
		var prev stored
		if !created {
			if err := json.Unmarshal(res.Properties, &prev); err != nil {
				return err
			}
		}
		if err := apply(tx, res, created, b); err != nil {
			return err
		}
		if !created && prev.State != stateFailed {
			return nil // an update: the state stays
		}
		var st stored
		if err := json.Unmarshal(res.Properties, &st); err != nil {
			return err
		}
		st.State, st.Error = arm.StateSucceeded, ""
		if !ready {
			st.State = stateCreating
			var err error
			if op, err = p.svc.NewOperationTx(tx, r, opCreate, res.ID); err != nil {
				return err
			}
		}
		var err error
		res.Properties, err = json.Marshal(st)
		return err
	}
	res, _, err := spec.Run(ctx, r)
	if err != nil {
		return httpx.Response{}, err
	}
	if op.ID != "" {
		p.svc.Launch(op)
		return p.svc.Accepted(http.StatusAccepted, op, nil), nil
	}
	return spec.Response(res), nil
}

// runCreate waits for Azurite and records the outcome in the account: Succeeded, or Failed
// with Azurite's error, which is the operation's error too.
func (p *Provider) runCreate(ctx context.Context, id armid.ID) error {
	var engErr error
	if p.data != nil {
		engErr = p.data.WaitEngine(ctx)
	}
	if ctx.Err() != nil {
		return ctx.Err() // the cloud stops: the operation runs again at the next start
	}
	_, err := arm.UpdateProperties(ctx, p.svc.Store(), id, func(_ *arm.Resource, st *stored) error {
		if st.State != stateCreating {
			return arm.ErrUnchanged // deleted and created again, or retried: another operation owns it
		}
		st.State, st.Error = arm.StateSucceeded, ""
		if engErr != nil {
			st.State, st.Error = stateFailed, clip(engErr.Error(), 1024)
		}
		return nil
	})
	if arm.IsNotFound(err) {
		err = nil // deleted meanwhile
	}
	if engErr != nil {
		return arm.Errorf(http.StatusInternalServerError, "InternalServerError", "The storage account's data planes could not start: %s", clip(engErr.Error(), 1024))
	}
	return err
}

// patch updates tags, sku and kind when given and merges the top-level properties.
func (p *Provider) patch(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID); err != nil {
		return httpx.Response{}, err
	}
	var b body
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	if err := arm.ValidateTags(b.Tags); err != nil {
		return httpx.Response{}, err
	}
	var patch map[string]json.RawMessage
	if len(b.Properties) > 0 {
		if err := json.Unmarshal(b.Properties, &patch); err != nil {
			return httpx.Response{}, arm.ErrInvalidContent("the value at 'properties' must be an object.")
		}
	}
	switch {
	case b.SKU != nil && (b.SKU.Name == "" || len(b.SKU.Name) > 64):
		return httpx.Response{}, arm.ErrBadRequest("The 'sku.name' property is invalid.")
	case len(b.Kind) > 64:
		return httpx.Response{}, arm.ErrBadRequest("The 'kind' property is invalid.")
	}
	out, err := arm.UpdateProperties(ctx, p.svc.Store(), r.ID, func(res *arm.Resource, st *stored) error {
		if b.Tags != nil {
			res.Tags = b.Tags
		}
		if b.SKU != nil {
			st.SKU = b.SKU.Name
		}
		if b.Kind != "" {
			st.Kind = b.Kind
		}
		if len(patch) > 0 {
			props := map[string]json.RawMessage{}
			if len(st.Properties) > 0 {
				if err := json.Unmarshal(st.Properties, &props); err != nil {
					return err
				}
			}
			for k, v := range patch {
				props[k] = v
			}
			var err error
			if st.Properties, err = json.Marshal(props); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: p.view(out)}, nil
}

// takenTx reports whether an account of this name exists anywhere in the cloud.
func (p *Provider) takenTx(tx *store.Tx, name string) (bool, error) {
	all, err := arm.ListTx(tx, armid.Root, AccountType)
	if err != nil {
		return false, err
	}
	for _, a := range all {
		if strings.EqualFold(a.Name, name) {
			return true, nil
		}
	}
	return false, nil
}

func (p *Provider) account(ctx context.Context, id armid.ID) (arm.Resource, stored, error) {
	var res arm.Resource
	var st stored
	if err := placed(id); err != nil {
		return res, st, err
	}
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		if res, err = arm.GetTx(tx, id); err != nil {
			return err
		}
		return json.Unmarshal(res.Properties, &st)
	})
	return res, st, err
}

func (p *Provider) get(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	res, _, err := p.account(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: p.view(res)}, nil
}

func (p *Provider) list(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	all, err := p.svc.List(ctx, r.ID, AccountType, arm.CheckGroupTx)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.ListResponse(all, p.view), nil
}

func (p *Provider) delete(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if err := placed(r.ID); err != nil {
		return httpx.Response{}, err
	}
	// The account's data goes first: a failure leaves the account, so the delete can be retried.
	// An account that never became Succeeded has none (and Azurite may not start).
	_, st, err := p.account(ctx, r.ID)
	if arm.IsNotFound(err) {
		return arm.Deleted(false), nil
	} else if err != nil {
		return httpx.Response{}, err
	}
	if p.data != nil && st.live() {
		if err := p.data.DeleteAccountData(ctx, r.ID.Name()); err != nil {
			return httpx.Response{}, fmt.Errorf("delete the data of storage account %s: %w", r.ID.Name(), err)
		}
	}
	found, err := p.svc.DeleteIfPresent(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.Deleted(found), nil
}

type keysJSON struct {
	Keys []keyJSON `json:"keys"`
}

type keyJSON struct {
	KeyName      string    `json:"keyName"`
	Value        string    `json:"value"`
	Permissions  string    `json:"permissions"`
	CreationTime time.Time `json:"creationTime"`
}

func keysView(st stored) keysJSON {
	out := keysJSON{Keys: []keyJSON{}}
	for _, k := range st.Keys {
		out.Keys = append(out.Keys, keyJSON{KeyName: k.Name, Value: k.Value, Permissions: "Full", CreationTime: k.Created})
	}
	return out
}

// listKeys serves POST {account}/listKeys; r.ID is the action's collection, its parent the account.
func (p *Provider) listKeys(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	_, st, err := p.account(ctx, r.ID.Parent())
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: keysView(st)}, nil
}

func (p *Provider) regenerateKey(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	id := r.ID.Parent()
	if err := placed(id); err != nil {
		return httpx.Response{}, err
	}
	var b struct {
		KeyName string `json:"keyName"`
	}
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	name := strings.ToLower(b.KeyName)
	if name != "key1" && name != "key2" {
		return httpx.Response{}, arm.ErrBadRequest("The 'keyName' must be 'key1' or 'key2'.")
	}
	var st stored
	_, err := arm.UpdateProperties(ctx, p.svc.Store(), id, func(_ *arm.Resource, cur *stored) error {
		for i, k := range cur.Keys {
			if k.Name == name {
				cur.Keys[i] = newKey(name, p.svc.Now().UTC())
			}
		}
		st = *cur
		return nil
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: keysView(st)}, nil
}

func (p *Provider) checkName(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if len(r.ID.Segments) != 2 {
		return httpx.Response{}, arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", nameCheckType)
	}
	var b struct {
		Name string `json:"name"`
		Type string `json:"type"`
	}
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	type result struct {
		NameAvailable bool   `json:"nameAvailable"`
		Reason        string `json:"reason,omitempty"`
		Message       string `json:"message,omitempty"`
	}
	if !accountName.MatchString(b.Name) {
		return httpx.Response{Body: result{Reason: "AccountNameInvalid", Message: clip(b.Name, 64) + " is not a valid storage account name. " + nameRule}}, nil
	}
	var taken bool
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		taken, err = p.takenTx(tx, b.Name)
		return err
	})
	if err != nil {
		return httpx.Response{}, err
	}
	if taken {
		return httpx.Response{Body: result{Reason: "AlreadyExists", Message: "The storage account named " + b.Name + " is already taken."}}, nil
	}
	return httpx.Response{Body: result{NameAvailable: true}}, nil
}

type skuJSON struct {
	Name string `json:"name"`
	Tier string `json:"tier"`
}

type accountJSON struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags,omitempty"`
	Kind       string            `json:"kind"`
	SKU        skuJSON           `json:"sku"`
	Properties map[string]any    `json:"properties"`
}

// Endpoints are the account's primaryEndpoints: Azure's public names, where the cloud serves
// blob, queue and table (through its proxy, or its DNS); file, dfs and web are not served.
func (p *Provider) Endpoints(account string) map[string]string {
	out := map[string]string{}
	for _, svc := range []string{"blob", "queue", "table", "file", "dfs", "web"} {
		host := svc + ".core.windows.net"
		if svc == "web" {
			host = "z1.web.core.windows.net"
		}
		out[svc] = "https://" + account + "." + host + "/"
	}
	return out
}

func (p *Provider) view(r arm.Resource) accountJSON {
	var st stored
	_ = json.Unmarshal(r.Properties, &st)
	props := map[string]any{}
	if len(st.Properties) > 0 {
		_ = json.Unmarshal(st.Properties, &props)
	}
	keyTimes := map[string]time.Time{}
	for _, k := range st.Keys {
		keyTimes[k.Name] = k.Created
	}
	props["provisioningState"] = arm.StateSucceeded
	if st.State != "" {
		props["provisioningState"] = st.State
	}
	if st.Error != "" {
		props["statusMessage"] = st.Error
	}
	props["creationTime"] = st.Created
	props["primaryEndpoints"] = p.Endpoints(r.Name)
	props["primaryLocation"] = r.Location
	props["statusOfPrimary"] = "available"
	props["keyCreationTime"] = keyTimes
	tier := "Standard"
	if strings.HasPrefix(strings.ToLower(st.SKU), "premium") {
		tier = "Premium"
	}
	return accountJSON{
		ID: r.ID, Name: r.Name, Type: r.Type, Location: r.Location, Tags: r.Tags, Kind: st.Kind,
		SKU: skuJSON{Name: st.SKU, Tier: tier}, Properties: props,
	}
}

func isObject(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) > 0 && t[0] == '{' || bytes.Equal(t, []byte("null"))
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
