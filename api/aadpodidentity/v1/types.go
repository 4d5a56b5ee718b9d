package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func metav1AddToGroupVersion(s *runtime.Scheme) { metav1.AddToGroupVersion(s, GroupVersion) }

const (
	// PodLabel is the pod label matched against AzureIdentityBinding's spec.selector.
	PodLabel = "aadpodidbinding"
	// BehaviorAnnotation is upstream's annotation on an AzureIdentity; the value "namespaced"
	// restricted it to its own namespace. Cerulean matches namespaced by default; the annotation
	// is accepted and changes nothing.
	BehaviorAnnotation = "aadpodidentity.k8s.io/Behavior"
	// AllowedNamespacesAnnotation on an AzureIdentity lets its bindings match pods of other
	// namespaces: a comma-separated list of namespace names, or "*" for every namespace. Without
	// it a binding matches only pods of its own namespace.
	AllowedNamespacesAnnotation = "aadpodidentity.cerulean.dev/allowed-namespaces"

	// AssignedIDCreated is the status of an AzureAssignedIdentity whose identity is not yet on
	// the node's VM or VMSS.
	AssignedIDCreated = "Created"
	// AssignedIDAssigned is the status once the identity is on the node's VM or VMSS.
	AssignedIDAssigned = "Assigned"
	// AssignedIDUnassigned is the status once the identity has been removed from the node.
	AssignedIDUnassigned = "Unassigned"
)

// IdentityType is the kind of Azure identity an AzureIdentity names.
type IdentityType int

const (
	// UserAssignedMSI is a user-assigned managed identity (type 0).
	UserAssignedMSI IdentityType = 0
	// ServicePrincipal is a service principal with a client secret (type 1).
	ServicePrincipal IdentityType = 1
	// ServicePrincipalCertificate is a service principal with a certificate (type 2).
	ServicePrincipalCertificate IdentityType = 2
)

// AzureIdentitySpec describes the credential specifications of an identity on Azure.
type AzureIdentitySpec struct {
	// metadata is upstream's historical embedded object metadata; kept so that objects
	// carrying it apply unchanged. Ignored.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`
	// type is 0 for a user-assigned managed identity, 1 for a service principal with a secret,
	// 2 for a service principal with a certificate.
	// +optional
	Type IdentityType `json:"type"`
	// resourceID is the user-assigned managed identity's ARM resource id.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ResourceID string `json:"resourceID"`
	// clientID is the identity's client (application) id.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ClientID string `json:"clientID"`
	// clientPassword is the Secret of a service principal (key clientSecret, or certificate and
	// password).
	// +optional
	ClientPassword corev1.SecretReference `json:"clientPassword"`
	// tenantID is the service principal's tenant.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TenantID string `json:"tenantID"`
	// auxiliaryTenantIDs are the service principal's auxiliary tenants.
	// +optional
	// +nullable
	AuxiliaryTenantIDs []string `json:"auxiliaryTenantIDs"`
	// adResourceID is the service principal's optional AD resource.
	// +optional
	ADResourceID string `json:"adResourceID"`
	// adEndpoint is the service principal's optional AD endpoint.
	// +optional
	ADEndpoint string `json:"adEndpoint"`
	// replicas is upstream's unused replica count.
	// +optional
	// +nullable
	Replicas *int32 `json:"replicas"`
}

// AzureIdentityStatus contains the replica status of the resource.
type AzureIdentityStatus struct {
	// metadata is upstream's historical embedded object metadata. Ignored.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`
	// availableReplicas is upstream's unused replica count.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
}

// AzureIdentity is the specification of the identity data structure.
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved"
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="ClientID",type=string,JSONPath=`.spec.clientID`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AzureIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec AzureIdentitySpec `json:"spec"`
	// +optional
	Status AzureIdentityStatus `json:"status"`
}

// AzureIdentityList is a list of AzureIdentity.
// +kubebuilder:object:root=true
type AzureIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []AzureIdentity `json:"items"`
}

// AzureIdentityBindingSpec matches the pod with the Identity.
type AzureIdentityBindingSpec struct {
	// metadata is upstream's historical embedded object metadata. Ignored.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`
	// azureIdentity is the name of the AzureIdentity, in the binding's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AzureIdentity string `json:"azureIdentity"`
	// selector is matched against the pod label aadpodidbinding.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Selector string `json:"selector"`
	// weight is upstream's unused weight.
	// +optional
	Weight int `json:"weight"`
}

