package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ComponentName names a hosted control plane's component, as HyperShift on Azure names them.
// +kubebuilder:validation:Enum=managed-azure-cloud-provider;managed-azure-cpo;managed-azure-nodepool-management;managed-azure-ingress;managed-azure-network;managed-azure-disk-csi;managed-azure-file-csi;managed-azure-image-registry;managed-azure-kms
type ComponentName string

// The components, HyperShift's names.
const (
	ComponentCloudProvider      ComponentName = "managed-azure-cloud-provider"
	ComponentCPO                ComponentName = "managed-azure-cpo"
	ComponentNodePoolManagement ComponentName = "managed-azure-nodepool-management"
	ComponentIngress            ComponentName = "managed-azure-ingress"
	ComponentNetwork            ComponentName = "managed-azure-network"
	ComponentDiskCSI            ComponentName = "managed-azure-disk-csi"
	ComponentFileCSI            ComponentName = "managed-azure-file-csi"
	ComponentImageRegistry      ComponentName = "managed-azure-image-registry"
	ComponentKMS                ComponentName = "managed-azure-kms"
)

// Components lists every component, in HyperShift's order.
var Components = []ComponentName{ComponentCloudProvider, ComponentCPO, ComponentNodePoolManagement, ComponentIngress,
	ComponentNetwork, ComponentDiskCSI, ComponentFileCSI, ComponentImageRegistry, ComponentKMS}

// Condition type and reasons of ControlPlaneIdentities (on the object and on each component).
const (
	// ConditionReady is True when every component's credentials are current in Key Vault and its
	// SecretProviderClass matches.
	ConditionReady = "Ready"

	// ReasonSucceeded: the credentials are current and the SecretProviderClass matches.
	ReasonSucceeded = "Succeeded"
	// ReasonReconciling: work is under way.
	ReasonReconciling = "Reconciling"
	// ReasonReferenceNotFound: a referenced UserAssignedIdentity or Vault object does not exist
	// in the namespace.
	ReasonReferenceNotFound = "ReferenceNotFound"
	// ReasonWaitingForOwner: a referenced object exists but has no Azure id yet (not Ready).
	ReasonWaitingForOwner = "WaitingForOwner"
	// ReasonAzureResourceNotFound: the identity or vault does not exist in Azure (404).
	ReasonAzureResourceNotFound = "AzureResourceNotFound"
	// ReasonCredentialsForbidden: the managed-identity data plane refused to issue the
	// identity's credentials (403: the manager may not assign the identity).
	ReasonCredentialsForbidden = "CredentialsForbidden"
	// ReasonKeyVaultForbidden: Key Vault refused to store the credentials (403: the manager has no
	// secrets-write role on the vault).
	ReasonKeyVaultForbidden = "KeyVaultForbidden"
	// ReasonCredentialsUnusable: the data plane answered credentials the manager will not store
	// (past cannot_renew_after, or already expired by the manager's clock).
	ReasonCredentialsUnusable = "CredentialsUnusable"
	// ReasonSecretProviderClassFailed: the SecretProviderClass could not be written (the Secrets
	// Store CSI Driver's CRD is not installed, or the API server refused it).
	ReasonSecretProviderClassFailed = "SecretProviderClassFailed"
	// ReasonFailed: any other failure; retried with backoff.
	ReasonFailed = "Failed"
	// ReasonDeleting: the object is being deleted.
	ReasonDeleting = "Deleting"
)

// ControlPlaneIdentities names the managed identity of each component of a hosted control plane
// and the Key Vault their credentials go to. For each component the manager obtains the
// identity's credentials (a client certificate registered on its principal, from the
// managed-identity data plane), writes them as the credentials JSON into one Key Vault secret,
// renews them at renew_after, and keeps one SecretProviderClass that mounts that secret.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=controlplaneidentities,singular=controlplaneidentities,shortName=cpi,categories=cerulean
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",priority=1,JSONPath=".status.conditions[?(@.type=='Ready')].message"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"
type ControlPlaneIdentities struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ControlPlaneIdentitiesSpec   `json:"spec"`
	Status ControlPlaneIdentitiesStatus `json:"status,omitempty"`
}

