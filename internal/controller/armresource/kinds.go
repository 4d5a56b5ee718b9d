package armresource

import (
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cerulean/cerulean/internal/controller/exports"
)

// OwnerRule says where a kind's ARM id hangs.
type OwnerRule int

const (
	// OwnerSubscription means the resource hangs off the subscription (ResourceGroup).
	OwnerSubscription OwnerRule = iota
	// OwnerProvider means {owner}/providers/{type}/{name}, the owner a ResourceGroup.
	OwnerProvider
	// OwnerChild means {owner}/{segment}/{name}, the owner the parent resource.
	OwnerChild
	// OwnerScope means {owner}/providers/{type}/{name}, the owner any resource (a RoleAssignment's scope).
	OwnerScope
	// OwnerByType is the generic kind's: the owner is any resource, and the object's type
	// decides (generic.go): {owner}/providers/{type}/{name} for Namespace/type, else
	// {owner}/{last type segment}/{name}, the owner then a resource of the parent type.
	OwnerByType
)

// Kind is the small per-kind adapter the generic reconciler is given.
type Kind struct {
	// GVK is the served storage version the controller reads and writes.
	GVK schema.GroupVersionKind
	// ARMType and APIVersion address the resource in ARM.
	ARMType    string
	APIVersion string
	// Owner says how the ARM id is built; OwnerKinds are the kinds an owner by name may be
	// (empty for OwnerScope: the reference names its kind).
	Owner      OwnerRule
	OwnerKinds []schema.GroupKind
	// ChildSegment is the path segment under the owner for OwnerChild.
	ChildSegment string
	// Flatten says the kind's spec and status hold ARM's properties at the top level.
	Flatten bool
	// DefaultName is the Azure name when spec.azureName is empty; nil means metadata.name.
	DefaultName func(obj *unstructured.Unstructured) string
	// Prepare resolves kind-specific references in the ARM body (role names).
	Prepare func(ctx context.Context, env *prepareEnv, body map[string]any) error
	// CheckPut may hold a due PUT back (Azure would refuse it: a stopped server); it runs
	// before anything is written, with a cached token. nil means none.
	CheckPut func(ctx context.Context, env *putEnv) error
	// BeforePut adjusts the body just before a PUT, from what Azure holds at that moment (a
	// Vault's createMode). It runs only when a PUT is due and never changes the applied hash,
	// so it costs nothing in the steady state. nil means none.
	BeforePut func(ctx context.Context, env *putEnv, body map[string]any) error
	// Exports lists the operatorSpec configMaps/secrets values from the resource's status.
	Exports func(ctx context.Context, env *exportEnv, obj *unstructured.Unstructured, status map[string]any) ([]exports.Value, error)
	// Exported are the operatorSpec.configMaps and .secrets entries Exports produces; any
	// other entry (of Azure Service Operator's schema) is kept, not exported, and reported.
	Exported Exported
	// SecretValues are the values secretExpressions see as `secret` (a StorageAccount's keys);
	// nil means none. Asked only when the resource has a secretExpression.
	SecretValues func(ctx context.Context, env *exportEnv) (map[string]string, error)
	// SecretInputs are the spec's SecretReference fields (dotted paths) whose Secret values
	// ARM gets in their place (a server's administratorLoginPassword); see secrets.go.
	SecretInputs []string
	// OwnedInKubernetes makes the object owned by its owner object (an ownerReference), as
	// Azure Service Operator does: deleting the owner deletes it.
	OwnedInKubernetes bool
	// PropertyKeys are spec keys other kinds send at the top level that this kind's ARM schema
	// has under properties (a Redis's sku).
	PropertyKeys []string
	// NoDelete says ARM has no DELETE for the kind: deleting the object only releases it.
	NoDelete bool
	// Target, when set, reads the ARM type and api-version from each object instead of ARMType
	// and APIVersion (the generic kind, generic.go); the reconciler's allow-list must admit the type.
	Target func(obj *unstructured.Unstructured) (armType, apiVersion string, err error)
	// SecretAnswer, when set, is what secretExpressions see as `secret`, as JSON (the generic
	// kind's action answer); it replaces SecretValues.
	SecretAnswer func(ctx context.Context, env *exportEnv) (map[string]any, error)
	// DriftIgnore are body paths (dotted) ARM answers in its own form (a Redis's redisVersion
	// "6" reads back "6.0.x"): not compared for drift; a change of the spec still applies them.
	DriftIgnore []string
}

// Groups of the kinds.
const (
	GroupResources        = "resources.azure.com"
	GroupManagedIdentity  = "managedidentity.azure.com"
	GroupKeyVault         = "keyvault.azure.com"
	GroupAuthorization    = "authorization.azure.com"
	GroupStorage          = "storage.azure.com"
	GroupContainerService = "containerservice.azure.com"
)

