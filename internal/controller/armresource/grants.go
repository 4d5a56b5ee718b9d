package armresource

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/grants"
)

// +kubebuilder:rbac:groups=cerulean.dev,resources=namespacegrants,verbs=get;list;watch

// errNotGranted is a resource that, reconciled with the global credential, would act on or
// refer to an ARM scope its namespace was not granted. It is retried with the backoff: the
// refusal heals when an admin adds the grant.
var errNotGranted = grants.ErrNotGranted

// ReasonNotGranted is the Ready reason of a resource refused for want of a NamespaceGrant.
const ReasonNotGranted = "NotGranted"

// checkGrants refuses, before any Azure call, a resource reconciled with the manager's global
// credential whose own ARM id or whose armId references are outside the scopes its namespace
// was granted. Per-namespace and per-resource credentials are limited by Azure itself, and
// AllowUngrantedScopes restores Azure Service Operator's cluster-wide trust.
func (r *Reconciler) checkGrants(ctx context.Context, obj *unstructured.Unstructured, cred *credentials.Credential, id string) error {
	if r.opts.AllowUngrantedScopes || cred == nil || cred.Source != credentials.SourceGlobal {
		return nil
	}
	spec, _, _ := unstructured.NestedMap(obj.Object, "spec")
	var list ceruleanv1.NamespaceGrantList
	if err := r.List(ctx, &list); err != nil {
		return fmt.Errorf("list namespace grants: %w", err)
	}
	if err := grants.CheckScopes(list.Items, obj.GetNamespace(), append(grants.References(spec), id)); err != nil {
		if errors.Is(err, grants.ErrNotGranted) {
			return err
		}
		return fmt.Errorf("check grants: %w", err)
	}
	return nil
}
