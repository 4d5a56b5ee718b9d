package v1api20230131

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// UserAssignedIdentity is a managed identity
// (Microsoft.ManagedIdentity/userAssignedIdentities, API 2023-01-31).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || self.metadata.name.matches('^[a-zA-Z0-9][a-zA-Z0-9_-]{2,127}$')",message="metadata.name is the Azure name when spec.azureName is empty: names are 3 to 128 letters, digits, hyphens and underscores, starting with a letter or digit"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,managedidentity}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type UserAssignedIdentity struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UserAssignedIdentitySpec   `json:"spec,omitempty"`
	Status UserAssignedIdentityStatus `json:"status,omitempty"`
}

// UserAssignedIdentitySpec is the desired identity.
// +kubebuilder:pruning:PreserveUnknownFields
type UserAssignedIdentitySpec struct {
	// azureName is the identity's name in Azure; empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_-]*$`
	AzureName string `json:"azureName,omitempty"`
	// location is the Azure region.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Location string `json:"location"`
	// owner is the ResourceGroup the identity lives in.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// tags are the identity's tags.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 512)",message="tag names are 1 to 512 characters (Azure's limit)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="tag values are at most 256 characters (Azure's limit)"
	Tags map[string]string `json:"tags,omitempty"`
	// operatorSpec says what to export once the identity is ready.
	// +optional
	OperatorSpec *UserAssignedIdentityOperatorSpec `json:"operatorSpec,omitempty"`
}

// UserAssignedIdentityOperatorSpec exports the identity's ids.
type UserAssignedIdentityOperatorSpec struct {
	shared.OperatorSpecExpressions `json:",inline"`
	// configMaps exports the ids to ConfigMaps.
	// +optional
	ConfigMaps *UserAssignedIdentityOperatorConfigMaps `json:"configMaps,omitempty"`
	// secrets exports the ids to Secrets.
	// +optional
	Secrets *UserAssignedIdentityOperatorSecrets `json:"secrets,omitempty"`
}

// UserAssignedIdentityOperatorConfigMaps names a ConfigMap key per id.
// Other entries (of Azure Service Operator's schema, which Cerulean does not produce) are kept,
// not exported, and named in Ready's message and a Warning Event.
// +kubebuilder:pruning:PreserveUnknownFields
type UserAssignedIdentityOperatorConfigMaps struct {
	// clientId is the identity's application (client) id.
	// +optional
	ClientID *shared.ConfigMapDestination `json:"clientId,omitempty"`
	// principalId is the identity's object id.
	// +optional
	PrincipalID *shared.ConfigMapDestination `json:"principalId,omitempty"`
	// tenantId is the identity's tenant.
	// +optional
	TenantID *shared.ConfigMapDestination `json:"tenantId,omitempty"`
}

// UserAssignedIdentityOperatorSecrets names a Secret key per id.
// Other entries (of Azure Service Operator's schema, which Cerulean does not produce) are kept,
// not exported, and named in Ready's message and a Warning Event.
// +kubebuilder:pruning:PreserveUnknownFields
type UserAssignedIdentityOperatorSecrets struct {
	// clientId is the identity's application (client) id.
	// +optional
	ClientID *shared.SecretDestination `json:"clientId,omitempty"`
	// principalId is the identity's object id.
	// +optional
	PrincipalID *shared.SecretDestination `json:"principalId,omitempty"`
	// tenantId is the identity's tenant.
	// +optional
	TenantID *shared.SecretDestination `json:"tenantId,omitempty"`
}

// UserAssignedIdentityStatus mirrors what ARM holds.
// +kubebuilder:pruning:PreserveUnknownFields
type UserAssignedIdentityStatus struct {
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
	// clientId is the identity's application (client) id.
	// +optional
	ClientID string `json:"clientId,omitempty"`
	// principalId is the identity's object id.
	// +optional
	PrincipalID string `json:"principalId,omitempty"`
	// tenantId is the identity's tenant.
	// +optional
	TenantID string `json:"tenantId,omitempty"`
	// tags are the identity's tags.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// type is Microsoft.ManagedIdentity/userAssignedIdentities.
	// +optional
	Type string `json:"type,omitempty"`
}

// UserAssignedIdentityList is a list of UserAssignedIdentity.
// +kubebuilder:object:root=true
type UserAssignedIdentityList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []UserAssignedIdentity `json:"items"`
}

// FederatedIdentityCredential trusts an external issuer's tokens for a managed identity
// (Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials, API 2023-01-31).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || self.metadata.name.matches('^[a-zA-Z0-9][a-zA-Z0-9-_]{2,119}$')",message="metadata.name is the Azure name when spec.azureName is empty: names are 3 to 120 letters, digits, hyphens and underscores, starting with a letter or digit"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,managedidentity}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type FederatedIdentityCredential struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FederatedIdentityCredentialSpec   `json:"spec,omitempty"`
	Status FederatedIdentityCredentialStatus `json:"status,omitempty"`
}

// FederatedIdentityCredentialSpec is the desired credential.
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:XValidation:rule="has(self.issuer) != has(self.issuerFromConfig)",message="exactly one of issuer and issuerFromConfig is required"
// +kubebuilder:validation:XValidation:rule="has(self.subject) != has(self.subjectFromConfig)",message="exactly one of subject and subjectFromConfig is required"
type FederatedIdentityCredentialSpec struct {
	// azureName is the credential's name in Azure; empty means metadata.name.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9-_]{2,119}$`
	AzureName string `json:"azureName,omitempty"`
	// owner is the UserAssignedIdentity the credential belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// audiences of the external tokens, usually [api://AzureADTokenExchange].
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:items:MaxLength=600
	Audiences []string `json:"audiences"`
	// issuer is the external issuer's URL (a cluster's service-account issuer).
	// +optional
	// +kubebuilder:validation:MaxLength=600
	// +kubebuilder:validation:Pattern=`^https://`
	Issuer string `json:"issuer,omitempty"`
	// issuerFromConfig reads issuer from a ConfigMap.
	// +optional
	IssuerFromConfig *shared.ConfigMapReference `json:"issuerFromConfig,omitempty"`
	// subject is the external token's subject, e.g. system:serviceaccount:NS:SA.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=600
	Subject string `json:"subject,omitempty"`
	// subjectFromConfig reads subject from a ConfigMap.
	// +optional
	SubjectFromConfig *shared.ConfigMapReference `json:"subjectFromConfig,omitempty"`
	// operatorSpec says what to export once the credential is ready.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// FederatedIdentityCredentialStatus mirrors what ARM holds.
// +kubebuilder:pruning:PreserveUnknownFields
type FederatedIdentityCredentialStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
	// id is the ARM id.
	// +optional
	ID string `json:"id,omitempty"`
	// name is the Azure name.
	// +optional
	Name string `json:"name,omitempty"`
	// audiences as ARM holds them.
	// +optional
	Audiences []string `json:"audiences,omitempty"`
	// issuer as ARM holds it.
	// +optional
	Issuer string `json:"issuer,omitempty"`
	// subject as ARM holds it.
	// +optional
	Subject string `json:"subject,omitempty"`
	// type is Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials.
	// +optional
	Type string `json:"type,omitempty"`
}

// FederatedIdentityCredentialList is a list of FederatedIdentityCredential.
// +kubebuilder:object:root=true
type FederatedIdentityCredentialList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FederatedIdentityCredential `json:"items"`
}

func init() {
	objects = append(objects, &UserAssignedIdentity{}, &UserAssignedIdentityList{},
		&FederatedIdentityCredential{}, &FederatedIdentityCredentialList{})
}