var (
	identityExports  = []string{"clientId", "principalId", "tenantId"}
	storageEndpoints = []string{"blobEndpoint", "dfsEndpoint", "fileEndpoint", "queueEndpoint", "tableEndpoint", "webEndpoint"}
)

var (
	resourceGroupGK = schema.GroupKind{Group: GroupResources, Kind: "ResourceGroup"}
	identityGK      = schema.GroupKind{Group: GroupManagedIdentity, Kind: "UserAssignedIdentity"}
)

// Kinds are the kinds the manager reconciles.
func Kinds() []Kind {
	return append([]Kind{
		{
			GVK:     schema.GroupVersionKind{Group: GroupResources, Version: "v1api20200601", Kind: "ResourceGroup"},
			ARMType: "Microsoft.Resources/resourceGroups", APIVersion: "2020-06-01",
			Owner: OwnerSubscription,
		},
		{
			GVK:     schema.GroupVersionKind{Group: GroupManagedIdentity, Version: "v1api20230131", Kind: "UserAssignedIdentity"},
			ARMType: "Microsoft.ManagedIdentity/userAssignedIdentities", APIVersion: "2023-01-31",
			Owner: OwnerProvider, OwnerKinds: []schema.GroupKind{resourceGroupGK}, Flatten: true,
			Exports:  statusExports(map[string]string{"clientId": "clientId", "principalId": "principalId", "tenantId": "tenantId"}),
			Exported: Exported{ConfigMaps: identityExports, Secrets: identityExports},
		},
		{
			GVK:     schema.GroupVersionKind{Group: GroupManagedIdentity, Version: "v1api20230131", Kind: "FederatedIdentityCredential"},
			ARMType: "Microsoft.ManagedIdentity/userAssignedIdentities/federatedIdentityCredentials", APIVersion: "2023-01-31",
			Owner: OwnerChild, OwnerKinds: []schema.GroupKind{identityGK}, ChildSegment: "federatedIdentityCredentials", Flatten: true,
		},
		{
			GVK:     schema.GroupVersionKind{Group: GroupKeyVault, Version: "v1api20230701", Kind: "Vault"},
			ARMType: "Microsoft.KeyVault/vaults", APIVersion: "2023-07-01",
			Owner: OwnerProvider, OwnerKinds: []schema.GroupKind{resourceGroupGK},
			BeforePut: vaultCreateMode, DriftIgnore: []string{"properties.createMode"},
		},
		{
			GVK:     schema.GroupVersionKind{Group: GroupAuthorization, Version: "v1api20220401", Kind: "RoleAssignment"},
			ARMType: "Microsoft.Authorization/roleAssignments", APIVersion: "2022-04-01",
			Owner: OwnerScope, Flatten: true,
			DefaultName: roleAssignmentName, Prepare: prepareRoleAssignment,
		},
		{
			GVK:     schema.GroupVersionKind{Group: GroupStorage, Version: "v20250601", Kind: "StorageAccount"},
			ARMType: "Microsoft.Storage/storageAccounts", APIVersion: "2025-06-01",
			Owner: OwnerProvider, OwnerKinds: []schema.GroupKind{resourceGroupGK}, Flatten: true,
			Exports: storageExports, SecretValues: storageKeys,
			Exported: Exported{ConfigMaps: storageEndpoints, Secrets: append([]string{"key1", "key2"}, storageEndpoints...)},
		},
		{
			GVK:     schema.GroupVersionKind{Group: GroupContainerService, Version: "v1api20240901", Kind: "ManagedCluster"},
			ARMType: "Microsoft.ContainerService/managedClusters", APIVersion: "2024-09-01",
			Owner: OwnerProvider, OwnerKinds: []schema.GroupKind{resourceGroupGK}, Flatten: true,
			Exports:  statusExports(map[string]string{"oidcIssuerProfile": "oidcIssuerProfile.issuerURL"}),
			Exported: Exported{ConfigMaps: []string{"oidcIssuerProfile"}}, // not ASO's kubeconfig secrets
			CheckPut: stateCheck{field: "provisioningState", allowed: clusterStates, what: "the ManagedCluster"}.check,
		},
	}, append(serviceKinds(), genericKind())...)
}

