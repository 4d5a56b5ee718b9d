package storage

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	dataplane "github.com/cerulean/cerulean/internal/cloud/storage"
)

// An account's blob containers, queues and tables as ARM children
// (blobServices/default/containers/NAME, queueServices/default/queues/NAME,
// tableServices/default/tables/NAME) and the three service resources themselves. The children
// are not kept in ARM's store: each call goes to the data plane, so a container made with
// azblob is listed by ARM and one made through ARM is listed by azblob.

// child describes one kind of child.
type child struct {
	service  string         // blobServices
	kind     string         // containers (dataplane.Containers, ...)
	typ      string         // Microsoft.Storage/storageAccounts/blobServices/containers
	name     *regexp.Regexp // the data plane's name rule
	rule     string         // the message for a name out of bounds
	code     string         // the 400's code
	notFound string         // the 404's code
}

var children = []child{
	{
		service: "blobServices", kind: dataplane.Containers, typ: AccountType + "/blobServices/containers",
		name: regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-(?:[a-z0-9]))+$`), code: "ContainerNameInvalid", notFound: "ContainerNotFound",
		rule: "Container names must be 3 to 63 characters long, use only lower-case letters, numbers and hyphens, and begin and end with a letter or number; hyphens may not be consecutive.",
	},
	{
		service: "queueServices", kind: dataplane.Queues, typ: AccountType + "/queueServices/queues",
		name: regexp.MustCompile(`^[a-z0-9](?:[a-z0-9]|-(?:[a-z0-9]))+$`), code: "QueueNameInvalid", notFound: "QueueNotFound",
		rule: "Queue names must be 3 to 63 characters long, use only lower-case letters, numbers and hyphens, and begin and end with a letter or number; hyphens may not be consecutive.",
	},
	{
		service: "tableServices", kind: dataplane.Tables, typ: AccountType + "/tableServices/tables",
		name: regexp.MustCompile(`^[A-Za-z][A-Za-z0-9]+$`), code: "TableNameInvalid", notFound: "TableNotFound",
		rule: "Table names must be 3 to 63 characters long, use only letters and numbers, and begin with a letter.",
	},
}

// registerChildren adds the service and child types and routes.
func (p *Provider) registerChildren() {
	const acct = "/subscriptions/{subscriptionId}/resourceGroups/rg-example/providers/Microsoft.Storage/storageAccounts/stexample"
	for _, c := range children {
		svcType := AccountType + "/" + c.service
		p.svc.RegisterType(arm.Type{Name: svcType, APIVersions: Versions})
		p.svc.RegisterType(arm.Type{Name: c.typ, APIVersions: Versions})
		svcAction := action + c.service + "/"
		childAction := svcAction + c.kind + "/"
		svcPath := acct + "/" + c.service + "/default"
		childPath := svcPath + "/" + c.kind + "/example1"
		for _, rt := range []arm.Route{
			{Method: http.MethodGet, Type: svcType, Action: svcAction + "read", Handle: p.serviceGet(c), Example: svcPath},
			{Method: http.MethodPut, Type: svcType, Action: svcAction + "write", Handle: p.serviceGet(c), Example: svcPath},
			{Method: http.MethodGet, Type: svcType, Collection: true, Action: svcAction + "read", Handle: p.serviceList(c), Example: acct + "/" + c.service},
			{Method: http.MethodPut, Type: c.typ, Action: childAction + "write", Handle: p.childPut(c), Example: childPath},
			{Method: http.MethodPatch, Type: c.typ, Action: childAction + "write", Handle: p.childGet(c), Example: childPath},
			{Method: http.MethodGet, Type: c.typ, Action: childAction + "read", Handle: p.childGet(c), Example: childPath},
			{Method: http.MethodDelete, Type: c.typ, Action: childAction + "delete", Handle: p.childDelete(c), Example: childPath},
			{Method: http.MethodGet, Type: c.typ, Collection: true, Action: childAction + "read", Handle: p.childList(c), Example: svcPath + "/" + c.kind},
		} {
			p.svc.Handle(rt)
		}
	}
}

// serviceID checks the levels above a child: an account in a resource group, the service
// named "default"; it returns the account's name.
func (p *Provider) serviceID(ctx context.Context, id armid.ID, depth int) (string, error) {
	if id.ResourceGroup() == "" || len(id.Segments) != depth {
		return "", arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type cannot be used at this scope.")
	}
	if depth >= 4 && id.Segments[3].Name != "" && !strings.EqualFold(id.Segments[3].Name, "default") {
		return "", arm.Errorf(http.StatusBadRequest, "InvalidResourceName", "The service name must be 'default'.")
	}
	if _, _, err := p.account(ctx, armid.ID{Segments: id.Segments[:3]}); err != nil {
		return "", err
	}
	if p.data == nil {
		return "", arm.Errorf(http.StatusServiceUnavailable, "ServiceUnavailable", "The storage data planes are not running.")
	}
	return strings.ToLower(id.Segments[2].Name), nil
}

func (p *Provider) serviceView(c child, accountID string) map[string]any {
	return map[string]any{
		"id": accountID + "/" + c.service + "/default", "name": "default", "type": AccountType + "/" + c.service,
		"properties": map[string]any{"cors": map[string]any{"corsRules": []any{}}},
	}
}

func (p *Provider) serviceGet(c child) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		if _, err := p.serviceID(ctx, r.ID, 4); err != nil {
			return httpx.Response{}, err
		}
		return httpx.Response{Body: p.serviceView(c, armid.ID{Segments: r.ID.Segments[:3]}.String())}, nil
	}
}

func (p *Provider) serviceList(c child) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		if _, err := p.serviceID(ctx, r.ID, 4); err != nil {
			return httpx.Response{}, err
		}
		return httpx.Response{Body: map[string]any{"value": []any{p.serviceView(c, armid.ID{Segments: r.ID.Segments[:3]}.String())}}}, nil
	}
}

func (p *Provider) childView(c child, accountID, name string) map[string]any {
	props := map[string]any{}
	switch c.kind {
	case dataplane.Containers:
		props = map[string]any{
			"publicAccess": "None", "leaseStatus": "Unlocked", "leaseState": "Available", "hasImmutabilityPolicy": false,
			"hasLegalHold": false, "deleted": false, "remainingRetentionDays": 0,
			"defaultEncryptionScope": "$account-encryption-key", "denyEncryptionScopeOverride": false,
		}
	case dataplane.Queues:
		props = map[string]any{"metadata": map[string]string{}, "approximateMessageCount": 0}
	case dataplane.Tables:
		props = map[string]any{"tableName": name}
	}
	return map[string]any{
		"id": accountID + "/" + c.service + "/default/" + c.kind + "/" + name, "name": name, "type": c.typ,
		"properties": props,
	}
}

func (p *Provider) validChildName(c child, name string) error {
	if len(name) < 3 || len(name) > 63 || !c.name.MatchString(name) {
		return arm.Errorf(http.StatusBadRequest, c.code, "The name '%s' is not valid. %s", clip(name, 64), c.rule)
	}
	return nil
}

func (p *Provider) childPut(c child) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		account, err := p.serviceID(ctx, r.ID, 5)
		if err != nil {
			return httpx.Response{}, err
		}
		name := r.ID.Name()
		if err := p.validChildName(c, name); err != nil {
			return httpx.Response{}, err
		}
		// The body's properties (public access, metadata, signed identifiers) are not kept: the
		// data plane's defaults apply. A table's PUT may have no body at all.
		if err := p.data.PutChild(ctx, account, c.kind, name); err != nil {
			if errors.Is(err, dataplane.ErrChildBeingDeleted) {
				return httpx.Response{}, arm.Errorf(http.StatusConflict, "ContainerBeingDeleted", "The specified %s is being deleted. Try operation later.", strings.TrimSuffix(c.kind, "s"))
			}
			return httpx.Response{}, err
		}
		return httpx.Response{Body: p.childView(c, armid.ID{Segments: r.ID.Segments[:3]}.String(), name)}, nil
	}
}

func (p *Provider) childGet(c child) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		account, err := p.serviceID(ctx, r.ID, 5)
		if err != nil {
			return httpx.Response{}, err
		}
		name := r.ID.Name()
		ok, err := p.data.ChildExists(ctx, account, c.kind, name)
		if err != nil {
			return httpx.Response{}, err
		}
		if !ok {
			return httpx.Response{}, arm.Errorf(http.StatusNotFound, c.notFound, "The specified %s does not exist.", strings.TrimSuffix(c.kind, "s"))
		}
		return httpx.Response{Body: p.childView(c, armid.ID{Segments: r.ID.Segments[:3]}.String(), name)}, nil
	}
}

func (p *Provider) childDelete(c child) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		account, err := p.serviceID(ctx, r.ID, 5)
		if err != nil {
			return httpx.Response{}, err
		}
		found, err := p.data.DeleteChild(ctx, account, c.kind, r.ID.Name())
		if err != nil {
			return httpx.Response{}, err
		}
		return arm.Deleted(found), nil
	}
}

func (p *Provider) childList(c child) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		account, err := p.serviceID(ctx, r.ID, 5)
		if err != nil {
			return httpx.Response{}, err
		}
		names, err := p.data.ListChildren(ctx, account, c.kind)
		if err != nil {
			return httpx.Response{}, err
		}
		out := []any{}
		for _, n := range names {
			out = append(out, p.childView(c, armid.ID{Segments: r.ID.Segments[:3]}.String(), n))
		}
		return httpx.Response{Body: map[string]any{"value": out}}, nil
	}
}
