package armresource

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cerulean/cerulean/api/shared"
	"github.com/cerulean/cerulean/internal/controller/lifecycle"
	"github.com/cerulean/cerulean/internal/grants"
)

// delete deletes the Azure resource of a deleted object, when and only when that is asked: a
// skip or detach-on-delete policy, or the kind's CRD being deleted, release the object
// without a DELETE; a resource never created or already gone is released at once. The id
// deleted is the one the spec names, never an annotation's.
func (p *pass) delete(ctx context.Context) (ctrl.Result, error) {
	r, obj := p.r, p.obj
	if !controllerutil.ContainsFinalizer(obj, Finalizer) {
		return ctrl.Result{}, nil
	}
	logger := log.FromContext(ctx)
	ann := obj.GetAnnotations()
	statusID, _, _ := unstructured.NestedString(obj.Object, "status", "id")
	switch policy := ann[AnnotationReconcilePolicy]; {
	case policy == PolicySkip || policy == PolicyDetachOnDelete:
		logger.Info("Detaching: the reconcile policy keeps the Azure resource", "policy", policy)
		return p.release(ctx, "Detached", "Reconcile policy "+policy+": the Azure resource was kept")
	case ann[AnnotationResourceID] == "" && statusID == "":
		return p.release(ctx, "Deleted", "Never created in Azure: nothing to delete")
	case r.opts.Kind.NoDelete:
		return p.release(ctx, "Detached", "Azure has no delete for this kind: the value stays until its owner is deleted")
	case p.targetErr != nil:
		// A type the manager may not reconcile is never deleted either: it did not create it.
		return p.release(ctx, "Detached", "No Azure resource was deleted: "+p.targetErr.Error())
	}
	crdGone, err := lifecycle.CRDDeleting(ctx, r.crdReader(), r.RESTMapper(), r.opts.Kind.GVK)
	if err != nil {
		return ctrl.Result{}, err
	}
	if crdGone {
		logger.Info("Detaching: the kind's CRD is being deleted")
		return p.release(ctx, "Detached", "The CRD is being deleted: the Azure resource was kept")
	}
	cred, err := r.credential(ctx, obj)
	if err != nil {
		return p.deleteFailed(ctx, err)
	}
	p.cred = cred
	if p.id, err = p.deleteID(ctx); err != nil {
		return p.deleteFailed(ctx, err)
	}
	if p.id == "" {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Detached", "Delete",
			"The owner is gone and the object has no Azure id: no Azure resource was deleted")
		return p.release(ctx, "Detached", "The Azure id could not be computed from the spec: nothing was deleted")
	}
	// A namespace deletes only inside its grants: an object it made for someone else's resource
	// (its finalizer and resource-id written by hand) is released, never sent as a DELETE.
	if err := r.checkGrants(ctx, obj, cred, p.id); errors.Is(err, grants.ErrNotGranted) {
		r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "Detached", "Delete", "No Azure resource was deleted: %s", err)
		return p.release(ctx, "Detached", "The namespace is not granted the resource's scope: nothing was deleted")
	} else if err != nil {
		return p.deleteFailed(ctx, err)
	}
	p.checkResourceID(ctx)
	reader, err := r.newARM(cred.Cached())
	if err != nil {
		return ctrl.Result{}, err
	}
	if token := ann[AnnotationPollerToken]; token != "" && ann[AnnotationPollerID] == pollerDelete {
		if res, done := p.resumeDelete(ctx, reader, token); done {
			return res.result, res.err
		}
	}
	return p.sendDelete(ctx)
}

type deleteResult struct {
	result ctrl.Result
	err    error
}

// resumeDelete polls a recorded DELETE (when its token may be followed); done reports that
// the pass's outcome is decided.
func (p *pass) resumeDelete(ctx context.Context, reader armAPI, token string) (deleteResult, bool) {
	if err := p.r.checkToken(token, p.id, p.armType); err != nil {
		p.dropToken(ctx, err)
	} else if poller, err := reader.resume(token); err == nil {
		done, wait, perr := stepPoller(ctx, poller)
		if !done {
			res, err := p.deleting(ctx, wait)
			return deleteResult{res, err}, true
		}
		if perr != nil {
			setAnnotations(p.obj, map[string]string{AnnotationPollerToken: "", AnnotationPollerID: ""})
			res, err := p.deleteFailed(ctx, fmt.Errorf("delete %s: %w", p.id, perr))
			return deleteResult{res, err}, true
		}
	}
	if _, err := reader.get(ctx, p.id, p.apiVersion); isNotFound(err) {
		res, err := p.release(ctx, "Deleted", "Deleted in Azure")
		return deleteResult{res, err}, true
	}
	return deleteResult{}, false
}

