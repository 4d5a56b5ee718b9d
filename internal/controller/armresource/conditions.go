package armresource

import (
	"errors"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// Outcome is what a pass found: the Ready condition to show and when to come back.
type Outcome struct {
	Status   metav1.ConditionStatus
	Severity shared.Severity
	Reason   string
	Message  string
	// Requeue is when to look again; 0 means only when the object changes.
	Requeue time.Duration
}

// Errors the phases return, mapped to reasons by classify.
var (
	errInvalidSpec     = errors.New("invalid spec")
	errWaitingForOwner = errors.New("owner not ready")
	errOwnerNotFound   = errors.New("owner not found")
	errConfigMap       = errors.New("configmap value missing")
	errReference       = errors.New("reference not resolved")
	errSubscription    = errors.New("subscription mismatch")
	errExport          = errors.New("export failed")
	errCredential      = errors.New("credential unavailable")
)

// classify maps a pass's error to the Ready condition, as Azure Service Operator does:
// invalid input and ARM 400s are terminal (severity Error, no retry until the spec changes);
// 401/403 are Error but retried each sync period (a role granted later heals them); throttling,
// conflicts and server errors are Warnings retried after ARM's Retry-After or a backoff.
func classify(err error, sync, backoff time.Duration) Outcome {
	o := Outcome{Status: metav1.ConditionFalse, Message: err.Error()}
	switch code := statusCode(err); {
	case errors.Is(err, errWaitingForOwner):
		o.Severity, o.Reason, o.Requeue = shared.SeverityInfo, shared.ReasonWaitingForOwner, backoff
	case errors.Is(err, errOwnerNotFound):
		o.Severity, o.Reason, o.Requeue = shared.SeverityInfo, shared.ReasonWaitingForOwner, backoff
	case errors.Is(err, errConfigMap):
		o.Severity, o.Reason, o.Requeue = shared.SeverityWarning, shared.ReasonConfigMapNotFound, backoff
	case errors.Is(err, errReference):
		o.Severity, o.Reason, o.Requeue = shared.SeverityWarning, shared.ReasonReferenceNotFound, backoff
	case errors.Is(err, errNotGranted):
		o.Severity, o.Reason, o.Requeue = shared.SeverityError, ReasonNotGranted, backoff
	case errors.Is(err, errSubscription):
		o.Severity, o.Reason = shared.SeverityError, shared.ReasonSubscriptionMismatch
	case errors.Is(err, errCredential):
		o.Severity, o.Reason, o.Requeue = shared.SeverityWarning, shared.ReasonSecretNotFound, backoff
	case errors.Is(err, errInvalidSpec):
		o.Severity, o.Reason = shared.SeverityError, shared.ReasonReconciliationFailedPermanently
	case errors.Is(err, errExport):
		o.Severity, o.Reason, o.Requeue = shared.SeverityWarning, shared.ReasonFailedWritingAdditionalKubeObjects, backoff
	case code == http.StatusBadRequest:
		o.Severity, o.Reason = shared.SeverityError, shared.ReasonReconciliationFailedPermanently
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		o.Severity, o.Reason, o.Requeue = shared.SeverityError, shared.ReasonReconciliationFailedPermanently, sync
	default: // 404 of a parent, 409, 429, 5xx, failed operations, transport errors
		o.Severity, o.Reason, o.Requeue = shared.SeverityWarning, shared.ReasonReconciliationFailure, backoff
		if ra := retryAfter(err); ra > 0 {
			o.Requeue = ra
		}
	}
	return o
}

// setReady puts the outcome into conditions, keeping lastTransitionTime when nothing but the
// message changed; it reports whether status, severity or reason changed (an Event is due).
func setReady(conds []shared.Condition, o Outcome, generation int64, now time.Time) ([]shared.Condition, bool) {
	next := shared.Condition{
		Type: shared.ConditionTypeReady, Status: o.Status, Severity: o.Severity, Reason: o.Reason,
		Message: o.Message, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now.UTC().Truncate(time.Second)),
	}
	for i, c := range conds {
		if c.Type != shared.ConditionTypeReady {
			continue
		}
		transition := c.Status != next.Status || c.Severity != next.Severity || c.Reason != next.Reason
		if !transition {
			next.LastTransitionTime = c.LastTransitionTime
		}
		out := append([]shared.Condition(nil), conds...)
		out[i] = next
		return out, transition
	}
	return append(append([]shared.Condition(nil), conds...), next), true
}

// readyCondition returns the Ready condition, if any.
func readyCondition(conds []shared.Condition) *shared.Condition {
	for i := range conds {
		if conds[i].Type == shared.ConditionTypeReady {
			return &conds[i]
		}
	}
	return nil
}
