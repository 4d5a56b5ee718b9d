package podidentity

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/grants"
	"github.com/cerulean/cerulean/internal/podidentity"
)

// ReasonNotGranted is the Event reason of a match dropped because the pod's namespace was not
// granted the identity.
const ReasonNotGranted = "IdentityNotGranted"

// +kubebuilder:rbac:groups=cerulean.dev,resources=namespacegrants,verbs=get;list;watch

// granted keeps the matches whose identity the pod's namespace (and the identity's own) was
// granted: before any assignment, so an identity no grant gives never reaches a node. With
// AllowUngrantedIdentities every match is kept (upstream's behaviour).
func (r *Reconciler) granted(ctx context.Context, pod *corev1.Pod, matches []podidentity.Match) ([]podidentity.Match, error) {
	if r.opts.AllowUngrantedIdentities || len(matches) == 0 {
		return matches, nil
	}
	var list ceruleanv1.NamespaceGrantList
	if err := r.c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("list namespace grants: %w", err)
	}
	var out []podidentity.Match
	for _, m := range matches {
		err := grants.CheckAzureIdentity(list.Items, m.Identity.Namespace, m.Identity)
		if err == nil && pod.Namespace != m.Identity.Namespace {
			err = grants.CheckAzureIdentity(list.Items, pod.Namespace, m.Identity)
		}
		if err != nil {
			r.rec.Eventf(m.Binding, pod, corev1.EventTypeWarning, ReasonNotGranted, "Assign", "Identity of AzureIdentity %s/%s not assigned for pod %s/%s: %s",
				m.Identity.Namespace, m.Identity.Name, pod.Namespace, pod.Name, err.Error())
			continue
		}
		out = append(out, m)
	}
	return out, nil
}
