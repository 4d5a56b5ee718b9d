package shared

// KnownResourceReference names the owner of a resource: a Kubernetes object of the owner's kind
// in the same namespace, or an Azure resource by its ARM id.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.armId)",message="exactly one of name and armId is required"
type KnownResourceReference struct {
	// name is the owner's Kubernetes name, in the same namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// armId is the owner's ARM resource id, for an owner not managed from Kubernetes.
	// +optional
	// +kubebuilder:validation:Pattern="(?i)^/subscriptions/.+"
	// +kubebuilder:validation:MaxLength=1024
	ARMID string `json:"armId,omitempty"`
}

// ArbitraryOwnerReference names an owner of any kind (a RoleAssignment's scope): by group, kind
// and name in the same namespace, or by ARM id.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.armId)",message="exactly one of name and armId is required"
// +kubebuilder:validation:XValidation:rule="!has(self.name) || (has(self.group) && has(self.kind))",message="an owner by name needs its group and kind"
type ArbitraryOwnerReference struct {
	// name is the owner's Kubernetes name, in the same namespace.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// group is the owner's API group, e.g. resources.azure.com.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind is the owner's kind, e.g. ResourceGroup.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`
	// armId is the owner's ARM resource id: the scope itself.
	// +optional
	// +kubebuilder:validation:Pattern="(?i)^/subscriptions/.+"
	// +kubebuilder:validation:MaxLength=1024
	ARMID string `json:"armId,omitempty"`
}

// ResourceReference points at an Azure resource: a Kubernetes object by group, kind and name,
// or an ARM id.
type ResourceReference struct {
	// group is the referenced object's API group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind is the referenced object's kind.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`
	// name is the referenced object's name, in the same namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// armId is the referenced resource's ARM id.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	ARMID string `json:"armId,omitempty"`
}

// ConfigMapReference reads one value from a ConfigMap in the same namespace.
type ConfigMapReference struct {
	// name is the ConfigMap's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key is the key within the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// SecretReference reads one value from a Secret in the same namespace.
type SecretReference struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key is the key within the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}
