// Package postgresql is the Microsoft.DBforPostgreSQL provider of the local cloud: flexible
// servers, each a real PostgreSQL process the engines supervisor runs, with their databases,
// firewall rules (enforced through the server's pg_hba.conf) and configurations (the server's
// own pg_settings). A create, start and stop are long-running operations that run the engine;
// an engine that fails to start leaves the server provisioningState Failed with its error.
package postgresql

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	ServerType   = "Microsoft.DBforPostgreSQL/flexibleServers"
	DatabaseType = ServerType + "/databases"
	FirewallType = ServerType + "/firewallRules"
	ConfigType   = ServerType + "/configurations"
	startType    = ServerType + "/start"
	stopType     = ServerType + "/stop"
	restartType  = ServerType + "/restart"
	action       = "Microsoft.DBforPostgreSQL/flexibleServers/"
)

// Versions are the accepted api-versions: armpostgresqlflexibleservers/v5 sends 2025-08-01; ASO
// v2.13 2022-12-01, 2023-06-01 and 2024-08-01; the rest are other published ones.
var Versions = []string{
	"2021-06-01", "2022-12-01", "2023-03-01-preview", "2023-06-01", "2023-12-01-preview", "2024-03-01-preview",
	"2024-08-01", "2024-11-01-preview", "2025-01-01-preview", "2025-06-01-preview", "2025-08-01",
}

// MajorVersions are the values of properties.version Azure offers; every one is served by
// PostgreSQL engines.PostgresMajor (docs/cloud.md).
var MajorVersions = []string{"11", "12", "13", "14", "15", "16", "17", "18"}

