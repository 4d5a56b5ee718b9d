package credentials

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// FinalizerInUse keeps a credential Secret while objects that use it live: deleting a
// namespace deletes its Secrets first, and a resource that can no longer authenticate can
// never be deleted in Azure (its own finalizer would hold the namespace forever).
const FinalizerInUse = "cerulean.dev/credential-in-use"

// Hold puts FinalizerInUse on the Secret cred came from (nothing for the global credential).
// Controllers call it before they write to Azure with cred.
func Hold(ctx context.Context, c client.Client, cred *Credential) error {
	if cred == nil || cred.secret.Name == "" {
		return nil
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, cred.secret, s); err != nil {
		return fmt.Errorf("read credential secret %s: %w", cred.secret, err)
	}
	if controllerutil.ContainsFinalizer(s, FinalizerInUse) || !s.DeletionTimestamp.IsZero() {
		return nil
	}
	before := s.DeepCopy()
	controllerutil.AddFinalizer(s, FinalizerInUse)
	if err := c.Patch(ctx, s, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("hold credential secret %s: %w", cred.secret, err)
	}
	return nil
}

// Guard releases FinalizerInUse from a Secret being deleted once no object of Kinds in its
// namespace uses it any more (by credential-from, or as the namespace's aso-credential).
type Guard struct {
	c     client.Client
	kinds []schema.GroupVersionKind
}

// RBAC: the armresource controller's rule on secrets (get, list, watch, patch) covers the guard.

// SetupGuard registers the guard: it runs when a held Secret is deleted and when an object of
// kinds goes.
func SetupGuard(mgr ctrl.Manager, kinds []schema.GroupVersionKind) error {
	g := &Guard{c: mgr.GetClient(), kinds: kinds}
	held := predicate.NewPredicateFuncs(func(o client.Object) bool { return controllerutil.ContainsFinalizer(o, FinalizerInUse) })
	b := ctrl.NewControllerManagedBy(mgr).Named("credential-guard").
		For(&corev1.Secret{}, builder.WithPredicates(held))
	for _, gvk := range kinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		b = b.Watches(u, handler.EnqueueRequestsFromMapFunc(secretsOf), builder.WithPredicates(stoppedUsing()))
	}
	return b.Complete(g)
}

// stoppedUsing passes the object events that can leave a Secret unused: the object's deletion,
// or a change of the Secret it names. Every other event (at 10,000 objects, each status write)
// would run the guard for nothing.
func stoppedUsing() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetAnnotations()[AnnotationCredentialFrom] != e.ObjectNew.GetAnnotations()[AnnotationCredentialFrom]
		},
		DeleteFunc:  func(event.DeleteEvent) bool { return true },
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// secretsOf are the Secrets an object may take its credential from.
func secretsOf(_ context.Context, o client.Object) []reconcile.Request {
	out := []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: NamespaceSecretName}}}
	if name := strings.TrimSpace(o.GetAnnotations()[AnnotationCredentialFrom]); name != "" {
		out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}})
	}
	return out
}

// Reconcile releases a deleted Secret no live object uses.
func (g *Guard) Reconcile(ctx context.Context, req reconcile.Request) (ctrl.Result, error) {
	s := &corev1.Secret{}
	if err := g.c.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if s.DeletionTimestamp.IsZero() || !controllerutil.ContainsFinalizer(s, FinalizerInUse) {
		return ctrl.Result{}, nil
	}
	used, err := g.inUse(ctx, s)
	if err != nil || used {
		return ctrl.Result{}, err
	}
	before := s.DeepCopy()
	controllerutil.RemoveFinalizer(s, FinalizerInUse)
	if err := g.c.Patch(ctx, s, client.MergeFrom(before)); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("release credential secret %s: %w", req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// inUse reports whether an object of the namespace (deleting or not) takes its credential from s.
func (g *Guard) inUse(ctx context.Context, s *corev1.Secret) (bool, error) {
	for _, gvk := range g.kinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := g.c.List(ctx, list, client.InNamespace(s.Namespace)); err != nil {
			return false, fmt.Errorf("list %s: %w", gvk.Kind, err)
		}
		for _, o := range list.Items {
			from, named := o.GetAnnotations()[AnnotationCredentialFrom]
			if (named && strings.TrimSpace(from) == s.Name) || (!named && s.Name == NamespaceSecretName) {
				return true, nil
			}
		}
	}
	return false, nil
}
