package armresource

import (
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cerulean/cerulean/api/shared"
)

func TestClassify(t *testing.T) {
	const sync = time.Hour
	poll := func(d time.Duration) time.Duration { return min(d+time.Second, 10*time.Second) }
	cases := []struct {
		name     string
		err      error
		status   metav1.ConditionStatus
		severity shared.Severity
		reason   string
		retry    Retry
		requeue  time.Duration
	}{
		{"success", nil, metav1.ConditionTrue, shared.SeverityNone, shared.ReasonSucceeded, RetryAfter, sync},
		{"running", &progressError{msg: "m", wait: 2 * time.Second}, metav1.ConditionFalse, shared.SeverityInfo, shared.ReasonReconciling, RetryAfter, 3 * time.Second},
		{"400", respErr(400, ""), metav1.ConditionFalse, shared.SeverityError, shared.ReasonReconciliationFailedPermanently, RetryNever, 0},
		{"403", respErr(403, ""), metav1.ConditionFalse, shared.SeverityError, shared.ReasonReconciliationFailedPermanently, RetryAfter, sync},
		{"429 with Retry-After", respErr(429, "7"), metav1.ConditionFalse, shared.SeverityWarning, shared.ReasonReconciliationFailure, RetryAfter, 7 * time.Second},
		{"500", respErr(500, ""), metav1.ConditionFalse, shared.SeverityWarning, shared.ReasonReconciliationFailure, RetryBackoff, 0},
		{"409", respErr(409, ""), metav1.ConditionFalse, shared.SeverityWarning, shared.ReasonReconciliationFailure, RetryBackoff, 0},
		{"owner", errWaitingForOwner, metav1.ConditionFalse, shared.SeverityInfo, shared.ReasonWaitingForOwner, RetryAfter, ownerRecheck},
		{"owner missing", errOwnerNotFound, metav1.ConditionFalse, shared.SeverityInfo, shared.ReasonWaitingForOwner, RetryAfter, ownerRecheck},
		{"owner cycle", fmt.Errorf("%w: x", errOwnerCycle), metav1.ConditionFalse, shared.SeverityError, shared.ReasonReconciliationFailedPermanently, RetryNever, 0},
		{"configmap", errConfigMap, metav1.ConditionFalse, shared.SeverityWarning, shared.ReasonConfigMapNotFound, RetryBackoff, 0},
		{"invalid", errInvalidSpec, metav1.ConditionFalse, shared.SeverityError, shared.ReasonReconciliationFailedPermanently, RetryNever, 0},
		{"subscription", errSubscription, metav1.ConditionFalse, shared.SeverityError, shared.ReasonSubscriptionMismatch, RetryNever, 0},
		{"credential", errCredential, metav1.ConditionFalse, shared.SeverityWarning, shared.ReasonSecretNotFound, RetryBackoff, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := classify(tc.err, sync, poll)
			if o.Status != tc.status || o.Severity != tc.severity || o.Reason != tc.reason || o.Retry != tc.retry || o.Requeue != tc.requeue {
				t.Errorf("classify(%v) = %+v, want %s %s %s retry %d requeue %s", tc.err, o, tc.status, tc.severity, tc.reason, tc.retry, tc.requeue)
			}
		})
	}
}

// The outcome reaches controller-runtime as its rate limiter expects: errors returned (terminal
// ones marked), a known wait as RequeueAfter with no error.
func TestOutcomeResult(t *testing.T) {
	boom := errors.New("boom")
	res, err := Outcome{Retry: RetryNever}.result(boom)
	if !errors.Is(err, reconcile.TerminalError(nil)) || !errors.Is(err, boom) || res.RequeueAfter != 0 {
		t.Errorf("terminal: %v %v", res, err)
	}
	res, err = Outcome{Retry: RetryBackoff}.result(boom)
	if !errors.Is(err, boom) || errors.Is(err, reconcile.TerminalError(nil)) || res.RequeueAfter != 0 {
		t.Errorf("backoff: %v %v", res, err)
	}
	res, err = Outcome{Retry: RetryAfter, Requeue: 7 * time.Second}.result(boom)
	if err != nil || res.RequeueAfter != 7*time.Second {
		t.Errorf("retry after: %v %v", res, err)
	}
}
