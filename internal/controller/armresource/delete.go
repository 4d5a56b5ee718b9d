package armresource

import (
	"time"

	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	corev1 "k8s.io/api/core/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// reconcileDelete deletes the Azure resource of a deleted object, when and only when that is
// asked: a skip or detach-on-delete policy, or the kind's CRD being deleted, release the object
// without a DELETE; a resource never created or already gone is released at once.
func (r *Reconciler) reconcileDelete(ctx context.Context, obj *unstructured.Unstructured) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx)
	ann := obj.GetAnnotations()
	id := ann[AnnotationResourceID]
	switch policy := ann[AnnotationReconcilePolicy]; {
	case policy == PolicySkip || policy == PolicyDetachOnDelete:
		logger.Info("Detaching: the reconcile policy keeps the Azure resource", "policy", policy, "id", id)
		return r.release(ctx, obj, "Detached", "Reconcile policy "+policy+": the Azure resource was kept")
	case id == "":
		return r.release(ctx, obj, "Deleted", "Never created in Azure: nothing to delete")
	case r.opts.Kind.NoDelete:
		return r.release(ctx, obj, "Detached", "Azure has no delete for this kind: the value stays until its owner is deleted")
	}
	crdGone, err := r.crdDeleting(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	if crdGone {
		logger.Info("Detaching: the kind's CRD is being deleted", "id", id)
		return r.release(ctx, obj, "Detached", "The CRD is being deleted: the Azure resource was kept")
	}
	cred, err := r.opts.Credentials.For(ctx, obj)
	if err != nil {
		return r.deleteFailed(ctx, obj, fmt.Errorf("%w: %w", errCredential, err))
	}
	reader, err := newARMClient(cred.Cached(), r.opts.ARM)
	if err != nil {
		return ctrl.Result{}, err
	}
	if token := ann[AnnotationPollerToken]; token != "" && ann[AnnotationPollerID] == pollerDelete {
		poller, err := reader.resume(token)
		if err == nil {
			done, wait, perr := step(ctx, poller)
			if !done {
				return r.deleting(ctx, obj, wait)
			}
			if perr != nil {
				_ = r.patchMeta(ctx, obj, func(o *unstructured.Unstructured) {
					setAnnotations(o, map[string]string{AnnotationPollerToken: "", AnnotationPollerID: ""})
				})
				return r.deleteFailed(ctx, obj, fmt.Errorf("delete %s: %w", id, perr))
			}
		}
		if _, err := reader.get(ctx, id, r.opts.Kind.APIVersion); isNotFound(err) {
			return r.release(ctx, obj, "Deleted", "Deleted in Azure")
		}
	}
	fresh, err := cred.Fresh(ctx)
	if err != nil {
		return r.deleteFailed(ctx, obj, fmt.Errorf("%w: %w", errCredential, err))
	}
	writer, err := newARMClient(fresh, r.opts.ARM)
	if err != nil {
		return ctrl.Result{}, err
	}
	poller, err := writer.beginDelete(ctx, id, r.opts.Kind.APIVersion)
	if errors.Is(err, errGone) {
		return r.release(ctx, obj, "Deleted", "Deleted in Azure")
	}
	if err != nil {
		return r.deleteFailed(ctx, obj, fmt.Errorf("delete %s: %w", id, err))
	}
	if !poller.Done() {
		token, err := poller.ResumeToken()
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("record operation: %w", err)
		}
		if err := r.patchMeta(ctx, obj, func(o *unstructured.Unstructured) {
			setAnnotations(o, map[string]string{AnnotationPollerToken: token, AnnotationPollerID: pollerDelete})
		}); err != nil {
			return ctrl.Result{}, err
		}
		return r.deleting(ctx, obj, 0)
	}
	if _, err := poller.Result(ctx); err != nil {
		return r.deleteFailed(ctx, obj, fmt.Errorf("delete %s: %w", id, err))
	}
	return r.release(ctx, obj, "Deleted", "Deleted in Azure")
}

// release removes the finalizer: Kubernetes may now delete the object.
func (r *Reconciler) release(ctx context.Context, obj *unstructured.Unstructured, reason, msg string) (ctrl.Result, error) {
	if err := r.patchMeta(ctx, obj, func(o *unstructured.Unstructured) { controllerutil.RemoveFinalizer(o, Finalizer) }); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if r.opts.Recorder != nil {
		r.opts.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, reason, "Delete", "%s", msg)
	}
	return ctrl.Result{}, nil
}

// deleting shows the running DELETE; it is polled again after wait (ARM's Retry-After, if any).
func (r *Reconciler) deleting(ctx context.Context, obj *unstructured.Unstructured, wait time.Duration) (ctrl.Result, error) {
	o := Outcome{Status: metav1.ConditionFalse, Severity: shared.SeverityInfo, Reason: shared.ReasonDeleting, Message: "The resource is being deleted in Azure", Requeue: r.pollAfter(wait)}
	orig, _, _ := unstructured.NestedMap(obj.Object, "status")
	if err := r.writeStatus(ctx, obj, orig, nil, false, o); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	return ctrl.Result{RequeueAfter: o.Requeue}, nil
}

// deleteFailed shows why the DELETE failed and retries as classify says (at least each sync
// period, so a permission granted later finishes the deletion).
func (r *Reconciler) deleteFailed(ctx context.Context, obj *unstructured.Unstructured, err error) (ctrl.Result, error) {
	o := classify(err, r.opts.SyncPeriod, r.backoff(obj.GetUID()))
	if o.Requeue == 0 {
		o.Requeue = r.opts.SyncPeriod
	}
	orig, _, _ := unstructured.NestedMap(obj.Object, "status")
	if werr := r.writeStatus(ctx, obj, orig, nil, false, o); werr != nil {
		return ctrl.Result{}, client.IgnoreNotFound(werr)
	}
	return ctrl.Result{RequeueAfter: o.Requeue}, nil
}

// crdDeleting reports whether the reconciled kind's CRD is being deleted.
func (r *Reconciler) crdDeleting(ctx context.Context) (bool, error) {
	gvk := r.opts.Kind.GVK
	mapping, err := r.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return false, fmt.Errorf("map %s: %w", gvk.Kind, err)
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	var reader client.Reader = r.Client
	if r.opts.APIReader != nil {
		reader = r.opts.APIReader
	}
	if err := reader.Get(ctx, client.ObjectKey{Name: mapping.Resource.Resource + "." + gvk.Group}, crd); err != nil {
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, fmt.Errorf("read CRD of %s: %w", gvk.Kind, err)
	}
	return !crd.GetDeletionTimestamp().IsZero(), nil
}