// AzureIdentityBindingStatus contains the status of an AzureIdentityBinding.
type AzureIdentityBindingStatus struct {
	// metadata is upstream's historical embedded object metadata. Ignored.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`
	// availableReplicas is upstream's unused replica count.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
}

// AzureIdentityBinding brings together the spec of matching pods and the identity which they can use.
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved"
// +kubebuilder:printcolumn:name="AzureIdentity",type=string,JSONPath=`.spec.azureIdentity`
// +kubebuilder:printcolumn:name="Selector",type=string,JSONPath=`.spec.selector`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type AzureIdentityBinding struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec AzureIdentityBindingSpec `json:"spec"`
	// +optional
	Status AzureIdentityBindingStatus `json:"status"`
}

// AzureIdentityBindingList is a list of AzureIdentityBinding.
// +kubebuilder:object:root=true
type AzureIdentityBindingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []AzureIdentityBinding `json:"items"`
}

// AzureAssignedIdentitySpec contains the relationship between an AzureIdentity and an
// AzureIdentityBinding for one pod. Written by the assignment controller only.
type AzureAssignedIdentitySpec struct {
	// metadata is upstream's historical embedded object metadata. Ignored.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`
	// azureIdentityRef is a copy of the AzureIdentity used.
	// +optional
	// +kubebuilder:validation:EmbeddedResource
	AzureIdentityRef *AzureIdentity `json:"azureIdentityRef"`
	// azureBindingRef is a copy of the AzureIdentityBinding used.
	// +optional
	// +kubebuilder:validation:EmbeddedResource
	AzureBindingRef *AzureIdentityBinding `json:"azureBindingRef"`
	// pod is the pod's name.
	// +optional
	Pod string `json:"pod"`
	// podNamespace is the pod's namespace.
	// +optional
	PodNamespace string `json:"podNamespace"`
	// nodename is the pod's node.
	// +optional
	NodeName string `json:"nodename"`
	// replicas is upstream's unused replica count.
	// +optional
	// +nullable
	Replicas *int32 `json:"replicas"`
}

// AzureAssignedIdentityStatus contains the assignment's state.
type AzureAssignedIdentityStatus struct {
	// metadata is upstream's historical embedded object metadata. Ignored.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`
	// status is Created, Assigned or Unassigned.
	// +optional
	Status string `json:"status"`
	// availableReplicas is upstream's unused replica count.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas"`
	// message says why the identity is not assigned yet (Cerulean's addition).
	// +optional
	Message string `json:"message,omitempty"`
}

// AzureAssignedIdentity contains the identity <-> pod mapping which is matched.
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved"
// +kubebuilder:printcolumn:name="Pod",type=string,JSONPath=`.spec.pod`
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.spec.nodename`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.status`
type AzureAssignedIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec AzureAssignedIdentitySpec `json:"spec"`
	// +optional
	Status AzureAssignedIdentityStatus `json:"status"`
}

// AzureAssignedIdentityList is a list of AzureAssignedIdentity.
// +kubebuilder:object:root=true
type AzureAssignedIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []AzureAssignedIdentity `json:"items"`
}

// AzurePodIdentityExceptionSpec matches pods with the labels given; their IMDS requests go to
// IMDS directly.
type AzurePodIdentityExceptionSpec struct {
	// metadata is upstream's historical embedded object metadata. Ignored.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`
	// podLabels: a pod carrying all of these labels is passed through.
	// +optional
	PodLabels map[string]string `json:"podLabels"`
}

// AzurePodIdentityExceptionStatus contains the status of an AzurePodIdentityException.
type AzurePodIdentityExceptionStatus struct {
	// metadata is upstream's historical embedded object metadata. Ignored.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:Schemaless
	// +kubebuilder:validation:Type=object
	Metadata *runtime.RawExtension `json:"metadata,omitempty"`
	// status is upstream's unused status string.
	// +optional
	Status string `json:"status"`
}

// AzurePodIdentityException contains the pod selectors for all pods that don't require the
// node agent to request tokens on their behalf.
// +kubebuilder:object:root=true
// +kubebuilder:metadata:annotations="api-approved.kubernetes.io=unapproved"
type AzurePodIdentityException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec AzurePodIdentityExceptionSpec `json:"spec"`
	// +optional
	Status AzurePodIdentityExceptionStatus `json:"status"`
}

// AzurePodIdentityExceptionList is a list of AzurePodIdentityException.
// +kubebuilder:object:root=true
type AzurePodIdentityExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata"`
	Items           []AzurePodIdentityException `json:"items"`
}
