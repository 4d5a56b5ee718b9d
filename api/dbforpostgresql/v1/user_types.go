package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cerulean/cerulean/api/shared"
)

// User is a PostgreSQL role inside a FlexibleServer, created by the manager over a
// connection to the server with the administrator's credentials (as Azure Service Operator's
// v1 User), not through ARM.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:storageversion
// +kubebuilder:resource:categories={azure,dbforpostgresql}
// +kubebuilder:printcolumn:name="Ready",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].status"
// +kubebuilder:printcolumn:name="Severity",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].severity"
// +kubebuilder:printcolumn:name="Reason",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].reason"
// +kubebuilder:printcolumn:name="Message",type="string",JSONPath=".status.conditions[?(@.type=='Ready')].message"
type User struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   UserSpec   `json:"spec,omitempty"`
	Status UserStatus `json:"status,omitempty"`
}

// UserSpec is the desired role.
type UserSpec struct {
	// azureName is the role's name in PostgreSQL; empty means metadata.name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_$-]*$`
	AzureName string `json:"azureName,omitempty"`
	// owner is the FlexibleServer the role lives in.
	// +required
	Owner shared.KnownResourceReference `json:"owner"`
	// roles are the roles the user is granted (e.g. azure_pg_admin); roles granted earlier
	// and no longer listed are revoked.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	Roles []string `json:"roles,omitempty"`
	// roleOptions are the role's attributes.
	// +optional
	// +kubebuilder:default={login: true}
	RoleOptions *RoleOptionsSpec `json:"roleOptions,omitempty"`
	// localUser is a password-authenticated role and how to reach the server as its
	// administrator.
	// +required
	LocalUser *LocalUserSpec `json:"localUser"`
}

// LocalUserSpec is a standard (non-Entra) PostgreSQL role.
type LocalUserSpec struct {
	// serverAdminUsername is the server's administrator login.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	ServerAdminUsername string `json:"serverAdminUsername"`
	// serverAdminPassword is the administrator's password, from a Secret in this namespace.
	// +required
	ServerAdminPassword *shared.SecretReference `json:"serverAdminPassword"`
	// password is the user's password, from a Secret in this namespace; a change of the
	// Secret changes the role's password.
	// +required
	Password *shared.SecretReference `json:"password"`
}

// RoleOptionsSpec are a role's attributes (CREATE ROLE ... WITH).
type RoleOptionsSpec struct {
	// login is WITH LOGIN (default) or NOLOGIN.
	// +optional
	Login bool `json:"login,omitempty"`
	// createRole is WITH CREATEROLE or NOCREATEROLE (default).
	// +optional
	CreateRole bool `json:"createRole,omitempty"`
	// createDb is WITH CREATEDB or NOCREATEDB (default).
	// +optional
	CreateDb bool `json:"createDb,omitempty"`
	// replication is WITH REPLICATION or NOREPLICATION (default).
	// +optional
	Replication bool `json:"replication,omitempty"`
}

// UserStatus holds the Ready condition.
type UserStatus struct {
	// conditions holds Ready.
	// +optional
	Conditions []shared.Condition `json:"conditions,omitempty"`
}

// UserList is a list of User.
// +kubebuilder:object:root=true
type UserList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []User `json:"items"`
}

func init() { objects = append(objects, &User{}, &UserList{}) }
