package armresource

import (
	"reflect"
	"testing"
)

func TestSecretInputsLandInTheBodyNotTheStatus(t *testing.T) {
	spec := map[string]any{
		"location": "westus2", "owner": map[string]any{"name": "rg"}, "administratorLogin": "admin",
		"administratorLoginPassword": map[string]any{"name": "pg-admin", "key": "password"},
	}
	refs := secretInputRefs(spec, []string{"administratorLoginPassword", "absent"})
	if want := map[string][2]string{"administratorLoginPassword": {"pg-admin", "password"}}; !reflect.DeepEqual(refs, want) {
		t.Fatalf("refs = %v, want %v", refs, want)
	}
	if got := bodyPath("administratorLoginPassword", true); !reflect.DeepEqual(got, []string{"properties", "administratorLoginPassword"}) {
		t.Errorf("flattened body path = %v", got)
	}
	if got := bodyPath("identity.x", true); !reflect.DeepEqual(got, []string{"identity", "x"}) {
		t.Errorf("top-level body path = %v", got)
	}
	status := map[string]any{"administratorLogin": "admin", "administratorLoginPassword": "s3cret", "state": "Ready"}
	scrubSecretInputs(status, []string{"administratorLoginPassword"})
	if _, ok := status["administratorLoginPassword"]; ok || status["state"] != "Ready" {
		t.Errorf("status after scrub = %v", status)
	}
}

func TestServiceKindsAddressARMAsASO(t *testing.T) {
	byKind := map[string]Kind{}
	for _, k := range Kinds() {
		if _, dup := byKind[k.GVK.Kind]; dup {
			t.Fatalf("kind %s twice", k.GVK.Kind)
		}
		byKind[k.GVK.Kind] = k
	}
	for kind, want := range map[string]string{
		"FlexibleServer":                       "flexibleServers",
		"FlexibleServersDatabase":              "databases",
		"FlexibleServersFirewallRule":          "firewallRules",
		"FlexibleServersConfiguration":         "configurations",
		"Redis":                                "redis",
		"RedisFirewallRule":                    "firewallRules",
		"StorageAccountsBlobService":           "blobServices",
		"StorageAccountsBlobServicesContainer": "containers",
		"StorageAccountsQueueService":          "queueServices",
		"StorageAccountsQueueServicesQueue":    "queues",
		"StorageAccountsTableService":          "tableServices",
		"StorageAccountsTableServicesTable":    "tables",
	} {
		k, ok := byKind[kind]
		if !ok {
			t.Errorf("%s not served", kind)
			continue
		}
		seg := k.ChildSegment
		if k.Owner == OwnerProvider {
			seg = k.ARMType[len(k.ARMType)-len(want):]
		}
		if seg != want {
			t.Errorf("%s: segment %q, want %q", kind, seg, want)
		}
		if !k.OwnedInKubernetes {
			t.Errorf("%s: not owned by its owner object", kind)
		}
		for _, o := range k.OwnerKinds {
			if _, ok := servedGVK(o.Group, o.Kind); !ok {
				t.Errorf("%s: owner %s not served", kind, o)
			}
		}
	}
	for _, svc := range []string{"StorageAccountsBlobService", "StorageAccountsQueueService", "StorageAccountsTableService"} {
		if n := byKind[svc].DefaultName(nil); n != "default" {
			t.Errorf("%s Azure name %q, want default", svc, n)
		}
	}
}

func TestNumberReadsBothDecoders(t *testing.T) {
	for _, v := range []any{float64(6380), int64(6380), 6380} {
		if n, ok := number(v); !ok || n != 6380 {
			t.Errorf("number(%T) = %d, %v", v, n, ok)
		}
	}
	if _, ok := number("6380"); ok {
		t.Error("a string is no number")
	}
}

// A Redis's redisVersion ("6") reads back in ARM's form ("6.0.20"): no drift, so no PUT each sync.
func TestRedisVersionIsNoDrift(t *testing.T) {
	var redis Kind
	for _, k := range Kinds() {
		if k.GVK.Kind == "Redis" {
			redis = k
		}
	}
	body := map[string]any{"location": "westus2", "properties": map[string]any{"redisVersion": "6", "enableNonSslPort": false}}
	res := map[string]any{"location": "westus2", "properties": map[string]any{"redisVersion": "6.0.20", "enableNonSslPort": false}}
	if where := drifted(withoutPaths(body, redis.DriftIgnore), res); where != "" {
		t.Errorf("drift at %s", where)
	}
	if _, still := body["properties"].(map[string]any)["redisVersion"]; !still {
		t.Error("withoutPaths changed the body it was given")
	}
	res["properties"].(map[string]any)["enableNonSslPort"] = true
	if where := drifted(withoutPaths(body, redis.DriftIgnore), res); where != "properties.enableNonSslPort" {
		t.Errorf("drift at %q, want properties.enableNonSslPort", where)
	}
}
