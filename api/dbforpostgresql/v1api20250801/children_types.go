package v1api20250801

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// FlexibleServersDatabase is a database of a flexible server
// (Microsoft.DBforPostgreSQL/flexibleServers/databases, API 2025-08-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || self.metadata.name.matches('^[a-zA-Z_][-a-zA-Z0-9_]{0,62}$')",message="metadata.name is the Azure name when spec.azureName is empty: database names are 1 to 63 letters, digits, hyphens and underscores, starting with a letter or underscore"
// +kubebuilder:resource:categories={azure,dbforpostgresql}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type FlexibleServersDatabase struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FlexibleServersDatabaseSpec `json:"spec,omitempty"`
	Status ServerChildStatus           `json:"status,omitempty"`
}

// FlexibleServersDatabaseSpec is the desired database.
// +kubebuilder:pruning:PreserveUnknownFields
type FlexibleServersDatabaseSpec struct {
	// azureName is the database's name (Azure's rule: 1 to 63 letters, digits, hyphens and
	// underscores, starting with a letter or underscore); empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][-a-zA-Z0-9_]{0,62}$`
	AzureName string `json:"azureName,omitempty"`
	// owner is the FlexibleServer the database lives in.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// charset is the database's character set, e.g. UTF8.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-zA-Z]+\w*$`
	// +kubebuilder:validation:MaxLength=64
	Charset string `json:"charset,omitempty"`
	// collation is the database's collation, e.g. en_US.utf8.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-zA-Z\-]+([. ]|\w)*$`
	// +kubebuilder:validation:MaxLength=128
	Collation string `json:"collation,omitempty"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *ChildOperatorSpec `json:"operatorSpec,omitempty"`
}

// FlexibleServersDatabaseList is a list of FlexibleServersDatabase.
// +kubebuilder:object:root=true
type FlexibleServersDatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FlexibleServersDatabase `json:"items"`
}

// FlexibleServersFirewallRule lets an address range reach a flexible server
// (Microsoft.DBforPostgreSQL/flexibleServers/firewallRules, API 2025-08-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || self.metadata.name.matches('^[a-zA-Z0-9]([-_a-zA-Z0-9]{0,78}[_a-zA-Z0-9])?$')",message="metadata.name is the Azure name when spec.azureName is empty: firewall rule names are 1 to 80 letters, digits, hyphens and underscores, starting with a letter or digit and not ending with a hyphen"
// +kubebuilder:resource:categories={azure,dbforpostgresql}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type FlexibleServersFirewallRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FlexibleServersFirewallRuleSpec `json:"spec,omitempty"`
	Status ServerChildStatus               `json:"status,omitempty"`
}

// FlexibleServersFirewallRuleSpec is the desired rule.
// +kubebuilder:pruning:PreserveUnknownFields
type FlexibleServersFirewallRuleSpec struct {
	// azureName is the rule's name (Azure's rule: 1 to 80 letters, digits, hyphens and
	// underscores, starting with a letter or digit, not ending with a hyphen); empty means
	// metadata.name.
	// +optional
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([-_a-zA-Z0-9]{0,78}[_a-zA-Z0-9])?$`
	// +kubebuilder:validation:MaxLength=80
	AzureName string `json:"azureName,omitempty"`
	// owner is the FlexibleServer the rule belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// startIpAddress is the first IPv4 address of the range.
	// +required
	// +kubebuilder:validation:Pattern=`^(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$`
	StartIPAddress string `json:"startIpAddress"`
	// endIpAddress is the last IPv4 address of the range.
	// +required
	// +kubebuilder:validation:Pattern=`^(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.(25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$`
	EndIPAddress string `json:"endIpAddress"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *ChildOperatorSpec `json:"operatorSpec,omitempty"`
}

// FlexibleServersFirewallRuleList is a list of FlexibleServersFirewallRule.
// +kubebuilder:object:root=true
type FlexibleServersFirewallRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FlexibleServersFirewallRule `json:"items"`
}

// FlexibleServersConfiguration sets one server parameter
// (Microsoft.DBforPostgreSQL/flexibleServers/configurations, API 2025-08-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,dbforpostgresql}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type FlexibleServersConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FlexibleServersConfigurationSpec `json:"spec,omitempty"`
	Status ServerChildStatus                `json:"status,omitempty"`
}

// FlexibleServersConfigurationSpec is the desired parameter value.
// +kubebuilder:pruning:PreserveUnknownFields
type FlexibleServersConfigurationSpec struct {
	// azureName is the parameter's name (e.g. max_connections); empty means metadata.name.
	// +optional
	// +kubebuilder:validation:Pattern=`^[-\w\._]+$`
	// +kubebuilder:validation:MaxLength=128
	AzureName string `json:"azureName,omitempty"`
	// owner is the FlexibleServer the parameter belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// source is where the value comes from, e.g. user-override.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Source string `json:"source,omitempty"`
	// value is the parameter's value.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *ChildOperatorSpec `json:"operatorSpec,omitempty"`
}

// FlexibleServersConfigurationList is a list of FlexibleServersConfiguration.
// +kubebuilder:object:root=true
type FlexibleServersConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FlexibleServersConfiguration `json:"items"`
}

func init() {
	objects = append(objects, &FlexibleServersDatabase{}, &FlexibleServersDatabaseList{},
		&FlexibleServersFirewallRule{}, &FlexibleServersFirewallRuleList{},
		&FlexibleServersConfiguration{}, &FlexibleServersConfigurationList{})
}
