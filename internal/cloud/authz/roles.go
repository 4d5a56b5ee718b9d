// Package authz is Azure RBAC for the local cloud: the built-in role definitions with their real
// action sets, role assignments at any scope, and the check "does this principal hold a role that
// grants this action at this scope or above". ARM and Key Vault share it.
package authz

import (
	"strings"
)

// Permission is one permission block of a role definition.
type Permission struct {
	Actions        []string `json:"actions"`
	NotActions     []string `json:"notActions"`
	DataActions    []string `json:"dataActions"`
	NotDataActions []string `json:"notDataActions"`
}

// RoleDefinition is a role: a named set of permissions.
type RoleDefinition struct {
	ID               string       // the GUID, the last segment of its ARM id
	RoleName         string       // e.g. "Owner"
	Description      string       //
	RoleType         string       // "BuiltInRole"
	Permissions      []Permission //
	AssignableScopes []string     //
}

// Built-in role definition ids, as in every Azure tenant.
//
//nolint:gosec // role ids, not credentials
const (
	Owner                   = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"
	Contributor             = "b24988ac-6180-42a0-ab88-20f7382dd24c"
	Reader                  = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
	UserAccessAdministrator = "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9"
	ManagedIdentityOperator = "f1a07417-d97a-45cb-824c-7a7467783830"
	KeyVaultSecretsUser     = "4633458b-17de-408a-b874-0445c86b69e6"
	KeyVaultSecretsOfficer  = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"
	KeyVaultAdministrator   = "00482a5a-887f-4fb3-b363-3b7fe8e74483"

	KeyVaultCryptoOfficer               = "14b46e9e-c2b7-41b4-b07b-48a6ebf60603"
	KeyVaultCryptoUser                  = "12338af0-0e69-4776-bea7-57ae8d297424"
	KeyVaultCryptoServiceEncryptionUser = "e147488a-f6f5-4113-8e2d-b22465e65bf6"
	KeyVaultCertificatesOfficer         = "a4417e6f-fecd-4de8-b567-7b0420556985"
	KeyVaultCertificateUser             = "db79e9a7-68ee-4b58-9aeb-b90e7c24fcba"
)

// keyVaultControlActions are the control-plane reads every Key Vault data role carries.
var keyVaultControlActions = []string{
	"Microsoft.Authorization/*/read",
	"Microsoft.Insights/alertRules/*",
	"Microsoft.Resources/deployments/*",
	"Microsoft.Resources/subscriptions/resourceGroups/read",
	"Microsoft.Support/*",
	"Microsoft.KeyVault/checkNameAvailability/read",
	"Microsoft.KeyVault/deletedVaults/read",
	"Microsoft.KeyVault/locations/*/read",
	"Microsoft.KeyVault/vaults/*/read",
	"Microsoft.KeyVault/operations/read",
}

