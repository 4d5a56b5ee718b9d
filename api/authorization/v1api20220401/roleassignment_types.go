package v1api20220401

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// RoleAssignment grants a principal a role at a scope
// (Microsoft.Authorization/roleAssignments, API 2022-04-01).
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,authorization}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type RoleAssignment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   RoleAssignmentSpec   `json:"spec,omitempty"`
	Status RoleAssignmentStatus `json:"status,omitempty"`
}

// RoleAssignmentSpec is the desired assignment.
// +kubebuilder:pruning:PreserveUnknownFields
// +kubebuilder:validation:XValidation:rule="has(self.principalId) != has(self.principalIdFromConfig)",message="exactly one of principalId and principalIdFromConfig is required"
type RoleAssignmentSpec struct {
	// azureName is the assignment's name: a GUID; empty means one derived from the object's
	// namespace, name and owner, stable across re-creation.
	// +optional
	// +kubebuilder:validation:Pattern=`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`
	AzureName string `json:"azureName,omitempty"`
	// owner is the scope: any resource, by group, kind and name or by ARM id.
	// +required
	Owner shared.ArbitraryOwnerReference `json:"owner"`
	// principalId is the object id the role is granted to.
	// +optional
	// +kubebuilder:validation:MaxLength=36
	PrincipalID string `json:"principalId,omitempty"`
	// principalIdFromConfig reads principalId from a ConfigMap.
	// +optional
	PrincipalIDFromConfig *shared.ConfigMapReference `json:"principalIdFromConfig,omitempty"`
	// principalType is User, Group, ServicePrincipal, ForeignGroup or Device.
	// +optional
	// +kubebuilder:validation:Enum=Device;ForeignGroup;Group;ServicePrincipal;User
	PrincipalType string `json:"principalType,omitempty"`
	// roleDefinitionReference is the role: by ARM id, or by name (wellKnownName, e.g. Reader).
	// +required
	RoleDefinitionReference RoleDefinitionReference `json:"roleDefinitionReference"`
	// description of the assignment.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`
	// condition limits the assignment (ABAC).
	// +optional
	// +kubebuilder:validation:MaxLength=8192
	Condition string `json:"condition,omitempty"`
	// conditionVersion is the condition language's version, 2.0.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	ConditionVersion string `json:"conditionVersion,omitempty"`
	// operatorSpec says what to export once the assignment is ready.
	// +optional
	OperatorSpec *shared.OperatorSpecExpressions `json:"operatorSpec,omitempty"`
}

// RoleDefinitionReference names a role definition.
// +kubebuilder:validation:XValidation:rule="(has(self.armId) ? 1 : 0) + (has(self.wellKnownName) ? 1 : 0) + (has(self.name) ? 1 : 0) == 1",message="exactly one of armId, wellKnownName and name is required"
type RoleDefinitionReference struct {
	// armId is the role definition's ARM id.
	// +optional
	// +kubebuilder:validation:Pattern="(?i)^/.*providers/Microsoft.Authorization/roleDefinitions/.+"
	// +kubebuilder:validation:MaxLength=1024
	ARMID string `json:"armId,omitempty"`
	// wellKnownName is a built-in role's name, e.g. Reader (case-insensitive).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	WellKnownName string `json:"wellKnownName,omitempty"`
	// group, kind and name reference a Kubernetes object holding a role definition.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Group string `json:"group,omitempty"`
	// kind of the referenced object.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind,omitempty"`
	// name of the referenced object.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// RoleAssignmentStatus mirrors what ARM holds.
// +kubebuilder:pruning:PreserveUnknownFields
type RoleAssignmentStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
	// id is the ARM id.
	// +optional
	ID string `json:"id,omitempty"`
	// name is the assignment's GUID.
	// +optional
	Name string `json:"name,omitempty"`
	// principalId as ARM holds it.
	// +optional
	PrincipalID string `json:"principalId,omitempty"`
	// principalType as ARM holds it.
	// +optional
	PrincipalType string `json:"principalType,omitempty"`
	// roleDefinitionId as ARM holds it.
	// +optional
	RoleDefinitionID string `json:"roleDefinitionId,omitempty"`
	// scope as ARM holds it.
	// +optional
	Scope string `json:"scope,omitempty"`
	// type is Microsoft.Authorization/roleAssignments.
	// +optional
	Type string `json:"type,omitempty"`
}

// RoleAssignmentList is a list of RoleAssignment.
// +kubebuilder:object:root=true
type RoleAssignmentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RoleAssignment `json:"items"`
}

func init() { objects = append(objects, &RoleAssignment{}, &RoleAssignmentList{}) }
