package armresource

import (
	"context"
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/grants"
)

// +kubebuilder:rbac:groups=cerulean.dev,resources=namespacegrants,verbs=get;list;watch

// errNotGranted is a resource that, reconciled with the global credential, would act on or
// refer to an ARM scope its namespace was not granted. It is retried with the backoff, and at
// once when a grant naming its namespace is created or changed (watchGrants).
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

// indexNotGranted holds "true" for an object whose Ready reason is ReasonNotGranted.
const indexNotGranted = "cerulean.notgranted"

// watchGrants runs the refused objects of a namespace again as soon as a NamespaceGrant naming
// it is created or changed, instead of at their next backoff retry (up to minutes later). Only
// the objects refused for want of a grant are queued, found through an index of the cache on
// their Ready reason; one whose refusal is still being written when the grant arrives is not
// indexed yet and heals at its backoff retry, as before.
func (r *Reconciler) watchGrants(ctx context.Context, mgr ctrl.Manager, b *builder.Builder) error {
	if r.opts.AllowUngrantedScopes {
		return nil // nothing is ever refused
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, r.newObject(), indexNotGranted, func(o client.Object) []string {
		status, _, _ := unstructured.NestedMap(o.(*unstructured.Unstructured).Object, "status")
		if c := readyCondition(conditionsOf(status)); c != nil && c.Reason == ReasonNotGranted {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index refused %s: %w", r.opts.Kind.GVK.Kind, err)
	}
	refused := r.listBy(indexNotGranted, func(client.Object) string { return "true" })
	b.Watches(&ceruleanv1.NamespaceGrant{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
		g, ok := o.(*ceruleanv1.NamespaceGrant)
		if !ok {
			return nil
		}
		var out []reconcile.Request
		for _, ns := range g.Spec.Namespaces {
			out = append(out, refused(ctx, nsObject(ns))...)
		}
		return out
	}), builder.WithPredicates(predicate.GenerationChangedPredicate{}, predicate.Funcs{
		DeleteFunc: func(event.DeleteEvent) bool { return false }, // a withdrawal refuses nothing sooner
	}))
	return nil
}

// nsObject is a stand-in object in namespace ns, for listBy's InNamespace.
func nsObject(ns string) client.Object {
	u := &unstructured.Unstructured{}
	u.SetNamespace(ns)
	return u
}