// roleAssignmentName is ASO's stable name for an assignment without azureName: a UUIDv5 of
// the object's identity, so a re-created object adopts the same assignment.
func roleAssignmentName(obj *unstructured.Unstructured) string {
	owner, _, _ := unstructured.NestedMap(obj.Object, "spec", "owner")
	seed := strings.Join([]string{obj.GetNamespace(), obj.GetName(), fmt.Sprint(owner["group"]), fmt.Sprint(owner["kind"]), fmt.Sprint(owner["name"]), fmt.Sprint(owner["armId"])}, "/")
	return uuid.NewSHA1(uuid.NameSpaceURL, []byte("cerulean/roleassignment/"+seed)).String()
}

// prepareRoleAssignment turns roleDefinitionReference into roleDefinitionId.
func prepareRoleAssignment(ctx context.Context, env *prepareEnv, body map[string]any) error {
	props, _ := body["properties"].(map[string]any)
	if props == nil {
		return fmt.Errorf("%w: roleDefinitionReference is required", errInvalidSpec)
	}
	ref, _ := props["roleDefinitionReference"].(map[string]any)
	delete(props, "roleDefinitionReference")
	switch {
	case ref["armId"] != nil:
		props["roleDefinitionId"] = ref["armId"]
	case ref["wellKnownName"] != nil:
		id, err := env.roleID(ctx, fmt.Sprint(ref["wellKnownName"]))
		if err != nil {
			return err
		}
		props["roleDefinitionId"] = id
	case ref["name"] != nil:
		id, err := env.referenceID(ctx, fmt.Sprint(ref["group"]), fmt.Sprint(ref["kind"]), fmt.Sprint(ref["name"]))
		if err != nil {
			return err
		}
		props["roleDefinitionId"] = id
	default:
		return fmt.Errorf("%w: roleDefinitionReference needs armId, wellKnownName or name", errInvalidSpec)
	}
	return nil
}

// statusExports exports status fields: operatorSpec.configMaps.X and .secrets.X for each X
// of fields, the value at the status path fields[X].
func statusExports(fields map[string]string) func(context.Context, *exportEnv, *unstructured.Unstructured, map[string]any) ([]exports.Value, error) {
	return func(_ context.Context, _ *exportEnv, obj *unstructured.Unstructured, status map[string]any) ([]exports.Value, error) {
		vals := map[string]string{}
		for name, path := range fields {
			v, _, _ := unstructured.NestedFieldNoCopy(status, strings.Split(path, ".")...)
			if s, ok := v.(string); ok {
				vals[name] = s
			}
		}
		return destinations(obj, vals, vals)
	}
}

// storageExports exports endpoints and, for secrets that ask for them, the account keys.
func storageExports(ctx context.Context, env *exportEnv, obj *unstructured.Unstructured, status map[string]any) ([]exports.Value, error) {
	vals := map[string]string{}
	eps, _, _ := unstructured.NestedMap(status, "primaryEndpoints")
	for _, svc := range []string{"blob", "dfs", "file", "queue", "table", "web"} {
		if s, ok := eps[svc].(string); ok {
			vals[svc+"Endpoint"] = s
		}
	}
	secrets := map[string]string{}
	for k, v := range vals {
		secrets[k] = v
	}
	_, want1, _ := unstructured.NestedMap(obj.Object, "spec", "operatorSpec", "secrets", "key1")
	_, want2, _ := unstructured.NestedMap(obj.Object, "spec", "operatorSpec", "secrets", "key2")
	if want1 || want2 {
		keys, err := env.listKeys(ctx)
		if err != nil {
			return nil, err
		}
		for k, v := range keys {
			secrets[k] = v
		}
	}
	return destinations(obj, vals, secrets)
}

// storageKeys are a storage account's keys (key1, key2), as secretExpressions see them.
func storageKeys(ctx context.Context, env *exportEnv) (map[string]string, error) {
	return env.listKeys(ctx)
}

// destinations maps operatorSpec.configMaps / secrets entries to values.
func destinations(obj *unstructured.Unstructured, configMapVals, secretVals map[string]string) ([]exports.Value, error) {
	var out []exports.Value
	for _, d := range []struct {
		field, kind string
		vals        map[string]string
	}{{"configMaps", "ConfigMap", configMapVals}, {"secrets", "Secret", secretVals}} {
		m, _, _ := unstructured.NestedMap(obj.Object, "spec", "operatorSpec", d.field)
		for _, name := range sortedKeys(m) {
			dest, _ := m[name].(map[string]any)
			v, ok := d.vals[name]
			if !ok {
				return nil, fmt.Errorf("export %s.%s: Azure returned no value for it yet", d.field, name)
			}
			out = append(out, exports.Value{Destination: exports.Destination{Kind: d.kind, Name: fmt.Sprint(dest["name"]), Key: fmt.Sprint(dest["key"])}, Value: v})
		}
	}
	return out, nil
}
