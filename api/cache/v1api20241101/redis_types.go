package v1api20241101

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// Redis is an Azure Cache for Redis (Microsoft.Cache/redis, API 2024-11-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || (self.metadata.name.matches('^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$') && !self.metadata.name.contains('--'))",message="metadata.name is the Azure name when spec.azureName is empty: cache names are 1 to 63 letters, digits and hyphens, starting and ending with a letter or digit, without consecutive hyphens"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,cache}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type Redis struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RedisSpec   `json:"spec,omitempty"`
	Status RedisStatus `json:"status,omitempty"`
}

// RedisSpec is the desired cache. Every other field of Azure Service Operator's schema
// (redisConfiguration, zones, identity, publicNetworkAccess, ...) is accepted and sent to ARM
// as is.
// +kubebuilder:pruning:PreserveUnknownFields
type RedisSpec struct {
	// azureName is the cache's name in Azure, the first label of its host name
	// NAME.redis.cache.windows.net; empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([a-zA-Z0-9][a-zA-Z0-9-]*)?[a-zA-Z0-9]$`
	AzureName string `json:"azureName,omitempty"`
	// location is the Azure region.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	Location string `json:"location"`
	// owner is the ResourceGroup the cache lives in.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// sku is the cache's tier and size.
	// +required
	Sku RedisSku `json:"sku"`
	// enableNonSslPort opens the plain-text port 6379 besides TLS on 6380.
	// +optional
	EnableNonSslPort *bool `json:"enableNonSslPort,omitempty"`
	// minimumTlsVersion is 1.0, 1.1 or 1.2.
	// +optional
	// +kubebuilder:validation:Enum="1.0";"1.1";"1.2"
	MinimumTLSVersion string `json:"minimumTlsVersion,omitempty"`
	// redisVersion is the major version (e.g. 6) or latest.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	RedisVersion string `json:"redisVersion,omitempty"`
	// tags are the cache's tags.
	// +optional
	// +kubebuilder:validation:MaxProperties=50
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) >= 1 && size(k) <= 512)",message="tag names are 1 to 512 characters (Azure's limit)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 256)",message="tag values are at most 256 characters (Azure's limit)"
	Tags map[string]string `json:"tags,omitempty"`
	// operatorSpec says what to export once the cache is ready.
	// +optional
	OperatorSpec *RedisOperatorSpec `json:"operatorSpec,omitempty"`
}

// RedisSku is a cache's tier and size.
type RedisSku struct {
	// name is Basic, Standard or Premium.
	// +required
	// +kubebuilder:validation:Enum=Basic;Premium;Standard
	Name string `json:"name"`
	// family is C (Basic, Standard) or P (Premium).
	// +required
	// +kubebuilder:validation:Enum=C;P
	Family string `json:"family"`
	// capacity is the size: 0-6 for C, 1-5 for P.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=6
	Capacity int `json:"capacity"`
}

// RedisOperatorSpec exports the cache's address and keys.
type RedisOperatorSpec struct {
	shared.OperatorSpecExpressions `json:",inline"`
	// secrets exports values to Secrets.
	// +optional
	Secrets *RedisOperatorSecrets `json:"secrets,omitempty"`
}

// RedisOperatorSecrets names a Secret key per value.
// Other entries (of Azure Service Operator's schema, which Cerulean does not produce) are kept,
// not exported, and named in Ready's message and a Warning Event.
// +kubebuilder:pruning:PreserveUnknownFields
type RedisOperatorSecrets struct {
	// hostName is the cache's host name.
	// +optional
	HostName *shared.SecretDestination `json:"hostName,omitempty"`
	// port is the plain-text port (6379).
	// +optional
	Port *shared.SecretDestination `json:"port,omitempty"`
	// sslPort is the TLS port (6380).
	// +optional
	SSLPort *shared.SecretDestination `json:"sslPort,omitempty"`
	// primaryKey is the first access key.
	// +optional
	PrimaryKey *shared.SecretDestination `json:"primaryKey,omitempty"`
	// secondaryKey is the second access key.
	// +optional
	SecondaryKey *shared.SecretDestination `json:"secondaryKey,omitempty"`
}

// RedisStatus mirrors what ARM holds (never the keys).
// +kubebuilder:pruning:PreserveUnknownFields
type RedisStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
	// id is the ARM id.
	// +optional
	ID string `json:"id,omitempty"`
	// name is the Azure name.
	// +optional
	Name string `json:"name,omitempty"`
	// hostName is the cache's host name.
	// +optional
	HostName string `json:"hostName,omitempty"`
	// port is the plain-text port.
	// +optional
	Port int `json:"port,omitempty"`
	// sslPort is the TLS port.
	// +optional
	SSLPort int `json:"sslPort,omitempty"`
	// provisioningState is ARM's provisioning state.
	// +optional
	ProvisioningState string `json:"provisioningState,omitempty"`
	// redisVersion is the engine's version.
	// +optional
	RedisVersion string `json:"redisVersion,omitempty"`
}

// RedisList is a list of Redis.
// +kubebuilder:object:root=true
type RedisList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Redis `json:"items"`
}

// RedisFirewallRule lets an address range reach a cache
// (Microsoft.Cache/redis/firewallRules, API 2024-11-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="(has(self.spec) && has(self.spec.azureName)) || self.metadata.name.matches('^[a-zA-Z0-9_]{1,64}$')",message="metadata.name is the Azure name when spec.azureName is empty: cache firewall rule names are 1 to 64 letters, digits and underscores (no hyphens or periods)"
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,cache}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type RedisFirewallRule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RedisFirewallRuleSpec   `json:"spec,omitempty"`
	Status RedisFirewallRuleStatus `json:"status,omitempty"`
}

// RedisFirewallRuleSpec is the desired rule.
// +kubebuilder:pruning:PreserveUnknownFields
type RedisFirewallRuleSpec struct {
	// azureName is the rule's name (1 to 64 letters, digits and underscores); empty means
	// metadata.name.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9_]+$`
	AzureName string `json:"azureName,omitempty"`
	// owner is the Redis the rule belongs to.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// startIP is the first IPv4 address of the range.
	// +required
	// +kubebuilder:validation:MinLength=7
	// +kubebuilder:validation:MaxLength=15
	StartIP string `json:"startIP"`
	// endIP is the last IPv4 address of the range.
	// +required
	// +kubebuilder:validation:MinLength=7
	// +kubebuilder:validation:MaxLength=15
	EndIP string `json:"endIP"`
	// operatorSpec holds export expressions.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// RedisFirewallRuleStatus mirrors what ARM holds.
// +kubebuilder:pruning:PreserveUnknownFields
type RedisFirewallRuleStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
	// id is the ARM id.
	// +optional
	ID string `json:"id,omitempty"`
	// name is the Azure name.
	// +optional
	Name string `json:"name,omitempty"`
	// startIP as ARM holds it.
	// +optional
	StartIP string `json:"startIP,omitempty"`
	// endIP as ARM holds it.
	// +optional
	EndIP string `json:"endIP,omitempty"`
}

// RedisFirewallRuleList is a list of RedisFirewallRule.
// +kubebuilder:object:root=true
type RedisFirewallRuleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RedisFirewallRule `json:"items"`
}

func init() {
	objects = append(objects, &Redis{}, &RedisList{}, &RedisFirewallRule{}, &RedisFirewallRuleList{})
}