var (
	serverName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{1,61}[a-z0-9])$`)
	skuName    = regexp.MustCompile(`^Standard_[BDE][0-9]+[a-z]*(_v[3-6])?$`)
	loginName  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]{0,62}$`)
	childName  = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9_-]{0,62}$`)
)

// Reserved administrator logins, as Azure refuses them.
var reservedLogins = []string{"azure_superuser", "azure_pg_admin", "admin", "administrator", "root", "guest", "public", "postgres"}

// Server states (properties.state) and provisioning states.
const (
	stateReady        = "Ready"
	stateProvisioning = "Provisioning"
	stateStarting     = "Starting"
	stateStopping     = "Stopping"
	stateStopped      = "Stopped"
	provFailed        = "Failed"
	provInProgress    = "InProgress"
)

// Provider serves Microsoft.DBforPostgreSQL.
type Provider struct {
	svc *arm.Service
	eng *engines.Supervisor
}

// Register adds the provider's types, routes and operations to svc; eng runs the servers.
func Register(svc *arm.Service, eng *engines.Supervisor) *Provider {
	p := &Provider{svc: svc, eng: eng}
	for _, t := range []string{ServerType, DatabaseType, FirewallType, ConfigType, startType, stopType, restartType} {
		svc.RegisterType(arm.Type{Name: t, APIVersions: Versions})
	}
	const (
		rg  = "/subscriptions/{subscriptionId}/resourceGroups/rg-example"
		srv = rg + "/providers/Microsoft.DBforPostgreSQL/flexibleServers/pg-example"
	)
	for _, rt := range []arm.Route{
		{Method: http.MethodPut, Type: ServerType, Action: action + "write", Handle: p.putServer, Example: srv},
		{Method: http.MethodPatch, Type: ServerType, Action: action + "write", Handle: p.patchServer, Example: srv},
		{Method: http.MethodGet, Type: ServerType, Action: action + "read", Handle: p.getServer, Example: srv},
		{Method: http.MethodDelete, Type: ServerType, Action: action + "delete", Handle: p.deleteAny, Example: srv},
		{Method: http.MethodGet, Type: ServerType, Collection: true, Action: action + "read", Handle: p.listServers, Example: rg + "/providers/Microsoft.DBforPostgreSQL/flexibleServers"},
		{Method: http.MethodPost, Type: startType, Collection: true, Action: action + "start/action", Handle: p.action(opStart), Example: srv + "/start"},
		{Method: http.MethodPost, Type: stopType, Collection: true, Action: action + "stop/action", Handle: p.action(opStop), Example: srv + "/stop"},
		{Method: http.MethodPost, Type: restartType, Collection: true, Action: action + "restart/action", Handle: p.action(opStart), Example: srv + "/restart"},
		{Method: http.MethodPut, Type: DatabaseType, Action: action + "databases/write", Handle: p.databaseSpec().Serve, Example: srv + "/databases/app"},
		{Method: http.MethodGet, Type: DatabaseType, Action: action + "databases/read", Handle: p.getChild(databaseView), Example: srv + "/databases/app"},
		{Method: http.MethodGet, Type: DatabaseType, Collection: true, Action: action + "databases/read", Handle: p.listChildren(DatabaseType, databaseView), Example: srv + "/databases"},
		{Method: http.MethodDelete, Type: DatabaseType, Action: action + "databases/delete", Handle: p.deleteAny, Example: srv + "/databases/app"},
		{Method: http.MethodPut, Type: FirewallType, Action: action + "firewallRules/write", Handle: p.firewallSpec().Serve, Example: srv + "/firewallRules/allow"},
		{Method: http.MethodGet, Type: FirewallType, Action: action + "firewallRules/read", Handle: p.getChild(firewallView), Example: srv + "/firewallRules/allow"},
		{Method: http.MethodGet, Type: FirewallType, Collection: true, Action: action + "firewallRules/read", Handle: p.listChildren(FirewallType, firewallView), Example: srv + "/firewallRules"},
		{Method: http.MethodDelete, Type: FirewallType, Action: action + "firewallRules/delete", Handle: p.deleteAny, Example: srv + "/firewallRules/allow"},
		{Method: http.MethodGet, Type: ConfigType, Action: action + "configurations/read", Handle: p.getConfig, Example: srv + "/configurations/work_mem"},
		{Method: http.MethodGet, Type: ConfigType, Collection: true, Action: action + "configurations/read", Handle: p.listConfigs, Example: srv + "/configurations"},
		{Method: http.MethodPut, Type: ConfigType, Action: action + "configurations/write", Handle: p.putConfig, Example: srv + "/configurations/work_mem"},
		{Method: http.MethodPatch, Type: ConfigType, Action: action + "configurations/write", Handle: p.putConfig, Example: srv + "/configurations/work_mem"},
	} {
		svc.Handle(rt)
	}
	svc.RegisterOperation(opStart, p.runStart)
	svc.RegisterOperation(opStop, p.runStop)
	svc.OnDelete(ServerType, func(_ *store.Tx, r arm.Resource) error { return p.eng.RemovePostgres(r.Name) })
	svc.OnDelete(DatabaseType, p.onDeleteDatabase)
	svc.OnDelete(FirewallType, p.onDeleteFirewall)
	return p
}

const (
	opStart = "postgresql.start" // create, start, restart: run the engine
	opStop  = "postgresql.stop"
)

// stored is what the provider keeps in arm.Resource.Properties. The administrator password is
// kept because a create interrupted by a crash runs initdb again at the next start; it never
// appears in a view.
type stored struct {
	Other             map[string]json.RawMessage `json:"other,omitempty"` // the client's other properties
	SKU               sku                        `json:"sku"`
	Version           string                     `json:"version"`
	Login             string                     `json:"administratorLogin"`
	Password          string                     `json:"administratorLoginPassword"`
	State             string                     `json:"state"`
	ProvisioningState string                     `json:"provisioningState"`
	Error             string                     `json:"error,omitempty"`
	Created           time.Time                  `json:"created"`
}

type sku struct {
	Name string `json:"name"`
	Tier string `json:"tier"`
}

type serverBody struct {
	SKU        *sku                       `json:"sku"`
	Properties map[string]json.RawMessage `json:"properties"`
}

type serverProps struct {
	Version    string `json:"version"`
	Login      string `json:"administratorLogin"`
	Password   string `json:"administratorLoginPassword"`
	CreateMode string `json:"createMode"`
}

func decodeProps(raw map[string]json.RawMessage) (serverProps, error) {
	var sp serverProps
	b, _ := json.Marshal(raw)
	if err := arm.DecodeJSON(b, &sp); err != nil {
		return sp, err
	}
	return sp, nil
}

func errParam(name string) *arm.Error {
	return arm.Errorf(http.StatusBadRequest, "InvalidParameterValue", "Invalid value given for parameter '%s'. Specify a valid parameter value.", name)
}

func checkSKU(s *sku) error {
	if s == nil || s.Name == "" {
		return arm.Errorf(http.StatusBadRequest, "MissingRequiredProperty", "The 'sku.name' property is required.")
	}
	if !skuName.MatchString(s.Name) || len(s.Name) > 64 {
		return arm.Errorf(http.StatusBadRequest, "InvalidSkuName", "The sku name '%s' is not supported. Specify a supported sku, such as 'Standard_B1ms' or 'Standard_D2ds_v5'.", clip(s.Name, 64))
	}
	if s.Tier == "" {
		s.Tier = map[byte]string{'B': "Burstable", 'D': "GeneralPurpose", 'E': "MemoryOptimized"}[s.Name[len("Standard_")]]
	}
	if !slices.Contains([]string{"Burstable", "GeneralPurpose", "MemoryOptimized"}, s.Tier) {
		return errParam("sku.tier")
	}
	return nil
}

func (p *Provider) serverSpec(_ *arm.Request) arm.Put[serverBody] {
	return arm.Put[serverBody]{
		Type: ServerType, Depth: 3, CreatedStatus: http.StatusAccepted,
		Name: func(name string) error {
			if !serverName.MatchString(name) {
				return arm.ErrInvalidName(name, "Server names must have 3 to 63 characters, contain only lower-case letters, digits and hyphens, and not start or end with a hyphen.")
			}
			return nil
		},
		Check: func(_ context.Context, _ *arm.Request, b *serverBody) error {
			if err := checkSKU(b.SKU); err != nil {
				return err
			}
			sp, err := decodeProps(b.Properties)
			if err != nil {
				return err
			}
			if sp.Version != "" && !slices.Contains(MajorVersions, sp.Version) {
				return arm.Errorf(http.StatusBadRequest, "InvalidParameterValue",
					"Invalid value given for parameter 'version'. Specify a valid parameter value: one of %s.", strings.Join(MajorVersions, ", "))
			}
			if sp.CreateMode != "" && !strings.EqualFold(sp.CreateMode, "Default") && !strings.EqualFold(sp.CreateMode, "Create") && !strings.EqualFold(sp.CreateMode, "Update") {
				return arm.Errorf(http.StatusBadRequest, "InvalidParameterValue", "Invalid value given for parameter 'createMode': only Default (Create) and Update are supported by the local cloud.")
			}
			return nil
		},
		Apply: func(tx *store.Tx, res *arm.Resource, created bool, b *serverBody) error {
			sp, _ := decodeProps(b.Properties)
			var st stored
			if created {
				if err := p.checkNameFreeTx(tx, res.Name); err != nil {
					return err
				}
				if !loginName.MatchString(sp.Login) || slices.Contains(reservedLogins, strings.ToLower(sp.Login)) || strings.HasPrefix(strings.ToLower(sp.Login), "pg_") {
					return errParam("administratorLogin")
				}
				if len(sp.Password) < 8 || len(sp.Password) > 128 {
					return arm.Errorf(http.StatusBadRequest, "InvalidParameterValue", "Invalid value given for parameter 'administratorLoginPassword'. The password must have 8 to 128 characters.")
				}
				if sp.Version == "" {
					sp.Version = "16"
				}
				st = stored{Login: sp.Login, Password: sp.Password, Version: sp.Version, State: stateProvisioning,
					ProvisioningState: provInProgress, Created: p.svc.Now().UTC()}
			} else {
				if err := json.Unmarshal(res.Properties, &st); err != nil {
					return err
				}
				if sp.Login != "" && sp.Login != st.Login {
					return arm.ErrBadRequest("The administrator login of a server cannot be changed.")
				}
				if sp.Version != "" {
					st.Version = sp.Version
				}
			}
			st.SKU = *b.SKU
			st.Other = otherProps(b.Properties, st.Other)
			if !created && sp.Password != "" && sp.Password != st.Password {
				if err := p.eng.SetPostgresPassword(context.Background(), res.Name, st.Login, sp.Password); err != nil {
					return err
				}
				st.Password = sp.Password
			}
			var err error
			res.Properties, err = json.Marshal(st) //nolint:gosec // stored for the engine, never returned by ARM
			return err
		},
		View: func(res arm.Resource) any { return p.view(res) },
	}
}

// otherProps keeps the client's properties that the provider does not model (storage, backup,
// network, ...), so a GET shows what was sent; the modelled and read-only ones are dropped.
func otherProps(in, cur map[string]json.RawMessage) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	for k, v := range cur {
		out[k] = v
	}
	for k, v := range in {
		switch k {
		case "version", "administratorLogin", "administratorLoginPassword", "state", "fullyQualifiedDomainName", "createMode", "provisioningState":
		default:
			out[k] = v
		}
	}
	return out
}

// checkNameFreeTx refuses a name another server holds anywhere: it is a DNS name.
func (p *Provider) checkNameFreeTx(tx *store.Tx, name string) error {
	all, err := arm.ListTx(tx, armid.Root, ServerType)
	if err != nil {
		return err
	}
	for _, s := range all {
		if strings.EqualFold(s.Name, name) {
			return arm.Errorf(http.StatusConflict, "ServerNameAlreadyExists", "Specified server name '%s' is already used. Specify a different server name.", name)
		}
	}
	return nil
}

// putServer creates or updates a server: a create answers 202 and runs the engine in an
// operation; an update of a running server applies at once (a new password is set in the
// engine inside the store's transaction, so both change or neither).
func (p *Provider) putServer(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	spec := p.serverSpec(r)
	var op arm.Operation
	inner := spec.Apply
	spec.Apply = func(tx *store.Tx, res *arm.Resource, created bool, b *serverBody) error {
		if err := inner(tx, res, created, b); err != nil {
			return err
		}
		if !created {
			return nil
		}
		var err error
		op, err = p.svc.NewOperationTx(tx, r, opStart, res.ID)
		return err
	}
	res, _, err := spec.Run(ctx, r)
	if err != nil {
		return httpx.Response{}, err
	}
	if !res.Created {
		return spec.Response(res), nil
	}
	p.svc.Launch(op)
	return p.svc.Accepted(http.StatusAccepted, op, p.view(res.Resource)), nil
}

// patchServer updates tags, sku, the administrator password and the client's other properties.
func (p *Provider) patchServer(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	if r.ID.ResourceGroup() == "" || len(r.ID.Segments) != 3 {
		return httpx.Response{}, arm.Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be used at this scope.", ServerType)
	}
	var b struct {
		Tags       map[string]string          `json:"tags"`
		SKU        *sku                       `json:"sku"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	if err := arm.ValidateTags(b.Tags); err != nil {
		return httpx.Response{}, err
	}
	if b.SKU != nil {
		if err := checkSKU(b.SKU); err != nil {
			return httpx.Response{}, err
		}
	}
	sp, err := decodeProps(b.Properties)
	if err != nil {
		return httpx.Response{}, err
	}
	if sp.Version != "" && !slices.Contains(MajorVersions, sp.Version) {
		return httpx.Response{}, errParam("version")
	}
	if sp.Password != "" && (len(sp.Password) < 8 || len(sp.Password) > 128) {
		return httpx.Response{}, errParam("administratorLoginPassword")
	}
	out, err := arm.UpdateProperties(ctx, p.svc.Store(), r.ID, func(res *arm.Resource, st *stored) error {
		if b.Tags != nil {
			res.Tags = b.Tags
		}
		if b.SKU != nil {
			st.SKU = *b.SKU
		}
		if sp.Version != "" {
			st.Version = sp.Version
		}
		st.Other = otherProps(b.Properties, st.Other)
		if sp.Password != "" && sp.Password != st.Password {
			if st.State == stateReady {
				if err := p.eng.SetPostgresPassword(ctx, res.Name, st.Login, sp.Password); err != nil {
					return err
				}
			}
			st.Password = sp.Password
		}
		return nil
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: p.view(out)}, nil
}

