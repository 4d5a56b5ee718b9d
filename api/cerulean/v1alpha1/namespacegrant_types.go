package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceGrant is a cluster admin's grant of Azure identities and ARM scopes to namespaces.
// It is cluster-scoped so that RBAC keeps it to cluster admins: a namespace's own users cannot
// grant themselves anything. Grants add up: a namespace may use what any grant listing it gives.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,categories={cerulean}
// +kubebuilder:printcolumn:name="Namespaces",type="string",JSONPath=".spec.namespaces"
type NamespaceGrant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec lists the namespaces and what they are given.
	// +required
	Spec NamespaceGrantSpec `json:"spec"`
}

// NamespaceGrantSpec lists namespaces and the identities and scopes they may use.
// +kubebuilder:validation:XValidation:rule="has(self.identities) || has(self.scopes)",message="a grant gives identities, scopes or both"
type NamespaceGrantSpec struct {
	// namespaces are the names of the namespaces granted.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	Namespaces []string `json:"namespaces"`
	// identities are the Azure identities that AzureIdentity objects of these namespaces (and
	// pods bound to them) may use: a user-assigned identity's ARM resource id, a client id (a
	// managed identity's or a service principal's), or an ARM scope (a resource group's id: every
	// identity in it); "*" grants every identity. Compared case-insensitively.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=1024
	// +listType=set
	Identities []string `json:"identities,omitempty"`
	// scopes are the ARM scopes that resources of these namespaces, reconciled with the
	// manager's global credential, may be in or refer to: a subscription, a resource group or a
	// resource id, each covering everything under it. A last segment ending in '*' is a name
	// prefix: /subscriptions/SUB/resourceGroups/team-a-* covers every group whose name starts
	// with team-a-, and /subscriptions/* covers everything. Compared case-insensitively.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=1024
	// +kubebuilder:validation:items:Pattern=`(?i)^/subscriptions/[^/]+(/.*)?$`
	// +listType=set
	Scopes []string `json:"scopes,omitempty"`
}

// NamespaceGrantList is a list of NamespaceGrant.
// +kubebuilder:object:root=true
type NamespaceGrantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespaceGrant `json:"items"`
}
