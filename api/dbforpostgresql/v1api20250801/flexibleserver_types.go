package v1api20250801

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// FlexibleServer is an Azure Database for PostgreSQL flexible server
// (Microsoft.DBforPostgreSQL/flexibleServers, API 2025-08-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || self.metadata.name.matches('^[a-z0-9][-a-z0-9]{1,61}[a-z0-9]$')",message="metadata.name is the Azure name when spec.azureName is empty: server names are 3 to 63 lowercase letters, digits and hyphens, starting and ending with a letter or digit"
// +kubebuilder:resource:categories={azure,dbforpostgresql}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type FlexibleServer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FlexibleServerSpec   `json:"spec,omitempty"`
	Status FlexibleServerStatus `json:"status,omitempty"`
}

// FlexibleServerSpec is the desired server. Every other field of Azure Service Operator's
// schema (authConfig, backup, highAvailability, network, maintenanceWindow, ...) is accepted
// and sent to ARM as is.
// +kubebuilder:pruning:PreserveUnknownFields
type FlexibleServerSpec struct {
	// azureName is the server's name in Azure, the first label of its host name
	// NAME.postgres.database.azure.com; empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	AzureName string `json:"azureName,omitempty"`
	// location is the Azure region.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Location string `json:"location"`
	// owner is the ResourceGroup the server lives in.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// administratorLogin is the administrator's role name; set at creation only.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	AdministratorLogin string `json:"administratorLogin,omitempty"`
	// administratorLoginPassword is the administrator's password, read from a Secret in the
	// server's namespace; a change of the Secret changes the password in Azure.
	// +optional
	AdministratorLoginPassword *shared.SecretReference `json:"administratorLoginPassword,omitempty"`
	// version is PostgreSQL's major version.
	// +optional
	// +kubebuilder:validation:Enum="11";"12";"13";"14";"15";"16";"17";"18"
	Version string `json:"version,omitempty"`
	// sku is the compute tier and size.
	// +optional
	Sku *FlexibleServerSku `json:"sku,omitempty"`
	// storage is the server's storage (storageSizeGB, autoGrow, tier, ...).
	// +optional
	Storage *shared.JSON `json:"storage,omitempty"`
	// tags are the server's tags.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 512)",message="tag names are 1 to 512 characters (Azure's limit)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="tag values are at most 256 characters (Azure's limit)"
	Tags map[string]string `json:"tags,omitempty"`
	// operatorSpec says what to export once the server is ready.
	// +optional
	OperatorSpec *FlexibleServerOperatorSpec `json:"operatorSpec,omitempty"`
}

// FlexibleServerSku is a server's compute.
type FlexibleServerSku struct {
	// name is e.g. Standard_D4s_v3 or Standard_B1ms.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// tier is Burstable, GeneralPurpose or MemoryOptimized.
	// +required
	// +kubebuilder:validation:Enum=Burstable;GeneralPurpose;MemoryOptimized
	Tier string `json:"tier"`
}

// FlexibleServerOperatorSpec exports the server's host name.
type FlexibleServerOperatorSpec struct {
	shared.OperatorSpecExpressions `json:",inline"`
	// configMaps exports values to ConfigMaps.
	// +optional
	ConfigMaps *FlexibleServerOperatorConfigMaps `json:"configMaps,omitempty"`
	// secrets exports values to Secrets (Azure Service Operator's older versions export the
	// host name there).
	// +optional
	Secrets *FlexibleServerOperatorSecrets `json:"secrets,omitempty"`
}

// FlexibleServerOperatorSecrets names a Secret key per value.
// Other entries (of Azure Service Operator's schema, which Cerulean does not produce) are kept,
// not exported, and named in Ready's message and a Warning Event.
// +kubebuilder:pruning:PreserveUnknownFields
type FlexibleServerOperatorSecrets struct {
	// fullyQualifiedDomainName is the server's host name.
	// +optional
	FullyQualifiedDomainName *shared.SecretDestination `json:"fullyQualifiedDomainName,omitempty"`
}

// FlexibleServerOperatorConfigMaps names a ConfigMap key per value.
// Other entries (of Azure Service Operator's schema, which Cerulean does not produce) are kept,
// not exported, and named in Ready's message and a Warning Event.
// +kubebuilder:pruning:PreserveUnknownFields
type FlexibleServerOperatorConfigMaps struct {
	// fullyQualifiedDomainName is the server's host name.
	// +optional
	FullyQualifiedDomainName *shared.ConfigMapDestination `json:"fullyQualifiedDomainName,omitempty"`
}

// FlexibleServerStatus mirrors what ARM holds (never the password: ARM does not return it).
// +kubebuilder:pruning:PreserveUnknownFields
type FlexibleServerStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
	// id is the ARM id.
	// +optional
	ID string `json:"id,omitempty"`
	// name is the Azure name.
	// +optional
	Name string `json:"name,omitempty"`
	// fullyQualifiedDomainName is the server's host name.
	// +optional
	FullyQualifiedDomainName string `json:"fullyQualifiedDomainName,omitempty"`
	// state is Ready, Starting, Stopped, Updating, ...
	// +optional
	State string `json:"state,omitempty"`
	// version is PostgreSQL's major version.
	// +optional
	Version string `json:"version,omitempty"`
}

// FlexibleServerList is a list of FlexibleServer.
// +kubebuilder:object:root=true
type FlexibleServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FlexibleServer `json:"items"`
}

// ServerChildStatus mirrors what ARM holds of a server's child resource.
// +kubebuilder:pruning:PreserveUnknownFields
type ServerChildStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
	// id is the ARM id.
	// +optional
	ID string `json:"id,omitempty"`
	// name is the Azure name.
	// +optional
	Name string `json:"name,omitempty"`
}

// ChildOperatorSpec holds the export expressions of a kind with no named exports.
type ChildOperatorSpec struct {
	shared.OperatorSpecExpressions `json:",inline"`
}

func init() { objects = append(objects, &FlexibleServer{}, &FlexibleServerList{}) }
