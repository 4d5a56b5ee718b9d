package podidentity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/grants"
)

// ReasonNotGranted is the Event reason of a match dropped because the pod's namespace was not
// granted the identity.
const ReasonNotGranted = "IdentityNotGranted"

// +kubebuilder:rbac:groups=cerulean.dev,resources=namespacegrants,verbs=get;list;watch

// dropUngranted removes from want the assignments whose identity the pod's namespace (and the
// identity's own) was not granted, with a Warning Event on the binding: before any assignment,
// so an identity no grant gives never reaches a node. With AllowUngrantedIdentities every
// assignment is kept (upstream's behaviour).
func (r *Reconciler) dropUngranted(ctx context.Context, want map[string]desired) error {
	if r.opts.AllowUngrantedIdentities || len(want) == 0 {
		return nil
	}
	var list ceruleanv1.NamespaceGrantList
	if err := r.c.List(ctx, &list); err != nil {
		return fmt.Errorf("list namespace grants: %w", err)
	}
	for k, d := range want {
		m, pod := d.match, d.pod
		err := grants.CheckAzureIdentity(list.Items, m.Identity.Namespace, m.Identity)
		if err == nil && pod.Namespace != m.Identity.Namespace {
			err = grants.CheckAzureIdentity(list.Items, pod.Namespace, m.Identity)
		}
		if err != nil {
			r.rec.Eventf(m.Binding, pod, corev1.EventTypeWarning, ReasonNotGranted, "Assign", "Identity of AzureIdentity %s/%s not assigned for pod %s/%s: %s",
				m.Identity.Namespace, m.Identity.Name, pod.Namespace, pod.Name, err.Error())
			delete(want, k)
		}
	}
	return nil
}
