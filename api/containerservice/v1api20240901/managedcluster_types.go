package v1api20240901

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// ManagedCluster is an AKS cluster (Microsoft.ContainerService/managedClusters, API
// 2024-09-01). Cerulean acts on the OIDC issuer and workload identity settings; every other
// field of Azure Service Operator's schema is kept and passed to ARM.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || self.metadata.name.matches('^[a-zA-Z0-9]$|^[a-zA-Z0-9][-_a-zA-Z0-9]{0,61}[a-zA-Z0-9]$')",message="metadata.name is the Azure name when spec.azureName is empty: names are 1 to 63 letters, digits, hyphens and underscores, starting and ending with a letter or digit"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,containerservice}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type ManagedCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ManagedClusterSpec   `json:"spec,omitempty"`
	Status ManagedClusterStatus `json:"status,omitempty"`
}

// ManagedClusterSpec is the desired cluster (the subset Cerulean acts on).
// +kubebuilder:pruning:PreserveUnknownFields
type ManagedClusterSpec struct {
	// azureName is the cluster's name in Azure; empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]$|^[a-zA-Z0-9][-_a-zA-Z0-9]{0,61}[a-zA-Z0-9]$`
	AzureName string `json:"azureName,omitempty"`
	// location is the Azure region.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Location string `json:"location"`
	// owner is the ResourceGroup the cluster lives in.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// oidcIssuerProfile turns the cluster's OIDC issuer on.
	// +optional
	OidcIssuerProfile *OidcIssuerProfile `json:"oidcIssuerProfile,omitempty"`
	// securityProfile holds the workload identity switch.
	// +optional
	SecurityProfile *SecurityProfile `json:"securityProfile,omitempty"`
	// tags are the cluster's tags.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 512)",message="tag names are 1 to 512 characters (Azure's limit)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="tag values are at most 256 characters (Azure's limit)"
	Tags map[string]string `json:"tags,omitempty"`
	// operatorSpec says what to export once the cluster is ready.
	// +optional
	OperatorSpec *ManagedClusterOperatorSpec `json:"operatorSpec,omitempty"`
}

// OidcIssuerProfile is the OIDC issuer switch.
// +kubebuilder:pruning:PreserveUnknownFields
type OidcIssuerProfile struct {
	// enabled turns the issuer on.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// SecurityProfile holds security settings.
// +kubebuilder:pruning:PreserveUnknownFields
type SecurityProfile struct {
	// workloadIdentity turns workload identity on.
	// +optional
	WorkloadIdentity *WorkloadIdentity `json:"workloadIdentity,omitempty"`
}

// WorkloadIdentity is the workload identity switch.
type WorkloadIdentity struct {
	// enabled turns workload identity on.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
}

// ManagedClusterOperatorSpec exports the issuer URL.
type ManagedClusterOperatorSpec struct {
	shared.OperatorSpecExpressions `json:",inline"`
	// configMaps exports the OIDC issuer URL to a ConfigMap.
	// +optional
	ConfigMaps *ManagedClusterOperatorConfigMaps `json:"configMaps,omitempty"`
	// secrets are Azure Service Operator's kubeconfig exports; Cerulean does not produce them
	// (Ready's message says so): they are accepted and kept.
	// +optional
	Secrets *ManagedClusterOperatorSecrets `json:"secrets,omitempty"`
}

// ManagedClusterOperatorSecrets names where Azure Service Operator writes kubeconfigs.
// Other entries (of Azure Service Operator's schema, which Cerulean does not produce) are kept,
// not exported, and named in Ready's message and a Warning Event.
// +kubebuilder:pruning:PreserveUnknownFields
type ManagedClusterOperatorSecrets struct {
	// adminCredentials is the cluster admin's kubeconfig (not produced by Cerulean).
	// +optional
	AdminCredentials *shared.SecretDestination `json:"adminCredentials,omitempty"`
	// userCredentials is the cluster user's kubeconfig (not produced by Cerulean).
	// +optional
	UserCredentials *shared.SecretDestination `json:"userCredentials,omitempty"`
}

// ManagedClusterOperatorConfigMaps names where the issuer URL goes.
// Other entries (of Azure Service Operator's schema, which Cerulean does not produce) are kept,
// not exported, and named in Ready's message and a Warning Event.
// +kubebuilder:pruning:PreserveUnknownFields
type ManagedClusterOperatorConfigMaps struct {
	// oidcIssuerProfile is the cluster's OIDC issuer URL.
	// +optional
	OIDCIssuerProfile *shared.ConfigMapDestination `json:"oidcIssuerProfile,omitempty"`
}

// ManagedClusterStatus mirrors what ARM holds.
// +kubebuilder:pruning:PreserveUnknownFields
type ManagedClusterStatus struct {
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
	// oidcIssuerProfile as ARM holds it.
	// +optional
	OidcIssuerProfile *OidcIssuerProfileStatus `json:"oidcIssuerProfile,omitempty"`
	// provisioningState is ARM's provisioning state.
	// +optional
	ProvisioningState string `json:"provisioningState,omitempty"`
	// tags are the cluster's tags.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// type is Microsoft.ContainerService/managedClusters.
	// +optional
	Type string `json:"type,omitempty"`
}

// OidcIssuerProfileStatus is the issuer as ARM holds it.
// +kubebuilder:pruning:PreserveUnknownFields
type OidcIssuerProfileStatus struct {
	// enabled says whether the issuer is on.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// issuerURL is the issuer's URL.
	// +optional
	IssuerURL string `json:"issuerURL,omitempty"`
}

// ManagedClusterList is a list of ManagedCluster.
// +kubebuilder:object:root=true
type ManagedClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ManagedCluster `json:"items"`
}

func init() { objects = append(objects, &ManagedCluster{}, &ManagedClusterList{}) }
