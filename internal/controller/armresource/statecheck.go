package armresource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Azure Service Operator's pre-reconcile checks: no PUT while the resource (or, for a child,
// its parent) is in a state in which Azure refuses one: a FlexibleServer Stopped, Starting,
// Updating, ... (for the server and its databases, firewall rules and configurations), a
// ManagedCluster whose provisioningState is Updating, Upgrading, ... A doomed PUT would only
// fail and use request quota. Cerulean reads the state as ARM reports it just before a due PUT
// (never in the steady state) and reports the wait instead.

// errStateBlocksPut is a PUT held back by such a state: retried with the backoff, as the PUT's
// refusal would be.
var errStateBlocksPut = errors.New("state blocks changes")

// stateCheck is a CheckPut reading properties[field] of the resource, or of its parent.
type stateCheck struct {
	field   string
	allowed []string // lowercase states in which a PUT may be sent
	parent  bool
	what    string
}

var (
	// flexibleServerStates are the server states in which Azure takes a PUT.
	flexibleServerStates = []string{"ready", "succeeded", "failed", "canceled"}
	// clusterStates are the cluster provisioning states in which Azure takes a PUT.
	clusterStates = []string{"succeeded", "failed", "canceled"}
)

// check is the CheckPut. A resource that does not exist yet blocks nothing: it is being created.
func (c stateCheck) check(ctx context.Context, env *putEnv) error {
	id := env.p.id
	if c.parent {
		id = parentID(id)
	}
	res, err := env.client.get(ctx, id, env.p.r.opts.Kind.APIVersion)
	if isNotFound(err) && !c.parent {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", id, err)
	}
	props, _ := res["properties"].(map[string]any)
	state, _ := props[c.field].(string)
	if !c.blocks(state) {
		return nil
	}
	return fmt.Errorf("%w: %s is in %s %q: Azure refuses changes until it is done; no PUT is sent meanwhile",
		errStateBlocksPut, c.what, c.field, state)
}

// blocks reports whether state holds a PUT back (an unknown, empty state does not).
func (c stateCheck) blocks(state string) bool {
	return state != "" && !slices.Contains(c.allowed, strings.ToLower(state))
}

// parentID is the id of a child resource's parent: two path segments less.
func parentID(id string) string {
	parts := strings.Split(strings.TrimSuffix(id, "/"), "/")
	if len(parts) < 3 {
		return id
	}
	return strings.Join(parts[:len(parts)-2], "/")
}