func (p *Provider) server(ctx context.Context, id armid.ID) (arm.Resource, stored, error) {
	var st stored
	res, err := p.svc.GetInGroup(ctx, id)
	if err != nil {
		return res, st, err
	}
	return res, st, json.Unmarshal(res.Properties, &st)
}

func (p *Provider) getServer(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	res, _, err := p.server(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: p.view(res)}, nil
}

func (p *Provider) listServers(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	all, err := p.svc.List(ctx, r.ID, ServerType, arm.GroupExistsTx)
	if err != nil {
		return httpx.Response{}, err
	}
	return arm.ListResponse(all, p.view), nil
}

// deleteAny deletes a server, database or firewall rule as a long-running operation; what the
// engine loses with it is done by the types' OnDelete hooks in the deleting transaction.
func (p *Provider) deleteAny(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	cur, err := p.svc.GetInGroup(ctx, r.ID)
	if arm.IsNotFound(err) {
		return httpx.Response{Status: http.StatusNoContent}, nil
	} else if err != nil {
		return httpx.Response{}, err
	}
	return p.svc.BeginDelete(ctx, r, cur)
}

type serverJSON struct {
	ID         string            `json:"id"`
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Location   string            `json:"location"`
	Tags       map[string]string `json:"tags,omitempty"`
	SKU        sku               `json:"sku"`
	Properties map[string]any    `json:"properties"`
}

