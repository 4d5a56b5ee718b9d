package v20250601

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// StorageAccountsBlobService is the blob service of a storage account (Microsoft.Storage/storageAccounts/blobServices, API 2025-06-01); its Azure name is always default.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,storage}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type StorageAccountsBlobService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StorageAccountsBlobServiceSpec `json:"spec,omitempty"`
	Status ChildStatus                    `json:"status,omitempty"`
}

// StorageAccountsBlobServiceSpec is the desired state. The rest of Azure Service Operator's schema (cors, deleteRetentionPolicy, containerDeleteRetentionPolicy, isVersioningEnabled, changeFeed, restorePolicy, ...) is
// accepted and sent to ARM as is.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountsBlobServiceSpec struct {
	// owner is the StorageAccount this belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// StorageAccountsBlobServiceList is a list of StorageAccountsBlobService.
// +kubebuilder:object:root=true
type StorageAccountsBlobServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageAccountsBlobService `json:"items"`
}

// StorageAccountsBlobServicesContainer is a blob container (Microsoft.Storage/storageAccounts/blobServices/containers, API 2025-06-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || (size(self.metadata.name) >= 3 && size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9](-?[a-z0-9])*$'))",message="metadata.name is the Azure name when spec.azureName is empty: container names are 3 to 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit, without consecutive hyphens"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,storage}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type StorageAccountsBlobServicesContainer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StorageAccountsBlobServicesContainerSpec `json:"spec,omitempty"`
	Status ChildStatus                              `json:"status,omitempty"`
}

// StorageAccountsBlobServicesContainerSpec is the desired state. The rest of Azure Service Operator's schema (metadata, defaultEncryptionScope, immutableStorageWithVersioning, ...) is
// accepted and sent to ARM as is.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountsBlobServicesContainerSpec struct {
	// azureName is the name in Azure (3 to 63 lowercase letters, digits and single hyphens,
	// starting and ending with a letter or digit); empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9](-?[a-z0-9])*$`
	AzureName string `json:"azureName,omitempty"`
	// owner is the StorageAccountsBlobService this belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// publicAccess is None, Blob or Container: anonymous read access.
	// +optional
	// +kubebuilder:validation:Enum=Blob;Container;None
	PublicAccess string `json:"publicAccess,omitempty"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// StorageAccountsBlobServicesContainerList is a list of StorageAccountsBlobServicesContainer.
// +kubebuilder:object:root=true
type StorageAccountsBlobServicesContainerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageAccountsBlobServicesContainer `json:"items"`
}

// StorageAccountsQueueService is the queue service of a storage account (Microsoft.Storage/storageAccounts/queueServices, API 2025-06-01); its Azure name is always default.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,storage}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type StorageAccountsQueueService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StorageAccountsQueueServiceSpec `json:"spec,omitempty"`
	Status ChildStatus                     `json:"status,omitempty"`
}

// StorageAccountsQueueServiceSpec is the desired state. The rest of Azure Service Operator's schema (cors) is
// accepted and sent to ARM as is.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountsQueueServiceSpec struct {
	// owner is the StorageAccount this belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// StorageAccountsQueueServiceList is a list of StorageAccountsQueueService.
// +kubebuilder:object:root=true
type StorageAccountsQueueServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageAccountsQueueService `json:"items"`
}

// StorageAccountsQueueServicesQueue is a queue (Microsoft.Storage/storageAccounts/queueServices/queues, API 2025-06-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || (size(self.metadata.name) >= 3 && size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z0-9](-?[a-z0-9])*$'))",message="metadata.name is the Azure name when spec.azureName is empty: queue names are 3 to 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit, without consecutive hyphens"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,storage}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type StorageAccountsQueueServicesQueue struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StorageAccountsQueueServicesQueueSpec `json:"spec,omitempty"`
	Status ChildStatus                           `json:"status,omitempty"`
}

// StorageAccountsQueueServicesQueueSpec is the desired state. The rest of Azure Service Operator's schema (metadata) is
// accepted and sent to ARM as is.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountsQueueServicesQueueSpec struct {
	// azureName is the name in Azure (3 to 63 lowercase letters, digits and single hyphens,
	// starting and ending with a letter or digit); empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9](-?[a-z0-9])*$`
	AzureName string `json:"azureName,omitempty"`
	// owner is the StorageAccountsQueueService this belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// StorageAccountsQueueServicesQueueList is a list of StorageAccountsQueueServicesQueue.
// +kubebuilder:object:root=true
type StorageAccountsQueueServicesQueueList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageAccountsQueueServicesQueue `json:"items"`
}

// StorageAccountsTableService is the table service of a storage account (Microsoft.Storage/storageAccounts/tableServices, API 2025-06-01); its Azure name is always default.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,storage}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type StorageAccountsTableService struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StorageAccountsTableServiceSpec `json:"spec,omitempty"`
	Status ChildStatus                     `json:"status,omitempty"`
}

// StorageAccountsTableServiceSpec is the desired state. The rest of Azure Service Operator's schema (cors) is
// accepted and sent to ARM as is.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountsTableServiceSpec struct {
	// owner is the StorageAccount this belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// StorageAccountsTableServiceList is a list of StorageAccountsTableService.
// +kubebuilder:object:root=true
type StorageAccountsTableServiceList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageAccountsTableService `json:"items"`
}

// StorageAccountsTableServicesTable is a table (Microsoft.Storage/storageAccounts/tableServices/tables, API 2025-06-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || self.metadata.name.matches('^[a-zA-Z][a-zA-Z0-9]{2,62}$')",message="metadata.name is the Azure name when spec.azureName is empty: table names are 3 to 63 letters and digits, starting with a letter"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,storage}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type StorageAccountsTableServicesTable struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StorageAccountsTableServicesTableSpec `json:"spec,omitempty"`
	Status ChildStatus                           `json:"status,omitempty"`
}

// StorageAccountsTableServicesTableSpec is the desired state. The rest of Azure Service Operator's schema (signedIdentifiers) is
// accepted and sent to ARM as is.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountsTableServicesTableSpec struct {
	// azureName is the name in Azure; empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9]{2,62}$`
	AzureName string `json:"azureName,omitempty"`
	// owner is the StorageAccountsTableService this belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// StorageAccountsTableServicesTableList is a list of StorageAccountsTableServicesTable.
// +kubebuilder:object:root=true
type StorageAccountsTableServicesTableList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageAccountsTableServicesTable `json:"items"`
}

// ChildStatus mirrors what ARM holds of an account's service, container, queue or table.
// +kubebuilder:pruning:PreserveUnknownFields
type ChildStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
	// id is the ARM id.
	// +optional
	ID string `json:"id,omitempty"`
	// name is the Azure name.
	// +optional
	Name string `json:"name,omitempty"`
	// type is the ARM type.
	// +optional
	Type string `json:"type,omitempty"`
}

func init() {
	objects = append(objects,
		&StorageAccountsBlobService{}, &StorageAccountsBlobServiceList{},
		&StorageAccountsBlobServicesContainer{}, &StorageAccountsBlobServicesContainerList{},
		&StorageAccountsQueueService{}, &StorageAccountsQueueServiceList{},
		&StorageAccountsQueueServicesQueue{}, &StorageAccountsQueueServicesQueueList{},
		&StorageAccountsTableService{}, &StorageAccountsTableServiceList{},
		&StorageAccountsTableServicesTable{}, &StorageAccountsTableServicesTableList{})
}
