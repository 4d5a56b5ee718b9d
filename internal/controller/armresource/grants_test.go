package armresource

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cerulean/cerulean/api/shared"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/grants"
)

// A refusal for want of a grant is an Error the user sees by name, retried by the backoff (a
// grant added later heals it), never a terminal failure.
func TestNotGrantedOutcome(t *testing.T) {
	err := grants.CheckScopes(nil, "team-a", []string{"/subscriptions/s/resourceGroups/victim"})
	o := classify(err, time.Hour, func(d time.Duration) time.Duration { return d })
	if o.Severity != shared.SeverityError || o.Reason != ReasonNotGranted || o.Retry != RetryBackoff ||
		!strings.Contains(o.Message, "NamespaceGrant") || !strings.Contains(o.Message, "/subscriptions/s/resourceGroups/victim") {
		t.Fatalf("outcome %+v", o)
	}
}

// Only the global credential is checked (Azure limits the others), and the switch turns the
// check off; neither reads a grant.
func TestCheckGrantsSkips(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"owner": map[string]any{"armId": "/subscriptions/s/resourceGroups/x"}}}}
	r := &Reconciler{} // no client: a List would panic
	if err := r.checkGrants(t.Context(), obj, &credentials.Credential{Source: "namespace ns/aso-credential"}, "/subscriptions/s/resourceGroups/x/y"); err != nil {
		t.Fatalf("namespace credential: %v", err)
	}
	r.opts.AllowUngrantedScopes = true
	if err := r.checkGrants(t.Context(), obj, &credentials.Credential{Source: credentials.SourceGlobal}, "/subscriptions/s/resourceGroups/x/y"); err != nil {
		t.Fatalf("with AllowUngrantedScopes: %v", err)
	}
}
