package armresource

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// Outcome is what a pass found: the Ready condition to show and how to come back.
type Outcome struct {
	Status   metav1.ConditionStatus
	Severity shared.Severity
	Reason   string
	Message  string
	// Retry says how the next pass comes: after Requeue, by the workqueue's backoff, or only
	// when the object changes.
	Retry Retry
	// Requeue is when to look again, for RetryAfter.
	Requeue time.Duration
}

// Retry is how a pass's outcome is retried.
type Retry int

const (
	// RetryAfter looks again after Outcome.Requeue: the sync period, a running operation's poll,
	// ARM's Retry-After.
	RetryAfter Retry = iota
	// RetryBackoff returns the error to controller-runtime: its rate limiter backs off.
	RetryBackoff
	// RetryNever is a terminal error: only a change of the object runs it again.
	RetryNever
)

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
