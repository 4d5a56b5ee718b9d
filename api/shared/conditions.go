package shared

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// ConditionTypeReady is the one condition every resource carries, as in Azure Service Operator.
const ConditionTypeReady = "Ready"

// Severity says how bad a False Ready condition is.
type Severity string

// Severities, as Azure Service Operator reports them.
const (
	// SeverityInfo: progressing normally (creating, waiting for an owner).
	SeverityInfo Severity = "Info"
	// SeverityWarning: failing for now; retried with backoff.
	SeverityWarning Severity = "Warning"
	// SeverityError: the manager gives up until the spec changes (403s are retried each sync
	// period, since a role granted later heals them).
	SeverityError Severity = "Error"
	// SeverityNone: the condition is True.
	SeverityNone Severity = ""
)

// Reasons of the Ready condition, Azure Service Operator's.
const (
	ReasonSucceeded                          = "Succeeded"
	ReasonReconciling                        = "Reconciling"
	ReasonDeleting                           = "Deleting"
	ReasonWaitingForOwner                    = "WaitingForOwner"
	ReasonReferenceNotFound                  = "ReferenceNotFound"
	ReasonSecretNotFound                     = "SecretNotFound"
	ReasonConfigMapNotFound                  = "ConfigMapNotFound"
	ReasonAzureResourceNotFound              = "AzureResourceNotFound"
	ReasonSubscriptionMismatch               = "SubscriptionMismatch"
	ReasonReconciliationFailedPermanently    = "ReconciliationFailedPermanently"
	ReasonReconciliationBlocked              = "ReconciliationBlocked"
	ReasonReconciliationPostponed            = "ReconciliationPostponed"
	ReasonReconciliationFailure              = "ReconciliationFailure"
	ReasonFailedWritingAdditionalKubeObjects = "FailedWritingAdditionalKubernetesObjects"
	ReasonFailed                             = "Failed"
)

// Condition is Azure Service Operator's condition: metav1.Condition's fields plus severity.
type Condition struct {
	// type of the condition; Cerulean sets only Ready.
	// +required
	// +kubebuilder:validation:MaxLength=316
	Type string `json:"type"`
	// status is True, False or Unknown.
	// +required
	// +kubebuilder:validation:Enum=True;False;Unknown
	Status metav1.ConditionStatus `json:"status"`
	// severity is Info, Warning or Error for a False condition; empty when True.
	// +optional
	Severity Severity `json:"severity,omitempty"`
	// lastTransitionTime is when status, severity or reason last changed.
	// +required
	LastTransitionTime metav1.Time `json:"lastTransitionTime"`
	// observedGeneration is the generation the condition was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// reason is a CamelCase word (see the Reason constants).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// message is human readable.
	// +optional
	// +kubebuilder:validation:MaxLength=32768
	Message string `json:"message,omitempty"`
}