func (p *Provider) view(r arm.Resource) serverJSON {
	var st stored
	_ = json.Unmarshal(r.Properties, &st)
	props := map[string]any{}
	for k, v := range st.Other {
		props[k] = v
	}
	props["administratorLogin"] = st.Login
	props["version"] = st.Version
	props["minorVersion"] = "0"
	props["state"] = st.State
	props["fullyQualifiedDomainName"] = engines.PostgresHost(r.Name)
	props["replicationRole"] = "Primary"
	if st.ProvisioningState != "" && st.ProvisioningState != arm.StateSucceeded {
		props["provisioningState"] = st.ProvisioningState
	}
	if st.Error != "" {
		props["statusMessage"] = st.Error
	}
	return serverJSON{ID: r.ID, Name: r.Name, Type: ServerType, Location: r.Location, Tags: r.Tags, SKU: st.SKU, Properties: props}
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Databases lists a server's databases, whoever made them (through ARM or with SQL): the web
// view's state of a server. The engines' ErrNotRunning when it is stopped.
func (p *Provider) Databases(ctx context.Context, res arm.Resource) ([]string, error) {
	var st stored
	if err := json.Unmarshal(res.Properties, &st); err != nil {
		return nil, fmt.Errorf("decode server %s: %w", res.Name, err)
	}
	return p.eng.Databases(ctx, res.Name, st.Login)
}
