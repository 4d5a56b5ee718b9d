package armresource

import (
	"context"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cerulean/cerulean/internal/controller/exports"
)

// +kubebuilder:rbac:groups=dbforpostgresql.azure.com;cache.azure.com,resources=*,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=dbforpostgresql.azure.com;cache.azure.com,resources=*/status,verbs=get;update;patch

// Groups of the apps' services.
const (
	GroupPostgreSQL = "dbforpostgresql.azure.com"
	GroupCache      = "cache.azure.com"
)

var (
	flexibleServerGK = schema.GroupKind{Group: GroupPostgreSQL, Kind: "FlexibleServer"}
	redisGK          = schema.GroupKind{Group: GroupCache, Kind: "Redis"}
	storageAccountGK = schema.GroupKind{Group: GroupStorage, Kind: "StorageAccount"}
	blobServiceGK    = schema.GroupKind{Group: GroupStorage, Kind: "StorageAccountsBlobService"}
	queueServiceGK   = schema.GroupKind{Group: GroupStorage, Kind: "StorageAccountsQueueService"}
	tableServiceGK   = schema.GroupKind{Group: GroupStorage, Kind: "StorageAccountsTableService"}
)

// serviceKinds are the kinds of the services apps consume: PostgreSQL, Redis and storage
// children. Each is owned by its owner object in Kubernetes too (deleting a server deletes
// its databases' objects, as Azure deletes the databases).
func serviceKinds() []Kind {
	pg := func(kind, armType, segment string) Kind {
		return Kind{
			GVK:     schema.GroupVersionKind{Group: GroupPostgreSQL, Version: "v1api20250801", Kind: kind},
			ARMType: "Microsoft.DBforPostgreSQL/flexibleServers/" + armType, APIVersion: "2025-08-01",
			Owner: OwnerChild, OwnerKinds: []schema.GroupKind{flexibleServerGK}, ChildSegment: segment, Flatten: true,
			OwnedInKubernetes: true,
			CheckPut:          stateCheck{field: "state", allowed: flexibleServerStates, parent: true, what: "the owning FlexibleServer"}.check,
		}
	}
	storage := func(kind, armType, segment string, owner schema.GroupKind, defaultName bool) Kind {
		k := Kind{
			GVK:     schema.GroupVersionKind{Group: GroupStorage, Version: "v20250601", Kind: kind},
			ARMType: "Microsoft.Storage/storageAccounts/" + armType, APIVersion: "2025-06-01",
			Owner: OwnerChild, OwnerKinds: []schema.GroupKind{owner}, ChildSegment: segment, Flatten: true,
			OwnedInKubernetes: true,
		}
		if defaultName { // a storage account has one service of each type, named default
			k.DefaultName = func(*unstructured.Unstructured) string { return "default" }
			// ARM has no DELETE of an account's service (its settings go with the account): a
			// DELETE answers 405, and a service's object would never go with its account.
			k.NoDelete = true
		}
		return k
	}
	configuration := pg("FlexibleServersConfiguration", "configurations", "configurations")
	configuration.NoDelete = true // ARM has no DELETE of a server parameter
	return []Kind{
		{
			GVK:     schema.GroupVersionKind{Group: GroupPostgreSQL, Version: "v1api20250801", Kind: "FlexibleServer"},
			ARMType: "Microsoft.DBforPostgreSQL/flexibleServers", APIVersion: "2025-08-01",
			Owner: OwnerProvider, OwnerKinds: []schema.GroupKind{resourceGroupGK}, Flatten: true,
			OwnedInKubernetes: true, SecretInputs: []string{"administratorLoginPassword"},
			CheckPut: stateCheck{field: "state", allowed: flexibleServerStates, what: "the FlexibleServer"}.check,
			Exports:  statusExports(map[string]string{"fullyQualifiedDomainName": "fullyQualifiedDomainName"}),
			Exported: Exported{ConfigMaps: []string{"fullyQualifiedDomainName"}, Secrets: []string{"fullyQualifiedDomainName"}},
		},
		pg("FlexibleServersDatabase", "databases", "databases"),
		pg("FlexibleServersFirewallRule", "firewallRules", "firewallRules"),
		configuration,
		{
			GVK:     schema.GroupVersionKind{Group: GroupCache, Version: "v1api20241101", Kind: "Redis"},
			ARMType: "Microsoft.Cache/redis", APIVersion: "2024-11-01",
			Owner: OwnerProvider, OwnerKinds: []schema.GroupKind{resourceGroupGK}, Flatten: true,
			OwnedInKubernetes: true, Exports: redisExports, SecretValues: redisKeys,
			Exported:    Exported{Secrets: []string{"hostName", "port", "sslPort", "primaryKey", "secondaryKey"}},
			DriftIgnore: []string{"properties.redisVersion"}, PropertyKeys: []string{"sku"},
		},
		{
			GVK:     schema.GroupVersionKind{Group: GroupCache, Version: "v1api20241101", Kind: "RedisFirewallRule"},
			ARMType: "Microsoft.Cache/redis/firewallRules", APIVersion: "2024-11-01",
			Owner: OwnerChild, OwnerKinds: []schema.GroupKind{redisGK}, ChildSegment: "firewallRules", Flatten: true,
			OwnedInKubernetes: true,
		},
		storage("StorageAccountsBlobService", "blobServices", "blobServices", storageAccountGK, true),
		storage("StorageAccountsBlobServicesContainer", "blobServices/containers", "containers", blobServiceGK, false),
		storage("StorageAccountsQueueService", "queueServices", "queueServices", storageAccountGK, true),
		storage("StorageAccountsQueueServicesQueue", "queueServices/queues", "queues", queueServiceGK, false),
		storage("StorageAccountsTableService", "tableServices", "tableServices", storageAccountGK, true),
		storage("StorageAccountsTableServicesTable", "tableServices/tables", "tables", tableServiceGK, false),
	}
}

// redisExports exports Azure Service Operator's Redis secrets: hostName, port, sslPort from
// the status, and the access keys (asked of ARM only when a secret wants one).
func redisExports(ctx context.Context, env *exportEnv, obj *unstructured.Unstructured, status map[string]any) ([]exports.Value, error) {
	vals := map[string]string{}
	if s, ok := status["hostName"].(string); ok {
		vals["hostName"] = s
	}
	for _, k := range []string{"port", "sslPort"} {
		if n, ok := number(status[k]); ok {
			vals[k] = strconv.FormatInt(n, 10)
		}
	}
	_, want1, _ := unstructured.NestedMap(obj.Object, "spec", "operatorSpec", "secrets", "primaryKey")
	_, want2, _ := unstructured.NestedMap(obj.Object, "spec", "operatorSpec", "secrets", "secondaryKey")
	if want1 || want2 {
		keys, err := redisKeys(ctx, env)
		if err != nil {
			return nil, err
		}
		for k, v := range keys {
			vals[k] = v
		}
	}
	return destinations(obj, nil, vals)
}

// redisKeys are a cache's access keys (primaryKey, secondaryKey), from ARM's listKeys.
func redisKeys(ctx context.Context, env *exportEnv) (map[string]string, error) {
	res, err := env.reader.post(ctx, env.id+"/listKeys", env.apiVersion)
	if err != nil {
		return nil, fmt.Errorf("list keys: %w", err)
	}
	out := map[string]string{}
	for _, k := range []string{"primaryKey", "secondaryKey"} {
		if s, ok := res[k].(string); ok {
			out[k] = s
		}
	}
	return out, nil
}

// number reads a JSON number (float64 from ARM, int64 from the API server).
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case float64:
		return int64(n), true
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}
