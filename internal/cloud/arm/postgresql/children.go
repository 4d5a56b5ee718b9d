package postgresql

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/engines"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Databases, firewall rules and configurations: children of a server whose changes reach the
// engine inside the store's transaction, so ARM and the engine change together or not at all.

type databaseProps struct {
	Charset   string `json:"charset,omitempty"`
	Collation string `json:"collation,omitempty"`
}

type firewallProps struct {
	Start string `json:"startIpAddress"`
	End   string `json:"endIpAddress"`
}

type childBody[P any] struct {
	Properties P `json:"properties"`
}

type childJSON struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	Type       string `json:"type"`
	Properties any    `json:"properties"`
}

func checkChildName(name string) error {
	if !childName.MatchString(name) {
		return arm.ErrInvalidName(name, "Names must have 1 to 63 letters, digits, '_' or '-' and start with a letter, digit or '_'.")
	}
	return nil
}

// readyServerTx is the parent server's stored state; a server that does not run refuses
// changes that need its engine, as Azure's does.
func readyServerTx(tx *store.Tx, id armid.ID) (arm.Resource, stored, error) {
	var st stored
	res, err := arm.GetTx(tx, id.Parent())
	if err != nil {
		return res, st, err
	}
	if err := json.Unmarshal(res.Properties, &st); err != nil {
		return res, st, err
	}
	if st.State != stateReady {
		return res, st, arm.Errorf(http.StatusConflict, "ServerIsNotReady", "The server '%s' is in state '%s'; the operation needs it Ready.", res.Name, st.State)
	}
	return res, st, nil
}

func (p *Provider) databaseSpec() arm.Put[childBody[databaseProps]] {
	return arm.Put[childBody[databaseProps]]{
		Type: DatabaseType, Depth: 4, Child: true, CreatedStatus: http.StatusOK, Name: checkChildName,
		Apply: func(tx *store.Tx, res *arm.Resource, created bool, b *childBody[databaseProps]) error {
			id, err := armid.Parse(res.ID)
			if err != nil {
				return err
			}
			srv, st, err := readyServerTx(tx, id)
			if err != nil {
				return err
			}
			if created {
				if err := p.eng.CreateDatabase(context.Background(), srv.Name, st.Login, res.Name, b.Properties.Charset, b.Properties.Collation); err != nil {
					return arm.ErrBadRequest("The database could not be created: %s", clip(err.Error(), 512))
				}
			}
			res.Properties, err = json.Marshal(b.Properties)
			return err
		},
		View: func(r arm.Resource) any { return databaseView(r) },
	}
}

func databaseView(r arm.Resource) childJSON {
	var dp databaseProps
	_ = json.Unmarshal(r.Properties, &dp)
	if dp.Charset == "" {
		dp.Charset = "UTF8"
	}
	if dp.Collation == "" {
		dp.Collation = "en_US.utf8"
	}
	return childJSON{ID: r.ID, Name: r.Name, Type: DatabaseType, Properties: dp}
}

func (p *Provider) firewallSpec() arm.Put[childBody[firewallProps]] {
	return arm.Put[childBody[firewallProps]]{
		Type: FirewallType, Depth: 4, Child: true, CreatedStatus: http.StatusOK, Name: checkChildName,
		Check: func(_ context.Context, _ *arm.Request, b *childBody[firewallProps]) error {
			s, err1 := netip.ParseAddr(b.Properties.Start)
			e, err2 := netip.ParseAddr(b.Properties.End)
			switch {
			case err1 != nil || !s.Is4():
				return errParam("startIpAddress")
			case err2 != nil || !e.Is4():
				return errParam("endIpAddress")
			case e.Less(s):
				return arm.Errorf(http.StatusBadRequest, "InvalidParameterValue", "The start IP address '%s' is greater than the end IP address '%s'.", s, e)
			}
			return nil
		},
		Apply: func(tx *store.Tx, res *arm.Resource, _ bool, b *childBody[firewallProps]) error {
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
			return p.eng.SetPostgresFirewall(context.Background(), id.Parent().Name(), rules)
		},
		View: func(r arm.Resource) any { return firewallView(r) },
	}
}

func firewallView(r arm.Resource) childJSON {
	var fp firewallProps
	_ = json.Unmarshal(r.Properties, &fp)
	return childJSON{ID: r.ID, Name: r.Name, Type: FirewallType, Properties: fp}
}

func (p *Provider) getChild(view func(arm.Resource) childJSON) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		res, err := p.svc.GetInGroup(ctx, r.ID)
		if err != nil {
			return httpx.Response{}, err
		}
		return httpx.Response{Body: view(res)}, nil
	}
}

func (p *Provider) listChildren(typ string, view func(arm.Resource) childJSON) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		var all []arm.Resource
		err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
			if _, err := arm.GetTx(tx, r.ID.Parent()); err != nil {
				return err
			}
			var err error
			all, err = arm.ListTx(tx, r.ID.Parent(), typ)
			return err
		})
		if err != nil {
			return httpx.Response{}, err
		}
		return arm.ListResponse(all, view), nil
	}
}