// sendDelete sends the DELETE with a fresh credential.
func (p *pass) sendDelete(ctx context.Context) (ctrl.Result, error) {
	fresh, err := p.cred.Fresh(ctx)
	if err != nil {
		return p.deleteFailed(ctx, fmt.Errorf("%w: %w", errCredential, err))
	}
	writer, err := p.r.newARM(fresh)
	if err != nil {
		return ctrl.Result{}, err
	}
	poller, err := writer.beginDelete(ctx, p.id, p.apiVersion)
	if errors.Is(err, errGone) {
		return p.release(ctx, "Deleted", "Deleted in Azure")
	}
	if err != nil {
		return p.deleteFailed(ctx, fmt.Errorf("delete %s: %w", p.id, err))
	}
	if !poller.Done() {
		token, err := poller.ResumeToken()
		if err != nil {
			return ctrl.Result{}, fmt.Errorf("record operation: %w", err)
		}
		setAnnotations(p.obj, map[string]string{AnnotationPollerToken: token, AnnotationPollerID: pollerDelete})
		return p.deleting(ctx, 0)
	}
	if _, err := poller.Result(ctx); err != nil {
		return p.deleteFailed(ctx, fmt.Errorf("delete %s: %w", p.id, err))
	}
	return p.release(ctx, "Deleted", "Deleted in Azure")
}

// deleteID is the id to delete: computed from the spec (the owner's id, Ready or not); when the
// owner object is gone, the object's own status.id if it is of this kind and name in the
// credential's subscription; else "" (nothing is deleted).
func (p *pass) deleteID(ctx context.Context) (string, error) {
	id, err := p.r.armID(ctx, p.obj, p.cred, false)
	if err == nil || !errors.Is(err, errOwnerNotFound) {
		return id, err
	}
	statusID, _, _ := unstructured.NestedString(p.obj.Object, "status", "id")
	if p.r.matchesSpec(statusID, p.obj, p.cred.SubscriptionID) {
		return statusID, nil
	}
	return "", nil
}

// matchesSpec reports whether id is a resource of this kind with the spec's name in sub.
func (r *Reconciler) matchesSpec(id string, obj *unstructured.Unstructured, sub string) bool {
	k := r.opts.Kind
	suffix := k.idSuffix(k.armTypeOf(obj), r.azureName(obj))
	return id != "" && strings.EqualFold(subscriptionOf(id), sub) && strings.HasSuffix(strings.ToLower(id), strings.ToLower(suffix))
}

// release removes the finalizer: Kubernetes may now delete the object.
func (p *pass) release(ctx context.Context, reason, msg string) (ctrl.Result, error) {
	controllerutil.RemoveFinalizer(p.obj, Finalizer)
	if err := p.ph.Patch(ctx, p.obj); err != nil {
		if apierrors.IsConflict(err) {
			return staleRead(ctx, err)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p.r.recorder.Eventf(p.obj, nil, corev1.EventTypeNormal, reason, "Delete", "%s", msg)
	return ctrl.Result{}, nil
}

// deleting shows the running DELETE; it is polled again after wait (ARM's Retry-After, if any).
func (p *pass) deleting(ctx context.Context, wait time.Duration) (ctrl.Result, error) {
	o := Outcome{Status: metav1.ConditionFalse, Severity: shared.SeverityInfo, Reason: shared.ReasonDeleting,
		Message: "The resource is being deleted in Azure", Requeue: p.r.pollAfter(wait)}
	return p.finishPass(ctx, o, nil)
}

// deleteFailed shows why the DELETE failed. A deletion is never given up: what classify calls
// terminal is retried by the workqueue's backoff too (a permission granted later, a lock
// removed, finish it).
func (p *pass) deleteFailed(ctx context.Context, err error) (ctrl.Result, error) {
	o := classify(err, p.r.opts.SyncPeriod, p.r.pollAfter)
	if o.Retry == RetryNever {
		o.Retry = RetryBackoff
	}
	return p.finishPass(ctx, o, err)
}

// crdReader reads the CRD without the cache when it can.
func (r *Reconciler) crdReader() client.Reader {
	if r.opts.APIReader != nil {
		return r.opts.APIReader
	}
	return r.Client
}
