package integration_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cerulean/cerulean/internal/cloud/arm/authorization"
	"github.com/cerulean/cerulean/internal/cloud/arm/compute"
	"github.com/cerulean/cerulean/internal/cloud/arm/containerservice"
	"github.com/cerulean/cerulean/internal/cloud/arm/keyvault"
	"github.com/cerulean/cerulean/internal/cloud/arm/managedidentity"
	"github.com/cerulean/cerulean/internal/cloud/arm/postgresql"
	"github.com/cerulean/cerulean/internal/cloud/arm/redis"
	"github.com/cerulean/cerulean/internal/cloud/arm/resources"
	"github.com/cerulean/cerulean/internal/cloud/arm/storage"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// sdkDefault is the api-version one release of an SDK sends by default for a provider's types.
// Each row was read from the release itself (docs/cloud.md, "Adding an api-version", says how):
// Go from the module's source (`go mod download -json MODULE@VERSION`, then its
// reqQP.Set("api-version", ...) lines), JavaScript from the npm package's dist (`npm pack`,
// then its apiVersion defaults), Python from the published azure-sdk-for-python sources
// (CHANGELOG "is now the default", _metadata.json apiVersion, the newest vYYYY_MM_DD folder of a
// multi-api package, the api_version defaults of a single-api package's operations). Where the
// newest stable Python release's sources could not be read here (azure-mgmt-authorization 4.0.0,
// azure-mgmt-containerservice 41.5.0), the row is the newest release that could: a beta.
type sdkDefault struct {
	sdk, pkg, version string
}

// providerDefaults: every provider the cloud serves, the types a request goes to, and what the
// newest stable SDK releases send.
var providerDefaults = []struct {
	provider string
	types    []string // exact types; an entry without "/" is a whole namespace
	defaults []sdkDefault
}{
	{"subscriptions", []string{resources.SubscriptionType}, []sdkDefault{
		{"Go", "armsubscriptions@v1.3.0", "2022-12-01"},
		{"JavaScript", "@azure/arm-resources-subscriptions@3.0.0", "2022-12-01"},
		{"Python", "azure-mgmt-resource-subscriptions@1.0.0b2 (tag package-subscriptions-2022-12)", "2022-12-01"},
	}},
	{"resources", []string{resources.ResourceGroupType}, []sdkDefault{
		{"Go", "armresources/v4@v4.0.0", "2025-04-01"},
		{"JavaScript", "@azure/arm-resources@8.0.0", "2025-04-01"},
		{"Python", "azure-mgmt-resource (newest resources folder v2025_04_01)", "2025-04-01"},
	}},
	{"managedidentity (msi)", []string{managedidentity.IdentityType, managedidentity.FederatedType}, []sdkDefault{
		{"Go", "armmsi@v1.3.0", "2024-11-30"},
		{"JavaScript", "@azure/arm-msi@2.2.0", "2024-11-30"},
		{"Python", "azure-mgmt-msi@8.0.0 (newest folder v2024_11_30)", "2024-11-30"},
	}},
	{"keyvault", []string{"Microsoft.KeyVault"}, []sdkDefault{
		{"Go", "armkeyvault@v1.5.0", "2024-11-01"},
		{"JavaScript", "@azure/arm-keyvault@5.0.0", "2026-02-01"},
		{"Python", "azure-mgmt-keyvault@14.0.1 (_metadata.json)", "2025-05-01"},
		{".NET", "Azure.ResourceManager.KeyVault@1.5.0 (release notes)", "2026-05-15"},
	}},
	{"authorization (role assignments)", []string{authorization.AssignmentType}, []sdkDefault{
		{"Go", "armauthorization/v2@v2.2.0", "2022-04-01"},
		{"JavaScript", "@azure/arm-authorization@9.0.0", "2022-04-01"},
		{"Python", "azure-mgmt-authorization@5.0.0b2 (operations' api_version defaults)", "2022-04-01"},
	}},
	{"authorization (role definitions)", []string{authorization.DefinitionType}, []sdkDefault{
		{"Go", "armauthorization/v2@v2.2.0", "2022-04-01"},
		{"JavaScript", "@azure/arm-authorization@9.0.0", "2022-04-01"},
		{"Python", "azure-mgmt-authorization@5.0.0b2 (operations' api_version defaults)", "2022-05-01-preview"},
	}},
	{"compute", []string{compute.VirtualMachineType, compute.ScaleSetType}, []sdkDefault{
		{"Go", "armcompute/v8@v8.3.0", "2026-04-01"},
		{"JavaScript", "@azure/arm-compute@25.1.1", "2026-04-01"},
		{"Python", "azure-mgmt-compute@38.3.0 (_metadata.json Compute)", "2026-03-01"},
	}},
	{"containerservice", []string{containerservice.ClusterType}, []sdkDefault{
		{"Go", "armcontainerservice/v6@v6.6.0", "2025-02-01"},
		{"JavaScript", "@azure/arm-containerservice@25.5.0", "2026-06-01"},
		{"Python", "azure-mgmt-containerservice@41.6.0b2 (_metadata.json)", "2026-05-02-preview"},
	}},
	{"storage", []string{storage.AccountType}, []sdkDefault{
		{"Go", "armstorage/v2@v2.0.0", "2025-01-01"},
		{"JavaScript", "@azure/arm-storage@21.0.0", "2026-09-01"},
		{"Python", "azure-mgmt-storage (_metadata.json)", "2025-08-01"},
	}},
	{"postgresql", []string{postgresql.ServerType, postgresql.DatabaseType, postgresql.FirewallType, postgresql.ConfigType}, []sdkDefault{
		{"Go", "armpostgresqlflexibleservers/v5@v5.0.0", "2025-08-01"},
		{"ASO", "azure-service-operator/v2@v2.13.0", "2024-08-01"},
	}},
	{"redis", []string{redis.CacheType, redis.FirewallType}, []sdkDefault{
		{"Go", "armredis/v3@v3.3.0", "2024-11-01"},
		{"ASO", "azure-service-operator/v2@v2.13.0", "2023-08-01"},
	}},
}