// serverGoingTx reports whether the server holding a child is being deleted (then its engine
// goes as a whole and the child's own engine change is skipped).
func serverGoingTx(tx *store.Tx, child arm.Resource) (arm.Resource, stored, bool) {
	var st stored
	id, err := armid.Parse(child.ID)
	if err != nil {
		return arm.Resource{}, st, true
	}
	srv, err := arm.GetTx(tx, id.Parent())
	if err != nil || json.Unmarshal(srv.Properties, &st) != nil {
		return srv, st, true
	}
	return srv, st, st.ProvisioningState == arm.StateDeleting || st.State != stateReady
}

func (p *Provider) onDeleteDatabase(tx *store.Tx, r arm.Resource) error {
	srv, st, going := serverGoingTx(tx, r)
	if going {
		return nil
	}
	return p.eng.DropDatabase(context.Background(), srv.Name, st.Login, r.Name)
}

func (p *Provider) onDeleteFirewall(tx *store.Tx, r arm.Resource) error {
	srv, _, going := serverGoingTx(tx, r)
	if going {
		return nil
	}
	id, err := armid.Parse(srv.ID)
	if err != nil {
		return err
	}
	rules, err := firewallTx(tx, id, r.ID, nil)
	if err != nil {
		return err
	}
	return p.eng.SetPostgresFirewall(context.Background(), srv.Name, rules)
}

// Configurations are the engine's own parameters (pg_settings), read and written live.

type configJSON struct {
	ID         string         `json:"id"`
	Name       string         `json:"name"`
	Type       string         `json:"type"`
	Properties map[string]any `json:"properties"`
}

func configView(server armid.ID, x engines.Parameter) configJSON {
	// Azure's sources are two: a value someone set (ALTER SYSTEM, through ARM) or the default.
	source := "system-default"
	if x.Source == engines.SourceUser {
		source = "user-override"
	}
	return configJSON{ID: server.Child("configurations", x.Name).String(), Name: x.Name, Type: ConfigType, Properties: map[string]any{
		"value": x.Value, "description": x.Description, "defaultValue": x.Default, "dataType": x.DataType,
		"source": source, "isConfigPendingRestart": false, "isDynamicConfig": !x.Restart, "isReadOnly": false, "unit": x.Unit,
	}}
}

func (p *Provider) readyServer(ctx context.Context, id armid.ID) (arm.Resource, stored, error) {
	var res arm.Resource
	var st stored
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		var err error
		res, st, err = readyServerTx(tx, id)
		return err
	})
	return res, st, err
}

func (p *Provider) getConfig(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	srv, st, err := p.readyServer(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	all, err := p.eng.Parameters(ctx, srv.Name, st.Login, r.ID.Name())
	if err != nil {
		return httpx.Response{}, err
	}
	if len(all) == 0 {
		return httpx.Response{}, arm.Errorf(http.StatusNotFound, "ConfigurationNotExists", "The configuration '%s' does not exist for server '%s'.", clip(r.ID.Name(), 64), srv.Name)
	}
	return httpx.Response{Body: configView(r.ID.Parent(), all[0])}, nil
}

func (p *Provider) listConfigs(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	srv, st, err := p.readyServer(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	all, err := p.eng.Parameters(ctx, srv.Name, st.Login, "")
	if err != nil {
		return httpx.Response{}, err
	}
	out := struct {
		Value []configJSON `json:"value"`
	}{Value: []configJSON{}}
	for _, x := range all {
		out.Value = append(out.Value, configView(r.ID.Parent(), x))
	}
	return httpx.Response{Body: out}, nil
}

// putConfig sets a parameter (ALTER SYSTEM, then a reload) and answers with its new row.
func (p *Provider) putConfig(ctx context.Context, r *arm.Request) (httpx.Response, error) {
	var b struct {
		Properties struct {
			Value  *string `json:"value"`
			Source string  `json:"source"`
		} `json:"properties"`
	}
	if err := r.Decode(&b); err != nil {
		return httpx.Response{}, err
	}
	srv, st, err := p.readyServer(ctx, r.ID)
	if err != nil {
		return httpx.Response{}, err
	}
	name := r.ID.Name()
	cur, err := p.eng.Parameters(ctx, srv.Name, st.Login, name)
	if err != nil {
		return httpx.Response{}, err
	}
	if len(cur) == 0 {
		return httpx.Response{}, arm.Errorf(http.StatusNotFound, "ConfigurationNotExists", "The configuration '%s' does not exist for server '%s'.", clip(name, 64), srv.Name)
	}
	if b.Properties.Value != nil {
		if err := p.eng.SetParameter(ctx, srv.Name, st.Login, name, *b.Properties.Value); err != nil {
			var ae *arm.Error
			if errors.As(err, &ae) {
				return httpx.Response{}, err
			}
			return httpx.Response{}, arm.Errorf(http.StatusBadRequest, "InvalidParameterValue", "Invalid value given for parameter '%s': %s", clip(name, 64), clip(err.Error(), 256))
		}
	}
	if cur, err = p.eng.Parameters(ctx, srv.Name, st.Login, name); err != nil || len(cur) == 0 {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: configView(r.ID.Parent(), cur[0])}, nil
}
