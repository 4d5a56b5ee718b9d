package armresource

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Index names.
const (
	indexOwner      = "cerulean.owner"      // group/Kind/name of the owner by name
	indexConfigMaps = "cerulean.configmaps" // ConfigMaps the spec's xFromConfig read
)

// +kubebuilder:rbac:groups=resources.azure.com;managedidentity.azure.com;keyvault.azure.com;authorization.azure.com;storage.azure.com;containerservice.azure.com,resources=*,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=resources.azure.com;managedidentity.azure.com;keyvault.azure.com;authorization.azure.com;storage.azure.com;containerservice.azure.com,resources=*/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;patch

// SetupWithManager registers the controller, its indexes and what it watches: the kind, its
// possible owners (a child waiting for an owner runs again when the owner changes), the
// ConfigMaps its specs read and the NamespaceGrants (a refused object runs again when granted).
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	k := r.opts.Kind
	if err := mgr.GetFieldIndexer().IndexField(ctx, r.newObject(), indexOwner, ownerIndex(k)); err != nil {
		return fmt.Errorf("index owners of %s: %w", k.GVK.Kind, err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, r.newObject(), indexConfigMaps, func(o client.Object) []string {
		spec, _, _ := unstructured.NestedMap(o.(*unstructured.Unstructured).Object, "spec")
		return configMapRefs(spec)
	}); err != nil {
		return fmt.Errorf("index ConfigMaps of %s: %w", k.GVK.Kind, err)
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(k.GVK.Kind)).
		WithOptions(controller.Options{RateLimiter: r.opts.RateLimiter}).
		For(r.newObject(), builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, userAnnotationsChanged(), deletionStarted()))).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.listBy(indexConfigMaps, func(o client.Object) string { return o.GetName() })))
	if err := r.watchSecrets(ctx, mgr, b); err != nil {
		return err
	}
	if err := r.watchGrants(ctx, mgr, b); err != nil {
		return err
	}
	for _, owner := range Kinds() {
		if !r.mayOwn(owner) {
			continue
		}
		gk := owner.GVK.GroupKind()
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(owner.GVK)
		b = b.Watches(u, handler.EnqueueRequestsFromMapFunc(r.listBy(indexOwner, func(o client.Object) string {
			return gk.Group + "/" + gk.Kind + "/" + o.GetName()
		})), builder.WithPredicates(readyChanged()))
	}
	return b.Complete(r)
}

func (r *Reconciler) mayOwn(owner Kind) bool {
	k := r.opts.Kind
	switch k.Owner {
	case OwnerScope:
		return owner.GVK != k.GVK
	case OwnerByType: // any resource, another of its own kind included (a queue's namespace)
		return true
	}
	for _, gk := range k.OwnerKinds {
		if gk == owner.GVK.GroupKind() {
			return true
		}
	}
	return false
}

func ownerIndex(k Kind) client.IndexerFunc {
	return func(o client.Object) []string {
		owner, _, _ := unstructured.NestedMap(o.(*unstructured.Unstructured).Object, "spec", "owner")
		name, _ := owner["name"].(string)
		if name == "" {
			return nil
		}
		group, kind := "", ""
		if k.Owner == OwnerScope || k.Owner == OwnerByType {
			group, _ = owner["group"].(string)
			kind, _ = owner["kind"].(string)
			if gvk, ok := servedGVK(group, kind); ok {
				group, kind = gvk.Group, gvk.Kind
			}
		} else if len(k.OwnerKinds) > 0 {
			group, kind = k.OwnerKinds[0].Group, k.OwnerKinds[0].Kind
		}
		return []string{group + "/" + kind + "/" + name}
	}
}

// listBy maps an event to the objects of this kind whose index holds key(o).
func (r *Reconciler) listBy(index string, key func(client.Object) string) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(r.opts.Kind.GVK.GroupVersion().WithKind(r.opts.Kind.GVK.Kind + "List"))
		if err := r.List(ctx, list, client.InNamespace(o.GetNamespace()), client.MatchingFields{index: key(o)}); err != nil {
			return nil
		}
		out := make([]reconcile.Request, 0, len(list.Items))
		for _, item := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: item.GetNamespace(), Name: item.GetName()}})
		}
		return out
	}
}

// operatorAnnotations are written by the manager itself: a change to them is no reason to run.
var operatorAnnotations = map[string]bool{
	AnnotationResourceID: true, AnnotationPollerToken: true, AnnotationPollerID: true, AnnotationAppliedHash: true,
	"kubectl.kubernetes.io/last-applied-configuration": true,
}

func userAnnotations(o client.Object) map[string]string {
	out := map[string]string{}
	for k, v := range o.GetAnnotations() {
		if !operatorAnnotations[k] {
			out[k] = v
		}
	}
	return out
}

func userAnnotationsChanged() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		a, b := userAnnotations(e.ObjectOld), userAnnotations(e.ObjectNew)
		if len(a) != len(b) {
			return true
		}
		for k, v := range a {
			if b[k] != v {
				return true
			}
		}
		return false
	}}
}

func deletionStarted() predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
}

// readyChanged passes owner events that may unblock a child: creation, and an update after
// which the owner is Ready with an id it did not have Ready before. Its other transitions
// (Reconciling, a new id while not Ready) unblock nothing: at 5,000 identities they woke each
// waiting credential four times.
func readyChanged() predicate.Funcs {
	readyID := func(o client.Object) string {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return ""
		}
		status, _, _ := unstructured.NestedMap(u.Object, "status")
		c := readyCondition(conditionsOf(status))
		id, _ := status["id"].(string)
		if c == nil || c.Status != metav1.ConditionTrue || id == "" {
			return ""
		}
		return id
	}
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			id := readyID(e.ObjectNew)
			return id != "" && id != readyID(e.ObjectOld)
		},
		DeleteFunc: func(event.DeleteEvent) bool { return false },
	}
}