// ControlPlaneIdentitiesSpec is the desired state.
type ControlPlaneIdentitiesSpec struct {
	// keyVault is the vault holding one credentials secret per component.
	// +required
	KeyVault ResourceReference `json:"keyVault"`
	// vaultReader is the identity allowed to read the vault, the one the CSI mount
	// authenticates as (the nodes' user-assigned identity): the SecretProviderClasses'
	// userAssignedIdentityID. Granting it a secrets-read role on the vault is the user's (for
	// example a RoleAssignment).
	// +required
	VaultReader ReaderReference `json:"vaultReader"`
	// components are the control plane's components, each with its managed identity.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=9
	Components []Component `json:"components"`
}

// Component is one control-plane component and its managed identity.
type Component struct {
	// name is the component, one of HyperShift's names (managed-azure-cpo, ...). It also names
	// the SecretProviderClass.
	// +required
	Name ComponentName `json:"name"`
	// identity is the component's user-assigned managed identity.
	// +required
	Identity ResourceReference `json:"identity"`
	// secretName is the Key Vault secret holding the credentials JSON; default: the component's
	// name.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-zA-Z-]{1,127}$`
	SecretName string `json:"secretName,omitempty"`
}

// ResourceReference names an Azure resource: an Azure Service Operator object in the same
// namespace (UserAssignedIdentity or Vault, by metadata.name) whose status carries its id, or
// the resource's ARM id. Exactly one is set.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.armId)",message="set exactly one of name and armId"
type ResourceReference struct {
	// name is the ASO object (managedidentity.azure.com UserAssignedIdentity for an identity,
	// keyvault.azure.com Vault for a vault) in this namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// armId is the resource's ARM id
	// (/subscriptions/…/resourceGroups/…/providers/Microsoft.ManagedIdentity/userAssignedIdentities/…
	// or …/providers/Microsoft.KeyVault/vaults/…).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/[^/]+/[^/]+/[^/]+$`
	ARMID string `json:"armId,omitempty"`
}

// ReaderReference names the identity that reads the vault: an ASO UserAssignedIdentity, an
// ARM id, or a client id. Exactly one is set.
// +kubebuilder:validation:XValidation:rule="(has(self.name) ? 1 : 0) + (has(self.armId) ? 1 : 0) + (has(self.clientId) ? 1 : 0) == 1",message="set exactly one of name, armId and clientId"
type ReaderReference struct {
	// name is a managedidentity.azure.com UserAssignedIdentity in this namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// armId is the identity's ARM id.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/subscriptions/[^/]+/resourceGroups/[^/]+/providers/Microsoft\.ManagedIdentity/userAssignedIdentities/[^/]+$`
	ARMID string `json:"armId,omitempty"`
	// clientId is the identity's client id, used as is.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	ClientID string `json:"clientId,omitempty"`
}

// ControlPlaneIdentitiesStatus is the observed state.
type ControlPlaneIdentitiesStatus struct {
	// conditions holds Ready: True when every component is Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation last reconciled with success.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// components is each component's state.
	// +optional
	// +listType=map
	// +listMapKey=name
	Components []ComponentStatus `json:"components,omitempty"`
}

// ComponentStatus is one component's state.
type ComponentStatus struct {
	// name is the component.
	// +required
	Name ComponentName `json:"name"`
	// conditions holds the component's Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// identityId is the ARM id of the identity the current credentials belong to.
	// +optional
	IdentityID string `json:"identityId,omitempty"`
	// clientId is that identity's client id.
	// +optional
	ClientID string `json:"clientId,omitempty"`
	// vaultUri is the vault the credentials are stored in.
	// +optional
	VaultURI string `json:"vaultUri,omitempty"`
	// secretName is the Key Vault secret.
	// +optional
	SecretName string `json:"secretName,omitempty"`
	// secretVersion is the secret's version holding the current credentials.
	// +optional
	SecretVersion string `json:"secretVersion,omitempty"`
	// secretProviderClass is the SecretProviderClass mounting the secret.
	// +optional
	SecretProviderClass string `json:"secretProviderClass,omitempty"`
	// notBefore, notAfter, renewAfter and cannotRenewAfter are the current credentials' times.
	// +optional
	NotBefore *metav1.Time `json:"notBefore,omitempty"`
	// +optional
	NotAfter *metav1.Time `json:"notAfter,omitempty"`
	// +optional
	RenewAfter *metav1.Time `json:"renewAfter,omitempty"`
	// +optional
	CannotRenewAfter *metav1.Time `json:"cannotRenewAfter,omitempty"`
}

// +kubebuilder:object:root=true

// ControlPlaneIdentitiesList is a list of ControlPlaneIdentities.
type ControlPlaneIdentitiesList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ControlPlaneIdentities `json:"items"`
}