// builtIns are the built-in roles the local cloud knows, with Azure's action sets.
var builtIns = []RoleDefinition{
	{
		ID: Owner, RoleName: "Owner",
		Description: "Grants full access to manage all resources, including the ability to assign roles in Azure RBAC.",
		Permissions: []Permission{{Actions: []string{"*"}}},
	},
	{
		ID: Contributor, RoleName: "Contributor",
		Description: "Grants full access to manage all resources, but does not allow you to assign roles in Azure RBAC, manage assignments in Azure Blueprints, or share image galleries.",
		Permissions: []Permission{{
			Actions: []string{"*"},
			NotActions: []string{
				"Microsoft.Authorization/*/Delete",
				"Microsoft.Authorization/*/Write",
				"Microsoft.Authorization/elevateAccess/Action",
				"Microsoft.Blueprint/blueprintAssignments/write",
				"Microsoft.Blueprint/blueprintAssignments/delete",
				"Microsoft.Compute/galleries/share/action",
				"Microsoft.Purview/consents/write",
				"Microsoft.Purview/consents/delete",
				"Microsoft.Resources/deploymentStacks/manageDenySetting/action",
				"Microsoft.Subscription/cancel/action",
				"Microsoft.Subscription/enable/action",
			},
		}},
	},
	{
		ID: Reader, RoleName: "Reader",
		Description: "View all resources, but does not allow you to make any changes.",
		Permissions: []Permission{{Actions: []string{"*/read"}}},
	},
	{
		ID: UserAccessAdministrator, RoleName: "User Access Administrator",
		Description: "Lets you manage user access to Azure resources.",
		Permissions: []Permission{{Actions: []string{"*/read", "Microsoft.Authorization/*", "Microsoft.Support/*"}}},
	},
	{
		ID: ManagedIdentityOperator, RoleName: "Managed Identity Operator",
		Description: "Read and Assign User Assigned Identity",
		Permissions: []Permission{{Actions: []string{
			"Microsoft.ManagedIdentity/userAssignedIdentities/*/read",
			"Microsoft.ManagedIdentity/userAssignedIdentities/*/assign/action",
			"Microsoft.Authorization/*/read",
			"Microsoft.Insights/alertRules/*",
			"Microsoft.Resources/subscriptions/resourceGroups/read",
			"Microsoft.Resources/deployments/*",
			"Microsoft.Support/*",
		}}},
	},
	{
		ID: KeyVaultSecretsUser, RoleName: "Key Vault Secrets User",
		Description: "Read secret contents. Only works for key vaults that use the 'Azure role-based access control' permission model.",
		Permissions: []Permission{{DataActions: []string{
			"Microsoft.KeyVault/vaults/secrets/getSecret/action",
			"Microsoft.KeyVault/vaults/secrets/readMetadata/action",
		}}},
	},
	{
		ID: KeyVaultSecretsOfficer, RoleName: "Key Vault Secrets Officer",
		Description: "Perform any action on the secrets of a key vault, except manage permissions. Only works for key vaults that use the 'Azure role-based access control' permission model.",
		Permissions: []Permission{{
			Actions:     keyVaultControlActions,
			DataActions: []string{"Microsoft.KeyVault/vaults/secrets/*"},
		}},
	},
	{
		ID: KeyVaultCryptoOfficer, RoleName: "Key Vault Crypto Officer",
		Description: "Perform any action on the keys of a key vault, except manage permissions. Only works for key vaults that use the 'Azure role-based access control' permission model.",
		Permissions: []Permission{{
			Actions:     keyVaultControlActions,
			DataActions: []string{"Microsoft.KeyVault/vaults/keys/*", "Microsoft.KeyVault/vaults/keyrotationpolicies/*"},
		}},
	},
	{
		ID: KeyVaultCryptoUser, RoleName: "Key Vault Crypto User",
		Description: "Perform cryptographic operations using keys. Only works for key vaults that use the 'Azure role-based access control' permission model.",
		Permissions: []Permission{{DataActions: []string{
			"Microsoft.KeyVault/vaults/keys/read",
			"Microsoft.KeyVault/vaults/keys/update/action",
			"Microsoft.KeyVault/vaults/keys/backup/action",
			"Microsoft.KeyVault/vaults/keys/encrypt/action",
			"Microsoft.KeyVault/vaults/keys/decrypt/action",
			"Microsoft.KeyVault/vaults/keys/wrap/action",
			"Microsoft.KeyVault/vaults/keys/unwrap/action",
			"Microsoft.KeyVault/vaults/keys/sign/action",
			"Microsoft.KeyVault/vaults/keys/verify/action",
		}}},
	},
	{
		ID: KeyVaultCryptoServiceEncryptionUser, RoleName: "Key Vault Crypto Service Encryption User",
		Description: "Read metadata of keys and perform wrap/unwrap operations. Only works for key vaults that use the 'Azure role-based access control' permission model.",
		Permissions: []Permission{{
			Actions: []string{
				"Microsoft.EventGrid/eventSubscriptions/write",
				"Microsoft.EventGrid/eventSubscriptions/read",
				"Microsoft.EventGrid/eventSubscriptions/delete",
			},
			DataActions: []string{
				"Microsoft.KeyVault/vaults/keys/read",
				"Microsoft.KeyVault/vaults/keys/wrap/action",
				"Microsoft.KeyVault/vaults/keys/unwrap/action",
			},
		}},
	},
	{
		ID: KeyVaultCertificatesOfficer, RoleName: "Key Vault Certificates Officer",
		Description: "Perform any action on the certificates of a key vault, excluding reading the secret and key portions, and managing permissions. Only works for key vaults that use the 'Azure role-based access control' permission model.",
		Permissions: []Permission{{
			Actions: keyVaultControlActions,
			DataActions: []string{
				"Microsoft.KeyVault/vaults/certificatecas/*",
				"Microsoft.KeyVault/vaults/certificates/*",
				"Microsoft.KeyVault/vaults/certificatecontacts/write",
			},
		}},
	},
	{
		ID: KeyVaultCertificateUser, RoleName: "Key Vault Certificate User",
		Description: "Read entire certificate contents including secret and key portion. Only works for key vaults that use the 'Azure role-based access control' permission model.",
		Permissions: []Permission{{DataActions: []string{
			"Microsoft.KeyVault/vaults/certificates/read",
			"Microsoft.KeyVault/vaults/secrets/getSecret/action",
			"Microsoft.KeyVault/vaults/secrets/readMetadata/action",
			"Microsoft.KeyVault/vaults/keys/read",
		}}},
	},
	{
		ID: KeyVaultAdministrator, RoleName: "Key Vault Administrator",
		Description: "Perform all data plane operations on a key vault and all objects in it, including certificates, keys, and secrets. Cannot manage key vault resources or manage role assignments. Only works for key vaults that use the 'Azure role-based access control' permission model.",
		Permissions: []Permission{{
			Actions:     keyVaultControlActions,
			DataActions: []string{"Microsoft.KeyVault/vaults/*"},
		}},
	},
}

