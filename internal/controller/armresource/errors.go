package armresource

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/cerulean/cerulean/api/shared"
	"github.com/cerulean/cerulean/internal/controller/credentials"
)

// Errors the phases return, mapped to reasons by classify.
var (
	errInvalidSpec     = errors.New("invalid spec")
	errWaitingForOwner = errors.New("owner not ready")
	errOwnerNotFound   = errors.New("owner not found")
	errOwnerCycle      = errors.New("owner cycle")
	errConfigMap       = errors.New("configmap value missing")
	errReference       = errors.New("reference not resolved")
	errSubscription    = errors.New("subscription mismatch")
	errExport          = errors.New("export failed")
	errCredential      = errors.New("credential unavailable")
	errSecret          = errors.New("secret input unavailable")
	errNotInAzure      = errors.New("azure resource not found")
)

// ownerRecheck bounds a child's wait for its owner should the owner's event be missed.
const ownerRecheck = time.Minute

// progressError is an operation still running: not a failure. wait is ARM's Retry-After.
type progressError struct {
	msg  string
	wait time.Duration
}

func (e *progressError) Error() string { return e.msg }

// pollAfter is when a running operation is polled again: when ARM's Retry-After asks, as the
// SDK's pollers and Azure Service Operator do, but never later than PollInterval.
func (r *Reconciler) pollAfter(advertised time.Duration) time.Duration {
	if advertised > 0 && advertised < r.opts.PollInterval {
		return advertised
	}
	return r.opts.PollInterval
}

// tokenFailure marks an error of getting the credential's token (Entra refused the secret,
// certificate or federated exchange) as the credential's, naming its source: it is fixed in
// that secret or in Azure, not in the resource's spec.
func tokenFailure(cred *credentials.Credential, err error) error {
	var authErr *azidentity.AuthenticationFailedError
	if cred != nil && errors.As(err, &authErr) && !errors.Is(err, errCredential) {
		return fmt.Errorf("%w: get a token for the %s credential (client %s): %w", errCredential, cred.Source, cred.ClientID, err)
	}
	return err
}

// classify maps a pass's result to the Ready condition and its retry, as Azure Service
// Operator does: invalid input, owner cycles and ARM 400s are terminal (severity Error, no
// retry until the object changes); 401/403 are Error but retried each sync period (a role
// granted later heals them); a missing or unready owner waits for its watch; ARM's Retry-After
// is honoured; everything else is retried by the workqueue's backoff. pollAfter turns a running operation's advertised wait into the next poll.
func classify(err error, sync time.Duration, pollAfter func(time.Duration) time.Duration) Outcome {
	if err == nil {
		return Outcome{Status: metav1.ConditionTrue, Severity: shared.SeverityNone, Reason: shared.ReasonSucceeded, Requeue: sync}
	}
	var inProgress *progressError
	if errors.As(err, &inProgress) {
		return Outcome{Status: metav1.ConditionFalse, Severity: shared.SeverityInfo, Reason: shared.ReasonReconciling, Message: inProgress.msg, Requeue: pollAfter(inProgress.wait)}
	}
	o := Outcome{Status: metav1.ConditionFalse, Message: err.Error(), Retry: RetryBackoff}
	switch code := statusCode(err); {
	case errors.Is(err, errOwnerCycle):
		o.Severity, o.Reason, o.Retry = shared.SeverityError, shared.ReasonReconciliationFailedPermanently, RetryNever
	case errors.Is(err, errWaitingForOwner), errors.Is(err, errOwnerNotFound):
		// The owner's watch wakes the child when the owner appears or gets Ready (setup.go);
		// backing off instead would rerun thousands of waiting children many times each.
		o.Severity, o.Reason, o.Retry, o.Requeue = shared.SeverityInfo, shared.ReasonWaitingForOwner, RetryAfter, min(sync, ownerRecheck)
	case errors.Is(err, errConfigMap):
		o.Severity, o.Reason = shared.SeverityWarning, shared.ReasonConfigMapNotFound
	case errors.Is(err, errReference):
		o.Severity, o.Reason = shared.SeverityWarning, shared.ReasonReferenceNotFound
	case errors.Is(err, errNotGranted):
		o.Severity, o.Reason = shared.SeverityError, ReasonNotGranted // backoff: a grant added later heals it
	case errors.Is(err, errTypeNotAllowed):
		o.Severity, o.Reason, o.Retry = shared.SeverityError, ReasonTypeNotAllowed, RetryNever
	case errors.Is(err, errSubscription):
		o.Severity, o.Reason, o.Retry = shared.SeverityError, shared.ReasonSubscriptionMismatch, RetryNever
	case errors.Is(err, errCredential), errors.Is(err, errSecret):
		o.Severity, o.Reason = shared.SeverityWarning, shared.ReasonSecretNotFound
	case errors.Is(err, errInvalidSpec):
		o.Severity, o.Reason, o.Retry = shared.SeverityError, shared.ReasonReconciliationFailedPermanently, RetryNever
	case errors.Is(err, errExport):
		o.Severity, o.Reason = shared.SeverityWarning, shared.ReasonFailedWritingAdditionalKubeObjects
	case code == http.StatusBadRequest:
		o.Severity, o.Reason, o.Retry = shared.SeverityError, shared.ReasonReconciliationFailedPermanently, RetryNever
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		o.Severity, o.Reason, o.Retry, o.Requeue = shared.SeverityError, shared.ReasonReconciliationFailedPermanently, RetryAfter, sync
	default: // 404 of a parent, 409, 429, 5xx, failed operations, transport errors
		o.Severity, o.Reason = shared.SeverityWarning, shared.ReasonReconciliationFailure
		if ra := retryAfter(err); ra > 0 {
			o.Retry, o.Requeue = RetryAfter, ra
		}
	}
	return o
}

// result is what controller-runtime is told: errors go back to it (terminal ones marked so),
// and only a known wait becomes a RequeueAfter.
func (o Outcome) result(err error) (ctrl.Result, error) {
	switch o.Retry {
	case RetryNever:
		return ctrl.Result{}, reconcile.TerminalError(err)
	case RetryBackoff:
		return ctrl.Result{}, err
	default:
		return ctrl.Result{RequeueAfter: o.Requeue}, nil
	}
}
