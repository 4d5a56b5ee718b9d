package v1api20230701

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// Vault is a Key Vault (Microsoft.KeyVault/vaults, API 2023-07-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || (size(self.metadata.name) >= 3 && size(self.metadata.name) <= 24 && self.metadata.name.matches('^[a-zA-Z](-?[a-zA-Z0-9])*$'))",message="metadata.name is the Azure name when spec.azureName is empty: names are 3 to 24 letters, digits and single hyphens, starting with a letter and ending with a letter or digit"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,keyvault}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type Vault struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VaultSpec   `json:"spec,omitempty"`
	Status VaultStatus `json:"status,omitempty"`
}

// VaultSpec is the desired vault.
// +kubebuilder:pruning:PreserveUnknownFields
type VaultSpec struct {
	// azureName is the vault's name in Azure (globally unique); empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=24
	// +kubebuilder:validation:Pattern=`^[a-zA-Z](-?[a-zA-Z0-9])*$`
	AzureName string `json:"azureName,omitempty"`
	// location is the Azure region.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Location string `json:"location"`
	// owner is the ResourceGroup the vault lives in.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// properties are the vault's ARM properties.
	// +required
	Properties VaultProperties `json:"properties"`
	// tags are the vault's tags.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 512)",message="tag names are 1 to 512 characters (Azure's limit)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="tag values are at most 256 characters (Azure's limit)"
	Tags map[string]string `json:"tags,omitempty"`
	// operatorSpec says what to export once the vault is ready.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// VaultProperties are the vault's ARM properties.
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:XValidation:rule="!(has(self.tenantId) && has(self.tenantIdFromConfig))",message="at most one of tenantId and tenantIdFromConfig"
type VaultProperties struct {
	// tenantId is the tenant whose principals the vault trusts.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	TenantID string `json:"tenantId,omitempty"`
	// tenantIdFromConfig reads tenantId from a ConfigMap.
	// +optional
	TenantIDFromConfig *shared.ConfigMapReference `json:"tenantIdFromConfig,omitempty"`
	// sku is the vault's pricing tier.
	// +optional
	Sku *VaultSku `json:"sku,omitempty"`
	// accessPolicies grant principals data-plane permissions (without RBAC authorization).
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	AccessPolicies []AccessPolicyEntry `json:"accessPolicies,omitempty"`
	// enableRbacAuthorization makes Azure RBAC authorize data-plane calls.
	// +optional
	EnableRbacAuthorization *bool `json:"enableRbacAuthorization,omitempty"`
	// enableSoftDelete keeps deleted vaults and secrets recoverable.
	// +optional
	EnableSoftDelete *bool `json:"enableSoftDelete,omitempty"`
	// softDeleteRetentionInDays is how long deleted items are kept (7-90).
	// +optional
	// +kubebuilder:validation:Minimum=7
	// +kubebuilder:validation:Maximum=90
	SoftDeleteRetentionInDays *int `json:"softDeleteRetentionInDays,omitempty"`
	// enablePurgeProtection forbids purging during the retention period.
	// +optional
	EnablePurgeProtection *bool `json:"enablePurgeProtection,omitempty"`
	// createMode is default, recover, createOrRecover or purgeThenCreate.
	// +optional
	// +kubebuilder:validation:Enum=default;recover;createOrRecover;purgeThenCreate
	CreateMode string `json:"createMode,omitempty"`
	// publicNetworkAccess is Enabled or Disabled.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PublicNetworkAccess string `json:"publicNetworkAccess,omitempty"`
	// networkAcls restrict network access.
	// +optional
	NetworkAcls *shared.JSON `json:"networkAcls,omitempty"`
}

// VaultSku is the vault's pricing tier.
// +kubebuilder:pruning:PreserveUnknownFields
type VaultSku struct {
	// family is A.
	// +optional
	// +kubebuilder:validation:Enum=A
	Family string `json:"family,omitempty"`
	// name is standard or premium.
	// +optional
	// +kubebuilder:validation:Enum=standard;premium
	Name string `json:"name,omitempty"`
}

// AccessPolicyEntry grants one principal data-plane permissions.
// +kubebuilder:pruning:PreserveUnknownFields
type AccessPolicyEntry struct {
	// tenantId of the principal.
	// +optional
	// +kubebuilder:validation:MaxLength=36
	TenantID string `json:"tenantId,omitempty"`
	// tenantIdFromConfig reads tenantId from a ConfigMap.
	// +optional
	TenantIDFromConfig *shared.ConfigMapReference `json:"tenantIdFromConfig,omitempty"`
	// objectId of the principal.
	// +optional
	// +kubebuilder:validation:MaxLength=36
	ObjectID string `json:"objectId,omitempty"`
	// objectIdFromConfig reads objectId from a ConfigMap.
	// +optional
	ObjectIDFromConfig *shared.ConfigMapReference `json:"objectIdFromConfig,omitempty"`
	// applicationId of a compound identity.
	// +optional
	// +kubebuilder:validation:MaxLength=36
	ApplicationID string `json:"applicationId,omitempty"`
	// applicationIdFromConfig reads applicationId from a ConfigMap.
	// +optional
	ApplicationIDFromConfig *shared.ConfigMapReference `json:"applicationIdFromConfig,omitempty"`
	// permissions granted.
	// +optional
	Permissions *Permissions `json:"permissions,omitempty"`
}

// Permissions lists granted operations per object kind.
type Permissions struct {
	// keys operations.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Keys []string `json:"keys,omitempty"`
	// secrets operations.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Secrets []string `json:"secrets,omitempty"`
	// certificates operations.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Certificates []string `json:"certificates,omitempty"`
	// storage operations.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Storage []string `json:"storage,omitempty"`
}

// VaultStatus mirrors what ARM holds.
// +kubebuilder:pruning:PreserveUnknownFields
type VaultStatus struct {
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
	// properties as ARM holds them.
	// +optional
	Properties *VaultStatusProperties `json:"properties,omitempty"`
	// tags are the vault's tags.
	// +optional
	Tags map[string]string `json:"tags,omitempty"`
	// type is Microsoft.KeyVault/vaults.
	// +optional
	Type string `json:"type,omitempty"`
}

// VaultStatusProperties are the vault's ARM properties as ARM holds them.
// +kubebuilder:pruning:PreserveUnknownFields
type VaultStatusProperties struct {
	// vaultUri is the data-plane URL.
	// +optional
	VaultURI string `json:"vaultUri,omitempty"`
	// tenantId is the trusted tenant.
	// +optional
	TenantID string `json:"tenantId,omitempty"`
	// provisioningState is ARM's provisioning state.
	// +optional
	ProvisioningState string `json:"provisioningState,omitempty"`
}

// VaultList is a list of Vault.
// +kubebuilder:object:root=true
type VaultList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Vault `json:"items"`
}

func init() { objects = append(objects, &Vault{}, &VaultList{}) }