// keyVaultDataDefaults are the data-plane (secrets) versions the same SDKs send.
var keyVaultDataDefaults = []sdkDefault{
	{"Go", "azsecrets@v1.5.1", "2026-04-01"},
	{"JavaScript", "@azure/keyvault-secrets@4.12.0", "2026-04-01"},
	{"Python", "azure-keyvault-secrets@4.11.3 (CHANGELOG)", "2025-07-01"},
}

// TestSDKDefaultAPIVersionsAccepted sends, through the real front door, a GET on every route of
// each provider's types with the api-version each SDK release sends by default: none may be
// refused. The routes' example group and identity exist, so lists answer 200 and single
// resources 200 or 404 ResourceNotFound (the provider's handler ran). A version no SDK sends is refused on the same routes, so the check can fail.
func TestSDKDefaultAPIVersionsAccepted(t *testing.T) {
	e := start(t)
	tok := cloudtest.Token(t, e.cred, armScope)
	sub := "/subscriptions/" + e.s.SubscriptionID
	for _, req := range []struct{ path, body string }{
		{sub + "/resourceGroups/rg-example?api-version=2025-04-01", `{"location":"eastus"}`},
		{sub + "/resourceGroups/rg-example/providers/Microsoft.ManagedIdentity/userAssignedIdentities/id-example?api-version=2024-11-30", `{"location":"eastus"}`},
	} {
		if st, _, b := e.do(t, http.MethodPut, req.path, tok, req.body); st != http.StatusCreated {
			t.Fatalf("PUT %s: %d %v", req.path, st, b)
		}
	}
	routes := e.c.ARM().Routes()
	for _, p := range providerDefaults {
		var gets []string // example paths of the provider's GET routes
		lists := false
		for _, rt := range routes {
			if rt.Method == http.MethodGet && typeMatches(p.types, rt.Type) {
				gets = append(gets, strings.ReplaceAll(rt.Example, "{subscriptionId}", e.s.SubscriptionID))
				lists = lists || rt.Collection
			}
		}
		if len(gets) == 0 {
			t.Fatalf("%s: no GET route of %v", p.provider, p.types)
		}
		for _, d := range p.defaults {
			t.Run(p.provider+"/"+d.sdk+"/"+d.version, func(t *testing.T) {
				ok := 0
				for _, path := range gets {
					st, h, b := e.do(t, http.MethodGet, path+"?api-version="+d.version, tok, "")
					switch {
					case st == http.StatusOK:
						ok++
					case st == http.StatusNotFound && (errorCode(b) == "ResourceNotFound" || errorCode(b) == "RoleAssignmentNotFound" || errorCode(b) == "RoleDefinitionDoesNotExist"):
					default:
						t.Errorf("%s (%s) sends %s: GET %s answered %d %s %v", d.pkg, d.sdk, d.version, path, st, h.Get("x-ms-error-code"), b)
					}
				}
				if lists && ok == 0 {
					t.Errorf("%s: no GET of %v answered 200", d.version, gets)
				}
			})
		}
		t.Run(p.provider+"/unknown version refused", func(t *testing.T) {
			st, h, b := e.do(t, http.MethodGet, gets[0]+"?api-version=2099-01-01", tok, "")
			wantARMError(t, st, h, b, http.StatusBadRequest, "InvalidApiVersionParameter")
		})
	}
}

