package v1api20200601

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// ResourceGroup is an Azure resource group (Microsoft.Resources/resourceGroups, API 2020-06-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || size(self.metadata.name) <= 90",message="a resource group's name (metadata.name when spec.azureName is empty) is at most 90 characters"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,resources}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type ResourceGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ResourceGroupSpec   `json:"spec,omitempty"`
	Status ResourceGroupStatus `json:"status,omitempty"`
}

// ResourceGroupSpec is the desired resource group. Fields of Azure Service Operator's schema
// that Cerulean does not name are kept and sent to ARM.
// +kubebuilder:pruning:PreserveUnknownFields
type ResourceGroupSpec struct {
	// azureName is the group's name in Azure; empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=90
	// +kubebuilder:validation:Pattern=`^[-\w\._\(\)]*[-\w_\(\)]$`
	AzureName string `json:"azureName,omitempty"`
	// location is the Azure region, e.g. westus2.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Location string `json:"location"`
	// managedBy is the ARM id of the resource that manages this group.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ManagedBy string `json:"managedBy,omitempty"`
	// tags are the group's tags.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 512)",message="tag names are 1 to 512 characters (Azure's limit)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="tag values are at most 256 characters (Azure's limit)"
	Tags map[string]string `json:"tags,omitempty"`
	// operatorSpec says what to export once the group is ready.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// ResourceGroupStatus mirrors what ARM holds.
// +kubebuilder:pruning:PreserveUnknownFields
type ResourceGroupStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
	// id is the ARM id.
	// +optional
	ID string `json:"id,omitempty"`
	// name is the Azure name.
	// +optional
	Name string `json:"name,omitempty"`
	// location is the region.
	// +optional
	Location string `json:"location,omitempty"`
	// managedBy is the managing resource's id.
	// +optional
	ManagedBy string `json:"managedBy,omitempty"`
	// properties holds the provisioning state.
	// +optional
	Properties *ResourceGroupStatusProperties `json:"properties,omitempty"`
	// tags are the group's tags.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// type is Microsoft.Resources/resourceGroups.
	// +optional
	Type string `json:"type,omitempty"`
}

// ResourceGroupStatusProperties are the group's ARM properties.
// +kubebuilder:pruning:PreserveUnknownFields
type ResourceGroupStatusProperties struct {
	// provisioningState is ARM's provisioning state.
	// +optional
	ProvisioningState string `json:"provisioningState,omitempty"`
}

// ResourceGroupList is a list of ResourceGroup.
// +kubebuilder:object:root=true
type ResourceGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ResourceGroup `json:"items"`
}

func init() { objects = append(objects, &ResourceGroup{}, &ResourceGroupList{}) }
