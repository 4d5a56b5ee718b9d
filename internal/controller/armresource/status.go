package armresource

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/cerulean/cerulean/api/shared"
)

// finishPass writes the pass's status and metadata in one go (only what changed), records an
// Event when Ready changed (but not into progress: status shows that), and tells
// controller-runtime what to do next.
func (p *pass) finishPass(ctx context.Context, o Outcome, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) { // the finalizer's patch: this pass read a stale object
		return staleRead(ctx, err)
	}
	next, transition, cerr := nextStatus(p.orig, p.status, p.armSeen, o, p.obj.GetGeneration(), p.r.opts.Now())
	if cerr != nil {
		return ctrl.Result{}, cerr
	}
	p.obj.Object["status"] = next
	if perr := p.ph.Patch(ctx, p.obj); perr != nil {
		if apierrors.IsConflict(perr) {
			return staleRead(ctx, perr)
		}
		return ctrl.Result{}, client.IgnoreNotFound(perr)
	}
	// Progress (Reconciling, WaitingForOwner, Deleting: severity Info) is not an Event: at 10,000
	// objects those were 15,000 of 25,000 Events, each one an API write, and client-go's event
	// broadcaster keeps every Event it sent for six minutes or more.
	if transition && o.Severity != shared.SeverityInfo {
		p.r.event(p.obj, o)
	}
	return o.result(err)
}

// staleRetry is when a pass that read a stale object runs again (the newer object's watch
// event usually brings it sooner).
const staleRetry = time.Second

// staleRead ends a pass whose locked patch met a newer object: nothing was written from the
// stale read, and the next pass reads the newer one.
func staleRead(ctx context.Context, err error) (ctrl.Result, error) {
	log.FromContext(ctx).V(1).Info("The object changed since it was read; reconciling again", "reason", err.Error())
	return ctrl.Result{RequeueAfter: staleRetry}, nil
}

// nextStatus is the status a pass leaves: ARM's view when the pass read it (else the old one)
// and the Ready condition. transition reports a change of Ready's status, severity or reason.
func nextStatus(orig, armView map[string]any, seen bool, o Outcome, generation int64, now time.Time) (map[string]any, bool, error) {
	next := map[string]any{}
	if seen {
		for k, v := range armView {
			next[k] = v
		}
	} else {
		for k, v := range orig {
			if k != "conditions" {
				next[k] = deepCopy(v)
			}
		}
	}
	conds, transition := setReady(conditionsOf(orig), o, generation, now)
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&struct {
		C []shared.Condition `json:"c"`
	}{conds})
	if err != nil {
		return nil, false, fmt.Errorf("encode conditions: %w", err)
	}
	next["conditions"] = raw["c"]
	return next, transition, nil
}

// event records Ready's transition: Warning for a Warning or Error severity.
func (r *Reconciler) event(obj *unstructured.Unstructured, o Outcome) {
	typ := corev1.EventTypeNormal
	if o.Severity == shared.SeverityWarning || o.Severity == shared.SeverityError {
		typ = corev1.EventTypeWarning
	}
	msg := o.Message
	if msg == "" {
		msg = "Ready is " + string(o.Status)
	}
	r.recorder.Eventf(obj, nil, typ, o.Reason, "Reconcile", "%s", msg)
}

func conditionsOf(status map[string]any) []shared.Condition {
	raw, ok := status["conditions"]
	if !ok {
		return nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil
	}
	var conds []shared.Condition
	_ = json.Unmarshal(b, &conds)
	return conds
}
