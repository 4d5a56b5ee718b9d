package e2e

import (
	"bytes"
	"context"
	"os"
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
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/cerulean/cerulean/internal/rollout"
)

// `cerulean rollout` against the cluster of `up`, with its DIR/env as the environment: the app's
// chart is installed, the in-cluster webhook mutates the app's pod, and the pod, on the real
// node, reads the vault secret with the identity the rollout made (the Azure SDK's
// DefaultAzureCredential in the test-app image, through the projected token). A second run
// changes nothing.
func TestRolloutToUpsClusterRunsTheApp(t *testing.T) {
	if !hasNode(t) {
		t.Skip("the app's pod needs the local node")
	}
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	defer stopAndCheck(t, up, dir, syscall.SIGINT)
	ctx := t.Context()
	kubeconfig := env["KUBECONFIG"]

	// The shared vault and its secret, as the platform team has them before any rollout.
	opts := clientOptions(t, env)
	admin, err := azidentity.NewClientSecretCredential(env["AZURE_TENANT_ID"], env["AZURE_CLIENT_ID"], env["AZURE_CLIENT_SECRET"],
		&azidentity.ClientSecretCredentialOptions{ClientOptions: opts, DisableInstanceDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	armOpts := &arm.ClientOptions{ClientOptions: opts}
	sub := env["AZURE_SUBSCRIPTION_ID"]
	rg, _ := resourceGroupAndName(t, env["CERULEAN_CLUSTER_ID"])
	vaultURI, vaultID := createRBACVault(t, sub, admin, armOpts, rg, env["AZURE_TENANT_ID"])
	adminToken, err := admin.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{armScope(env)}})
	if err != nil {
		t.Fatal(err)
	}
	grant(t, sub, admin, armOpts, vaultID, keyVaultSecretsOfficer, claim(t, adminToken.Token, "oid"))
	const secretValue = "s3cr3t-rollout"
	if _, err := secretsClient(t, vaultURI, admin, opts).SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr(secretValue)}, nil); err != nil {
		t.Fatalf("set secret: %v", err)
	}

	ca, err := os.ReadFile(env["SSL_CERT_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	chart, err := filepath.Abs(filepath.Join("..", "..", "internal", "rollout", "examplechart", "app"))
	if err != nil {
		t.Fatal(err)
	}
	file, err := yaml.Marshal(map[string]any{
		"clusters": []any{map[string]any{"id": env["CERULEAN_CLUSTER_ID"], "kubeconfig": kubeconfig}},
		"keyVault": map[string]any{"id": vaultID, "verifySecret": "db-password"},
		"role":     "Key Vault Secrets User",
		"identity": map[string]any{"suffix": "-app"},
		"app": map[string]any{"chart": chart, "values": map[string]any{
			// The test-app without arguments reads the secret once and exits; the local cloud
			// listens on the node's loopback, hence the host network, and its CA is private.
			"args": []any{}, "hostNetwork": true, "cloudCA": string(ca),
			"vault": map[string]any{"url": vaultURI, "secret": "db-password"},
		}},
		"namespace":      "rollout-app",
		"serviceAccount": "app",
	})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "rollout.yaml")
	if err := os.WriteFile(path, file, 0o600); err != nil {
		t.Fatal(err)
	}
	getenv := func(k string) string { return env[k] }

	var table bytes.Buffer
	if err := rollout.RunCLI(ctx, rollout.CLIOptions{File: path, Getenv: getenv, Out: &table, Progress: &table}); err != nil {
		t.Fatalf("rollout: %v\n%s", err, table.String())
	}
	t.Logf("rollout:\n%s", table.String())

	// The app's pod: mutated by the in-cluster webhook, it reads the secret.
	cs := clientset(t, kubeconfig)
	var logs string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := cs.CoreV1().Pods("rollout-app").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=app"})
		if err != nil || len(pods.Items) == 0 {
			return false, nil
		}
		p := pods.Items[0]
		if !mutated(p) {
			t.Fatalf("the app's pod was not mutated: %+v", p.Spec.Containers[0].Env)
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].RestartCount == 0 && p.Status.ContainerStatuses[0].State.Terminated == nil {
			return false, nil
		}
		out, err := cs.CoreV1().Pods("rollout-app").GetLogs(p.Name, &corev1.PodLogOptions{Previous: p.Status.ContainerStatuses[0].State.Terminated == nil}).DoRaw(ctx)
		logs = string(out)
		return err == nil && strings.Contains(logs, "read secret"), nil
	})
	if err != nil {
		t.Fatalf("the app's pod did not read the secret: %v\n%s", err, logs)
	}
	secretReadLine(t, logs, "db-password", secretValue)

	// Converged: a second run finds every step done.
	table.Reset()
	if err := rollout.RunCLI(ctx, rollout.CLIOptions{File: path, Getenv: getenv, Out: &table}); err != nil {
		t.Fatalf("second rollout: %v\n%s", err, table.String())
	}
	for _, l := range strings.Split(table.String(), "\n") {
		if f := strings.Fields(l); len(f) > 0 && f[0] != "CLUSTER" {
			if got := strings.Join(f[1:], " "); got != "done done done done done done" {
				t.Errorf("second run: %s, want every step done", l)
			}
		}
	}
	if strings.Contains(table.String(), secretValue) {
		t.Error("the secret's value reached the rollout's output")
	}
}

// mutated reports whether the workload identity webhook gave the pod its token file.
func mutated(p corev1.Pod) bool {
	for _, e := range p.Spec.Containers[0].Env {
		if e.Name == "AZURE_FEDERATED_TOKEN_FILE" {
			return true
		}
	}
	return false
}

// keyVaultSecretsOfficer is the built-in role's id: it may read and write secrets.
const keyVaultSecretsOfficer = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"

// createRBACVault creates the rollout's shared vault, RBAC-authorised as a platform team has it.
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

// grant assigns role on scope to principalID through ARM.
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
