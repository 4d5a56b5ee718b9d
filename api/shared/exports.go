package shared

// ConfigMapDestination is where one exported value is written: a key of a ConfigMap in the
// resource's namespace, owned by the resource.
type ConfigMapDestination struct {
	// name is the ConfigMap's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key is the key within the ConfigMap.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// SecretDestination is where one exported secret value is written: a key of a Secret in the
// resource's namespace (owned by the resource), or of the Key Vault destination when one is
// configured (see docs/resources.md).
type SecretDestination struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key is the key within the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// DestinationExpression exports the result of a CEL expression over the resource (`self`):
// a string, or with no key a map of strings whose entries become keys.
type DestinationExpression struct {
	// name is the ConfigMap's or Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key is the key within it; empty when value is a map.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
	// value is the CEL expression.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value"`
}

// OperatorSpecExpressions are the export expressions every kind accepts.
type OperatorSpecExpressions struct {
	// configMapExpressions export CEL results to ConfigMaps.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	ConfigMapExpressions []DestinationExpression `json:"configMapExpressions,omitempty"`
	// secretExpressions export CEL results to Secrets (or the Key Vault destination).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	SecretExpressions []DestinationExpression `json:"secretExpressions,omitempty"`
}