func init() {
	for i := range builtIns {
		builtIns[i].RoleType = "BuiltInRole"
		builtIns[i].AssignableScopes = []string{"/"}
		for j := range builtIns[i].Permissions {
			p := &builtIns[i].Permissions[j]
			for _, l := range []*[]string{&p.Actions, &p.NotActions, &p.DataActions, &p.NotDataActions} {
				if *l == nil {
					*l = []string{}
				}
			}
		}
	}
}

// BuiltIns returns the built-in role definitions.
func BuiltIns() []RoleDefinition { return append([]RoleDefinition(nil), builtIns...) }

// RoleByID finds a built-in role by its GUID (any case).
func RoleByID(id string) (RoleDefinition, bool) {
	for _, r := range builtIns {
		if strings.EqualFold(r.ID, id) {
			return r, true
		}
	}
	return RoleDefinition{}, false
}

// RoleByName finds a built-in role by its name, case-insensitively, as ASO's wellKnownName does.
func RoleByName(name string) (RoleDefinition, bool) {
	for _, r := range builtIns {
		if strings.EqualFold(r.RoleName, name) {
			return r, true
		}
	}
	return RoleDefinition{}, false
}

// RoleIDFromDefinitionID takes the GUID from a role definition's ARM id
// (".../providers/Microsoft.Authorization/roleDefinitions/{guid}") or a bare GUID.
func RoleIDFromDefinitionID(defID string) string {
	i := strings.LastIndex(defID, "/")
	if i < 0 {
		return defID
	}
	prefix := strings.ToLower(defID[:i])
	if !strings.HasSuffix(prefix, "/providers/microsoft.authorization/roledefinitions") {
		return ""
	}
	return defID[i+1:]
}

// Allows reports whether the role grants the control-plane action.
func (r RoleDefinition) Allows(action string) bool {
	for _, p := range r.Permissions {
		if matchAny(p.Actions, action) && !matchAny(p.NotActions, action) {
			return true
		}
	}
	return false
}

// AllowsData reports whether the role grants the data-plane action.
func (r RoleDefinition) AllowsData(action string) bool {
	for _, p := range r.Permissions {
		if matchAny(p.DataActions, action) && !matchAny(p.NotDataActions, action) {
			return true
		}
	}
	return false
}

func matchAny(patterns []string, action string) bool {
	for _, p := range patterns {
		if Match(p, action) {
			return true
		}
	}
	return false
}

// Match reports whether an action pattern of a role definition matches an action, as Azure does:
// case-insensitively, with '*' matching any run of characters. A "/*/" inside a pattern also
// matches a single "/", so "Microsoft.ManagedIdentity/userAssignedIdentities/*/read" covers
// ".../userAssignedIdentities/read" as well as its children's reads.
func Match(pattern, action string) bool {
	pattern, action = strings.ToLower(pattern), strings.ToLower(action)
	if glob(pattern, action) {
		return true
	}
	return strings.Contains(pattern, "/*/") && glob(strings.ReplaceAll(pattern, "/*/", "/"), action)
}

// glob matches '*' against any run of characters; iterative, linear in practice.
func glob(p, s string) bool {
	px, sx := 0, 0
	star, mark := -1, 0
	for sx < len(s) {
		switch {
		case px < len(p) && p[px] == '*':
			star, mark = px, sx
			px++
		case px < len(p) && p[px] == s[sx]:
			px++
			sx++
		case star >= 0:
			px = star + 1
			mark++
			sx = mark
		default:
			return false
		}
	}
	for px < len(p) && p[px] == '*' {
		px++
	}
	return px == len(p)
}