// TestSDKDefaultKeyVaultDataVersionsAccepted does the same for a vault's data plane: listing
// secrets with each SDK's default version answers 200.
func TestSDKDefaultKeyVaultDataVersionsAccepted(t *testing.T) {
	e := start(t)
	tok := cloudtest.Token(t, e.cred, armScope)
	rg := e.rgID("rg-kv-versions")
	if st, _, b := e.do(t, http.MethodPut, rg+"?api-version=2025-04-01", tok, `{"location":"eastus"}`); st != http.StatusCreated {
		t.Fatalf("create group: %d %v", st, b)
	}
	body := `{"location":"eastus","properties":{"tenantId":"` + e.s.TenantID + `","sku":{"family":"A","name":"standard"},` +
		`"accessPolicies":[{"tenantId":"` + e.s.TenantID + `","objectId":"` + e.s.ObjectID + `","permissions":{"secrets":["list"]}}]}}`
	st, _, b := e.do(t, http.MethodPut, rg+"/providers/Microsoft.KeyVault/vaults/kv-versions?api-version="+keyvault.Versions[len(keyvault.Versions)-1], tok, body)
	if st != http.StatusCreated {
		t.Fatalf("create vault: %d %v", st, b)
	}
	vaultURI, _ := b["properties"].(map[string]any)["vaultUri"].(string)
	if vaultURI == "" {
		t.Fatalf("no vaultUri in %v", b)
	}
	kvTok := cloudtest.Token(t, e.cred, "https://vault.azure.net/.default")
	for _, d := range keyVaultDataDefaults {
		t.Run(d.sdk+"/"+d.version, func(t *testing.T) {
			if st, _, b := e.do(t, http.MethodGet, vaultURI+"secrets?api-version="+d.version, kvTok, ""); st != http.StatusOK {
				t.Errorf("%s (%s) sends %s: list secrets answered %d %v", d.pkg, d.sdk, d.version, st, b)
			}
		})
	}
	if st, _, b := e.do(t, http.MethodGet, vaultURI+"secrets?api-version=2024-01-01", kvTok, ""); st != http.StatusBadRequest || errorCode(b) != "BadParameter" {
		t.Errorf("an unknown data-plane version: %d %v, want 400 BadParameter", st, b)
	}
}

func typeMatches(types []string, typ string) bool {
	for _, want := range types {
		if strings.EqualFold(want, typ) || (!strings.Contains(want, "/") && strings.HasPrefix(strings.ToLower(typ), strings.ToLower(want)+"/")) {
			return true
		}
	}
	return false
}
