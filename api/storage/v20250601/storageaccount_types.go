package v20250601

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// StorageAccount is a storage account (Microsoft.Storage/storageAccounts, API 2025-06-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || self.metadata.name.matches('^[a-z0-9]{3,24}$')",message="metadata.name is the Azure name when spec.azureName is empty: names are 3 to 24 lowercase letters and digits"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,storage}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type StorageAccount struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StorageAccountSpec   `json:"spec,omitempty"`
	Status StorageAccountStatus `json:"status,omitempty"`
}

// StorageAccountSpec is the desired account.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountSpec struct {
	// azureName is the account's name in Azure (globally unique); empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:Pattern=`^[a-z0-9]+$`
	AzureName string `json:"azureName,omitempty"`
	// location is the Azure region.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Location string `json:"location"`
	// owner is the ResourceGroup the account lives in.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// kind is StorageV2, BlobStorage, BlockBlobStorage, FileStorage or Storage.
	// +required
	// +kubebuilder:validation:Enum=BlobStorage;BlockBlobStorage;FileStorage;Storage;StorageV2
	Kind string `json:"kind"`
	// sku is the account's replication tier.
	// +required
	Sku Sku `json:"sku"`
	// accessTier is Hot, Cool, Cold or Premium.
	// +optional
	// +kubebuilder:validation:Enum=Cold;Cool;Hot;Premium
	AccessTier string `json:"accessTier,omitempty"`
	// tags are the account's tags.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 128)",message="tag names are 1 to 128 characters (Azure's limit)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="tag values are at most 256 characters (Azure's limit)"
	Tags map[string]string `json:"tags,omitempty"`
	// operatorSpec says what to export once the account is ready.
	// +optional
	OperatorSpec *StorageAccountOperatorSpec `json:"operatorSpec,omitempty"`
}

// Sku is a storage SKU.
// +kubebuilder:pruning:PreserveUnknownFields
type Sku struct {
	// name is e.g. Standard_LRS.
	// +required
	// +kubebuilder:validation:Enum=Premium_LRS;Premium_ZRS;Standard_GRS;Standard_GZRS;Standard_LRS;Standard_RAGRS;Standard_RAGZRS;Standard_ZRS
	Name string `json:"name"`
}

// StorageAccountOperatorSpec exports the account's endpoints and keys.
type StorageAccountOperatorSpec struct {
	shared.OperatorSpecExpressions `json:",inline"`
	// configMaps exports endpoints to ConfigMaps.
	// +optional
	ConfigMaps *StorageAccountOperatorConfigMaps `json:"configMaps,omitempty"`
	// secrets exports keys and endpoints to Secrets.
	// +optional
	Secrets *StorageAccountOperatorSecrets `json:"secrets,omitempty"`
}

// StorageAccountOperatorConfigMaps names a ConfigMap key per endpoint.
// Other entries (of Azure Service Operator's schema, which Cerulean does not produce) are kept,
// not exported, and named in Ready's message and a Warning Event.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountOperatorConfigMaps struct {
	// blobEndpoint is the primary blob endpoint.
	// +optional
	BlobEndpoint *shared.ConfigMapDestination `json:"blobEndpoint,omitempty"`
	// dfsEndpoint is the primary Data Lake endpoint.
	// +optional
	DfsEndpoint *shared.ConfigMapDestination `json:"dfsEndpoint,omitempty"`
	// fileEndpoint is the primary file endpoint.
	// +optional
	FileEndpoint *shared.ConfigMapDestination `json:"fileEndpoint,omitempty"`
	// queueEndpoint is the primary queue endpoint.
	// +optional
	QueueEndpoint *shared.ConfigMapDestination `json:"queueEndpoint,omitempty"`
	// tableEndpoint is the primary table endpoint.
	// +optional
	TableEndpoint *shared.ConfigMapDestination `json:"tableEndpoint,omitempty"`
	// webEndpoint is the primary static-website endpoint.
	// +optional
	WebEndpoint *shared.ConfigMapDestination `json:"webEndpoint,omitempty"`
}

// StorageAccountOperatorSecrets names a Secret key per key and endpoint.
// Other entries (of Azure Service Operator's schema, which Cerulean does not produce) are kept,
// not exported, and named in Ready's message and a Warning Event.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountOperatorSecrets struct {
	// key1 is the first access key.
	// +optional
	Key1 *shared.SecretDestination `json:"key1,omitempty"`
	// key2 is the second access key.
	// +optional
	Key2 *shared.SecretDestination `json:"key2,omitempty"`
	// blobEndpoint is the primary blob endpoint.
	// +optional
	BlobEndpoint *shared.SecretDestination `json:"blobEndpoint,omitempty"`
	// dfsEndpoint is the primary Data Lake endpoint.
	// +optional
	DfsEndpoint *shared.SecretDestination `json:"dfsEndpoint,omitempty"`
	// fileEndpoint is the primary file endpoint.
	// +optional
	FileEndpoint *shared.SecretDestination `json:"fileEndpoint,omitempty"`
	// queueEndpoint is the primary queue endpoint.
	// +optional
	QueueEndpoint *shared.SecretDestination `json:"queueEndpoint,omitempty"`
	// tableEndpoint is the primary table endpoint.
	// +optional
	TableEndpoint *shared.SecretDestination `json:"tableEndpoint,omitempty"`
	// webEndpoint is the primary static-website endpoint.
	// +optional
	WebEndpoint *shared.SecretDestination `json:"webEndpoint,omitempty"`
}

// StorageAccountStatus mirrors what ARM holds.
// +kubebuilder:pruning:PreserveUnknownFields
type StorageAccountStatus struct {
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
	// kind as ARM holds it.
	// +optional
	Kind string `json:"kind,omitempty"`
	// accessTier as ARM holds it.
	// +optional
	AccessTier string `json:"accessTier,omitempty"`
	// provisioningState is ARM's provisioning state.
	// +optional
	ProvisioningState string `json:"provisioningState,omitempty"`
	// primaryEndpoints are the account's service URLs.
	// +optional
	PrimaryEndpoints *Endpoints `json:"primaryEndpoints,omitempty"`
	// tags are the account's tags.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// type is Microsoft.Storage/storageAccounts.
	// +optional
	Type string `json:"type,omitempty"`
}

// Endpoints are a storage account's service URLs.
// +kubebuilder:pruning:PreserveUnknownFields
type Endpoints struct {
	// blob endpoint.
	// +optional
	Blob string `json:"blob,omitempty"`
	// dfs endpoint.
	// +optional
	Dfs string `json:"dfs,omitempty"`
	// file endpoint.
	// +optional
	File string `json:"file,omitempty"`
	// queue endpoint.
	// +optional
	Queue string `json:"queue,omitempty"`
	// table endpoint.
	// +optional
	Table string `json:"table,omitempty"`
	// web endpoint.
	// +optional
	Web string `json:"web,omitempty"`
}

// StorageAccountList is a list of StorageAccount.
// +kubebuilder:object:root=true
type StorageAccountList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageAccount `json:"items"`
}

func init() { objects = append(objects, &StorageAccount{}, &StorageAccountList{}) }
