package armresource

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Azure Service Operator's FlexibleServer extension (and those of its databases, firewall rules
// and configurations) sends no PUT while the server is in a state in which Azure refuses one
// (Stopped, Starting, Stopping, Updating, ...): a doomed PUT would only fail. Cerulean checks
// the server's state as ARM reports it just before a PUT, and reports the wait instead.

// errServerNotReady is a PUT held back while the server is in such a state: retried with the
// backoff, as the PUT's refusal would be.
var errServerNotReady = errors.New("server not ready")

// nonBlockingServerStates are the server states (lowercase) in which a PUT may be sent.
var nonBlockingServerStates = []string{"ready", "succeeded", "failed", "canceled"}

// checkServerState is CheckPut for a FlexibleServer (server is the resource) and its children
// (server is the parent). A server that does not exist yet blocks nothing: it is being created.
func checkServerState(child bool) func(ctx context.Context, env *putEnv) error {
	return func(ctx context.Context, env *putEnv) error {
		id := env.p.id
		if child {
			id = parentID(id)
		}
		res, err := env.client.get(ctx, id, env.p.r.opts.Kind.APIVersion)
		if isNotFound(err) && !child {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read the server %s: %w", id, err)
		}
		props, _ := res["properties"].(map[string]any)
		state, _ := props["state"].(string)
		if state == "" || slices.Contains(nonBlockingServerStates, strings.ToLower(state)) {
			return nil
		}
		what := "The FlexibleServer"
		if child {
			what = "The owning FlexibleServer"
		}
		return fmt.Errorf("%w: %s is in state %q: Azure refuses changes until it is Ready; no PUT is sent meanwhile",
			errServerNotReady, what, state)
	}
}

// parentID is the id of a child resource's parent: two path segments less.
func parentID(id string) string {
	parts := strings.Split(strings.TrimSuffix(id, "/"), "/")
	if len(parts) < 3 {
		return id
	}
	return strings.Join(parts[:len(parts)-2], "/")
}
