package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
)

// The workload identity flow on the whole system: `up` registers its cluster in the local cloud
// with the control plane's issuer; a managed identity trusts that issuer for one service account;
// that service account's projected-style token from kube-apiserver is exchanged for an access
// token, and another service account's is refused. As root, the same runs as a real pod.
func TestWorkloadIdentityFederationAgainstTheLocalCluster(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	defer stopAndCheck(t, up, dir, syscall.SIGINT)
	ctx := t.Context()
	kubeconfig := env["KUBECONFIG"]

	issuer := env["CERULEAN_OIDC_ISSUER"]
	server := kubectl(t, kubeconfig, "config", "view", "-o", "jsonpath={.clusters[0].cluster.server}")
	if issuer != server {
		t.Fatalf("CERULEAN_OIDC_ISSUER=%q, want the control plane's issuer %q", issuer, server)
	}

	opts := clientOptions(t, env)
	admin, err := azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	armOpts := &arm.ClientOptions{ClientOptions: opts}
	sub := env["AZURE_SUBSCRIPTION_ID"]

	// The cluster id in DIR/env names a cluster whose issuer ARM reports as the control plane's.
	clusters, err := armcontainerservice.NewManagedClustersClient(sub, admin, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	rg, name := resourceGroupAndName(t, env["CERULEAN_CLUSTER_ID"])
	mc, err := clusters.Get(ctx, rg, name, nil)
	if err != nil {
		t.Fatalf("get cluster %s: %v", env["CERULEAN_CLUSTER_ID"], err)
	}
	if got := *mc.Properties.OidcIssuerProfile.IssuerURL; got != issuer {
		t.Errorf("cluster issuerURL %q, want %q", got, issuer)
	}
	if !*mc.Properties.SecurityProfile.WorkloadIdentity.Enabled {
		t.Error("workload identity is not enabled on the cluster")
	}

	identities, err := armmsi.NewUserAssignedIdentitiesClient(sub, admin, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := identities.CreateOrUpdate(ctx, rg, "e2e-app", armmsi.Identity{Location: to.Ptr("local")}, nil)
	if err != nil {
		t.Fatalf("create identity: %v", err)
	}
	fics, err := armmsi.NewFederatedIdentityCredentialsClient(sub, admin, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = fics.CreateOrUpdate(ctx, rg, "e2e-app", "default-sa", armmsi.FederatedIdentityCredential{
		Properties: &armmsi.FederatedIdentityCredentialProperties{
			Issuer:    to.Ptr(issuer),
			Subject:   to.Ptr("system:serviceaccount:default:default"),
			Audiences: []*string{to.Ptr("api://AzureADTokenExchange")},
		},
	}, nil)
	if err != nil {
		t.Fatalf("create federated credential: %v", err)
	}

	// workload is the credential an app in the pod builds: its service account's token, exchanged.
	workload := func(serviceAccount string) *azidentity.ClientAssertionCredential {
		cred, err := azidentity.NewClientAssertionCredential(env["AZURE_TENANT_ID"], *mi.Properties.ClientID,
			func(context.Context) (string, error) {
				return kubectl(t, kubeconfig, "create", "token", serviceAccount, "--audience", "api://AzureADTokenExchange"), nil
			},
			&azidentity.ClientAssertionCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
		if err != nil {
			t.Fatal(err)
		}
		return cred
	}
	exchange := func(serviceAccount string) (string, error) {
		tok, err := workload(serviceAccount).GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{armScope(env)}})
		return tok.Token, err
	}

	token, err := exchange("default")
	if err != nil {
		t.Fatalf("exchange the default service account's token: %v", err)
	}
	if mirid := claim(t, token, "xms_mirid"); !strings.EqualFold(mirid, *mi.ID) {
		t.Errorf("xms_mirid %q, want the identity %q", mirid, *mi.ID)
	}

	// The flow's purpose: the workload reads a Key Vault secret its identity is granted, and only then.
	vaultURI, vaultID := createRBACVault(t, sub, admin, armOpts, rg, env["AZURE_TENANT_ID"])
	adminToken, err := admin.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{armScope(env)}})
	if err != nil {
		t.Fatal(err)
	}
	// Owner of the subscription grants no data access, as in Azure: the admin needs a data role too.
	grant(t, sub, admin, armOpts, vaultID, keyVaultSecretsOfficer, claim(t, adminToken.Token, "oid"))
	adminSecrets := secretsClient(t, vaultURI, admin, opts)
	if _, err := adminSecrets.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr("s3cr3t-e2e")}, nil); err != nil {
		t.Fatalf("set secret as the admin: %v", err)
	}
	appSecrets := secretsClient(t, vaultURI, workload("default"), opts)
	if _, err := appSecrets.GetSecret(ctx, "db-password", "", nil); !isForbidden(err) {
		t.Fatalf("the workload read the secret before any role was assigned: %v", err)
	}
	grant(t, sub, admin, armOpts, vaultID, keyVaultSecretsUser, *mi.Properties.PrincipalID)
	got, err := appSecrets.GetSecret(ctx, "db-password", "", nil)
	if err != nil {
		t.Fatalf("the workload reads the secret after Key Vault Secrets User: %v", err)
	}
	if *got.Value != "s3cr3t-e2e" {
		t.Errorf("secret value %q", *got.Value)
	}

	// The same, as a real pod on the node: the projected token the kubelet writes, exchanged by
	// the Azure SDK's DefaultAzureCredential in the test-app image; and, beside it, a pod that
	// uses a client secret given as env from a Kubernetes Secret.
	if hasNode(t) {
		cs := clientset(t, kubeconfig)
		caConfigMap(t, cs, env)
		logs := runToCompletion(t, cs, kubeconfig, workloadIdentityPod("wi-app", vaultURI, "db-password", *mi.Properties.ClientID, env))
		secretReadLine(t, logs, "db-password", "s3cr3t-e2e")
		logs = runToCompletion(t, cs, kubeconfig, clientSecretPod(t, cs, "sp-app", vaultURI, "db-password", env))
		secretReadLine(t, logs, "db-password", "s3cr3t-e2e")
	}

	// The manager under `up` serves the webhook on loopback, registered by URL: a labelled pod of
	// an annotated service account is mutated at creation with this cloud's settings.
	kubectl(t, kubeconfig, "create", "serviceaccount", "app")
	kubectl(t, kubeconfig, "annotate", "serviceaccount", "app", "azure.workload.identity/client-id="+*mi.Properties.ClientID)
	podEnv := waitMutatedPod(t, kubeconfig)
	for k, want := range map[string]string{
		"AZURE_CLIENT_ID": *mi.Properties.ClientID, "AZURE_TENANT_ID": env["AZURE_TENANT_ID"],
		"AZURE_AUTHORITY_HOST": env["AZURE_AUTHORITY_HOST"], "AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/azure/tokens/azure-identity-token",
	} {
		if podEnv[k] != want {
			t.Errorf("mutated pod: %s=%q, want %q", k, podEnv[k], want)
		}
	}

	kubectl(t, kubeconfig, "create", "serviceaccount", "other")
	if _, err := exchange("other"); err == nil || !strings.Contains(err.Error(), "AADSTS70021") && !strings.Contains(err.Error(), "AADSTS700213") {
		t.Errorf("a service account the identity does not trust: err=%v, want AADSTS70021/700213", err)
	}
}

