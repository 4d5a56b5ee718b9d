package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// AzureResource is any ARM resource, for types no typed kind covers (as Terraform's azapi
// resource is): its ARM type and api-version, its owner, and the ARM body's top-level members.
// The manager reconciles it like the typed kinds (conditions, reconcile policies, finalizer,
// credentials, namespace grants, writes only when needed), but only for the types its
// --generic-resource-types flag allows; any other type is refused before any ARM call.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories={azure,cerulean}
// +kubebuilder:printcolumn:name="Type",type="string",JSONPath=".spec.type"
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message",priority=1
type AzureResource struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the desired resource.
	// +required
	Spec AzureResourceSpec `json:"spec"`
	// status is the resource as ARM returns it, and the Ready condition.
	// +optional
	Status AzureResourceStatus `json:"status,omitempty"`
}

// AzureResourceSpec addresses the resource (owner, type, name) and holds its ARM body: every
// member other than owner, type, apiVersion, azureName and operatorSpec is sent to ARM as it
// is (properties, sku, kind, identity, and any other top-level member ARM defines).
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:XValidation:rule="self.type == oldSelf.type",message="type is immutable: create another object for another type"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.azureName) || (has(self.azureName) && self.azureName == oldSelf.azureName)",message="azureName is immutable"
type AzureResourceSpec struct {
	// owner is where the resource hangs in ARM: a Kubernetes object in the same namespace by
	// {name, group, kind} (a ResourceGroup, another AzureResource, any kind the manager
	// reconciles), or an ARM id (armId). A top-level type (Namespace/type) goes under its
	// owner's /providers/; a child type (Namespace/parent/child) goes under its owner, which
	// must be a resource of the parent type.
	// +required
	Owner shared.ArbitraryOwnerReference `json:"owner"`
	// type is the ARM resource type, e.g. Microsoft.ServiceBus/namespaces or, for a child,
	// Microsoft.ServiceBus/namespaces/queues. The manager reconciles only types its cluster
	// admin allowed (--generic-resource-types).
	// +required
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9]*(\.[A-Za-z0-9]+)+(/[A-Za-z][-_A-Za-z0-9]*){1,8}$`
	Type string `json:"type"`
	// apiVersion is the ARM api-version of every call, e.g. 2021-11-01 or 2023-01-01-preview.
	// +required
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]{4}-[0-9]{2}-[0-9]{2}(-[A-Za-z]+)?$`
	APIVersion string `json:"apiVersion"`
	// azureName is the resource's name in Azure; empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=260
	// +kubebuilder:validation:Pattern=`^[^/?#]+$`
	AzureName string `json:"azureName,omitempty"`
	// location is the Azure region of a top-level resource, e.g. westus2.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Location string `json:"location,omitempty"`
	// tags are the resource's tags.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 512)",message="tag names are 1 to 512 characters (Azure's limit)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="tag values are at most 256 characters (Azure's limit)"
	Tags map[string]string `json:"tags,omitempty"`
	// properties is the ARM body's properties object, sent as it is.
	// +optional
	Properties *shared.JSON `json:"properties,omitempty"`
	// sku is the ARM body's sku object.
	// +optional
	Sku *shared.JSON `json:"sku,omitempty"`
	// kind is the ARM body's kind (a string, e.g. GlobalDocumentDB).
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Kind string `json:"kind,omitempty"`
	// identity is the ARM body's identity object.
	// +optional
	Identity *shared.JSON `json:"identity,omitempty"`
	// plan is the ARM body's plan object.
	// +optional
	Plan *shared.JSON `json:"plan,omitempty"`
	// extendedLocation is the ARM body's extendedLocation object.
	// +optional
	ExtendedLocation *shared.JSON `json:"extendedLocation,omitempty"`
	// zones are the ARM body's availability zones.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=16
	Zones []string `json:"zones,omitempty"`
	// managedBy is the ARM id of the resource that manages this one.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ManagedBy string `json:"managedBy,omitempty"`
	// operatorSpec says what to export once the resource is ready.
	// +optional
	OperatorSpec *AzureResourceOperatorSpec `json:"operatorSpec,omitempty"`
}

// AzureResourceOperatorSpec exports values of the resource: CEL expressions over the resource
// as ARM returns it (self.status), and for Secrets over the answer of one POST action.
type AzureResourceOperatorSpec struct {
	// action is a read-only POST action of the resource whose JSON answer secretExpressions see
	// as `secret`, e.g. listKeys, listConnectionStrings, or a path below the resource ending in
	// one (authorizationRules/RootManageSharedAccessKey/listKeys). Only list* actions (Azure's
	// read-only actions) are allowed, so an export never changes the resource; it is called with
	// spec.apiVersion, only when a secretExpression exists, once per pass.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9][-_.A-Za-z0-9]*/)*list[A-Za-z0-9]*$`
	Action string `json:"action,omitempty"`
	// configMapExpressions export CEL results to ConfigMaps.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	ConfigMapExpressions []shared.DestinationExpression `json:"configMapExpressions,omitempty"`
	// secretExpressions export CEL results to Secrets (or the Key Vault destination); they
	// also see `secret`, the action's answer (an empty map without an action).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	SecretExpressions []shared.DestinationExpression `json:"secretExpressions,omitempty"`
}

// AzureResourceStatus is the resource as ARM returned it (id, name, type, location,
// properties, ...) and the Ready condition.
// +kubebuilder:pruning:PreserveUnknownFields
type AzureResourceStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
	// id is the ARM id.
	// +optional
	ID string `json:"id,omitempty"`
	// name is the Azure name.
	// +optional
	Name string `json:"name,omitempty"`
	// type is the ARM type, as ARM spells it.
	// +optional
	Type string `json:"type,omitempty"`
}

// AzureResourceList is a list of AzureResource.
// +kubebuilder:object:root=true
type AzureResourceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []AzureResource `json:"items"`
}
