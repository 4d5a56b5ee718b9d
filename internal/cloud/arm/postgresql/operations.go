package postgresql

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/engines"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Long-running operations on a server's engine (create, start, stop), and the start of the
// cloud, which brings back the engines that were running.

// action starts or stops a server: 202 and an operation that runs the engine.
func (p *Provider) action(kind string) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		id := r.ID.Parent()
		var op arm.Operation
		err := p.svc.Store().Update(ctx, func(tx *store.Tx) error {
			res, err := arm.UpdatePropertiesTx(tx, id, func(_ *arm.Resource, st *stored) error {
				st.State = map[string]string{opStart: stateStarting, opStop: stateStopping}[kind]
				return nil
			})
			if err != nil {
				return err
			}
			op, err = p.svc.NewOperationTx(tx, r, kind, res.ID)
			return err
		})
		if err != nil {
			return httpx.Response{}, err
		}
		p.svc.Launch(op)
		return p.svc.Accepted(http.StatusAccepted, op, nil), nil
	}
}

// firewallTx reads the server's firewall rules; skip leaves one out (a rule being deleted),
// extra adds one (a rule being written).
func firewallTx(tx *store.Tx, server armid.ID, skip string, extra *arm.Resource) ([]engines.IPRange, error) {
	all, err := arm.ListTx(tx, server, FirewallType)
	if err != nil {
		return nil, err
	}
	var out []engines.IPRange
	if extra != nil {
		skip2 := extra.ID
		kept := all[:0]
		for _, f := range all {
			if !strings.EqualFold(f.ID, skip2) {
				kept = append(kept, f)
			}
		}
		all = append(kept, *extra)
	}
	for _, f := range all {
		if strings.EqualFold(f.ID, skip) {
			continue
		}
		var fr firewallProps
		_ = json.Unmarshal(f.Properties, &fr)
		s, err1 := netip.ParseAddr(fr.Start)
		e, err2 := netip.ParseAddr(fr.End)
		if err1 == nil && err2 == nil {
			out = append(out, engines.IPRange{Start: s, End: e})
		}
	}
	return out, nil
}

// runStart runs the server's engine and records the outcome in the resource.
func (p *Provider) runStart(ctx context.Context, id armid.ID) error {
	var srv engines.PostgresServer
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		res, err := arm.GetTx(tx, id)
		if err != nil {
			return err
		}
		var st stored
		if err := json.Unmarshal(res.Properties, &st); err != nil {
			return err
		}
		fw, err := firewallTx(tx, id, "", nil)
		srv = engines.PostgresServer{Name: res.Name, Login: st.Login, Password: st.Password, Firewall: fw}
		return err
	})
	if arm.IsNotFound(err) {
		return nil // deleted meanwhile
	} else if err != nil {
		return err
	}
	_, startErr := p.eng.StartPostgres(ctx, srv)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if startErr == nil {
		startErr = p.reapplyFirewall(ctx, id, srv.Name)
	}
	return p.record(ctx, id, startErr, stateReady)
}

// reapplyFirewall writes the server's firewall rules to its running engine again: a rule put
// while the engine started was written before the start wrote the rules it had read, and would
// be in ARM but not enforced. In a write transaction, so that a rule's own write (also in one)
// comes wholly before or after.
func (p *Provider) reapplyFirewall(ctx context.Context, id armid.ID, name string) error {
	return p.svc.Store().Update(ctx, func(tx *store.Tx) error {
		rules, err := firewallTx(tx, id, "", nil)
		if err != nil {
			return err
		}
		return p.eng.SetPostgresFirewall(ctx, name, rules)
	})
}

func (p *Provider) runStop(ctx context.Context, id armid.ID) error {
	res, err := p.svc.GetInGroup(ctx, id)
	if arm.IsNotFound(err) {
		return nil
	} else if err != nil {
		return err
	}
	return p.record(ctx, id, p.eng.StopPostgres(res.Name), stateStopped)
}

// record sets the server's state after an engine action: the state reached, or Failed with the
// engine's error (which is the operation's error too).
func (p *Provider) record(ctx context.Context, id armid.ID, engErr error, state string) error {
	_, err := arm.UpdateProperties(ctx, p.svc.Store(), id, func(_ *arm.Resource, st *stored) error {
		if st.ProvisioningState == arm.StateDeleting {
			return arm.ErrUnchanged
		}
		st.State, st.ProvisioningState, st.Error = state, arm.StateSucceeded, ""
		if engErr != nil {
			st.State, st.ProvisioningState, st.Error = "Disabled", provFailed, clip(engErr.Error(), 1024)
		}
		return nil
	})
	if arm.IsNotFound(err) {
		err = nil
	}
	if engErr != nil {
		return arm.Errorf(http.StatusInternalServerError, "InternalServerError", "The server's engine failed: %s", clip(engErr.Error(), 1024))
	}
	return err
}

// Start brings back the engines of the servers that were running when the cloud stopped (the
// ones an interrupted operation starts are left to it).
func (p *Provider) Start(ctx context.Context) error {
	var ids []armid.ID
	err := p.svc.Store().View(ctx, func(tx *store.Tx) error {
		all, err := arm.ListTx(tx, armid.Root, ServerType)
		for _, r := range all {
			var st stored
			if json.Unmarshal(r.Properties, &st) == nil && st.State == stateReady && st.ProvisioningState == arm.StateSucceeded {
				if id, err := armid.Parse(r.ID); err == nil {
					ids = append(ids, id)
				}
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("list PostgreSQL servers: %w", err)
	}
	for _, id := range ids {
		if err := p.runStart(ctx, id); err != nil && ctx.Err() != nil {
			return err
		}
	}
	return nil
}