// Built-in role definition ids (Azure's).
const (
	keyVaultSecretsUser    = "4633458b-17de-408a-b874-0445c86b69e6"
	keyVaultSecretsOfficer = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"
)

func createRBACVault(t *testing.T, sub string, cred azcore.TokenCredential, opts *arm.ClientOptions, rg, tenant string) (uri, id string) {
	t.Helper()
	vaults, err := armkeyvault.NewVaultsClient(sub, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	name := "e2e" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	poller, err := vaults.BeginCreateOrUpdate(t.Context(), rg, name, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("local"),
		Properties: &armkeyvault.VaultProperties{
			TenantID:                to.Ptr(tenant),
			SKU:                     &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
			EnableRbacAuthorization: to.Ptr(true),
		},
	}, nil)
	if err != nil {
		t.Fatalf("create vault: %v", err)
	}
	v, err := poller.PollUntilDone(t.Context(), nil)
	if err != nil {
		t.Fatalf("create vault: %v", err)
	}
	return *v.Properties.VaultURI, *v.ID
}

func grant(t *testing.T, sub string, cred azcore.TokenCredential, opts *arm.ClientOptions, scope, role, principalID string) {
	t.Helper()
	c, err := armauthorization.NewRoleAssignmentsClient(sub, cred, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Create(t.Context(), scope, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr("/subscriptions/" + sub + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
			PrincipalID:      to.Ptr(principalID),
			PrincipalType:    to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		},
	}, nil)
	if err != nil {
		t.Fatalf("assign role %s: %v", role, err)
	}
}

// secretsClient is what an app on the local cloud builds: challenge resource verification off,
// because a vault on 127.0.0.1 cannot end in .vault.azure.net.
func secretsClient(t *testing.T, vaultURI string, cred azcore.TokenCredential, opts azcore.ClientOptions) *azsecrets.Client {
	t.Helper()
	c, err := azsecrets.NewClient(vaultURI, cred, &azsecrets.ClientOptions{ClientOptions: opts, DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func isForbidden(err error) bool {
	var re *azcore.ResponseError
	return errors.As(err, &re) && re.StatusCode == http.StatusForbidden
}

func resourceGroupAndName(t *testing.T, id string) (string, string) {
	t.Helper()
	parts := strings.Split(id, "/")
	if len(parts) != 9 || !strings.EqualFold(parts[3], "resourceGroups") {
		t.Fatalf("%q is not a resource id in a group", id)
	}
	return parts[4], parts[8]
}

// claim reads one string claim of a JWT without verifying it: the cloud's own tests verify.
func claim(t *testing.T, token, name string) string {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("access token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("decode token payload: %v", err)
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatalf("decode token claims: %v", err)
	}
	s, _ := claims[name].(string)
	return s
}

// waitMutatedPod creates a labelled pod of service account app until the webhook, registered by
// the manager moments after `up` is ready, mutates it; it returns the pod's container env.
func waitMutatedPod(t *testing.T, kubeconfig string) map[string]string {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), "pod.json")
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"app","labels":{"azure.workload.identity/use":"true"}},` +
		`"spec":{"serviceAccountName":"app","containers":[{"name":"app","image":"app"}]}}`
	if err := os.WriteFile(manifest, []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.Command(binary(t, "kubectl"), "--kubeconfig", kubeconfig, "create", "--dry-run=server", "-o", "json", "-f", manifest).CombinedOutput()
		if err == nil && strings.Contains(string(out), "azure-identity-token") {
			var p struct {
				Spec struct {
					Containers []struct {
						Env []struct{ Name, Value string }
					}
				}
			}
			if err := json.Unmarshal(out, &p); err != nil {
				t.Fatal(err)
			}
			m := map[string]string{}
			for _, e := range p.Spec.Containers[0].Env {
				m[e.Name] = e.Value
			}
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("the pod is not mutated: %v\n%s", err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
