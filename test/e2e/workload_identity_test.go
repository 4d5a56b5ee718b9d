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
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/containerservice/armcontainerservice/v6"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/images"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
)

// The workload identity flow on the whole system, declared as a user declares it: `up` registers
// its cluster in the local cloud with the control plane's issuer; the Azure side (a resource
// group, a managed identity exporting its ids to a ConfigMap, its federated credential for the
// service account shop/app, an RBAC vault and Key Vault Secrets User on it) is manifests that the
// manager reconciles; the annotated service account's labelled pod is mutated by the webhook.
// The test then does what kubelet and app do (a TokenRequest with the volume's audience and
// expiry, written where AZURE_FEDERATED_TOKEN_FILE points; the Azure SDK's
// WorkloadIdentityCredential from the pod's env) and reads the secret. As root the same runs as
// real pods on the node (and pod identity's, in the same up, while the kubelet refreshes a
// token). Last, each way it breaks is refused with the AADSTS code users see, and `cerulean
// doctor` names the failing step with exit code 1.
func TestWorkloadIdentityFromManifestsUnderUp(t *testing.T) {
	dir := t.TempDir()
	up := startUp(t, dir)
	env := waitForEnv(t, up, dir)
	ctx := t.Context()
	kubeconfig := env["KUBECONFIG"]
	node := hasNode(t)
	if node {
		t.Cleanup(func() {
			if t.Failed() {
				b, _ := os.ReadFile(filepath.Join(dir, "logs", "node-agent.log"))
				t.Logf("the node agent's log:\n%s", b)
			}
		})
	}

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

	// The Azure side, as manifests. The bootstrap principal (Owner of the subscription, which
	// grants no data access, as in Azure) gets Key Vault Secrets Officer to put the secret.
	adminToken, err := admin.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{armScope(env)}})
	if err != nil {
		t.Fatal(err)
	}
	const ns = "shop"
	vaultName := "shop" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	kubectl(t, kubeconfig, "create", "namespace", ns)
	grantNamespace(t, kubeconfig, ns)
	manifests := wiManifests(ns, issuer, vaultName, claim(t, adminToken.Token, "oid"))
	apply(t, kubeconfig, manifests)
	kubectl(t, kubeconfig, "wait", "-n", ns, "--for=condition=Ready", "--timeout=3m",
		"resourcegroups,userassignedidentities,federatedidentitycredentials,vaults,roleassignments", "--all")
	clientID := kubectl(t, kubeconfig, "get", "-n", ns, "configmap", "shop-identity", "-o", "jsonpath={.data.clientId}")
	vaultURI := kubectl(t, kubeconfig, "get", "-n", ns, "vault", "shop-vault", "-o", "jsonpath={.status.properties.vaultUri}")
	vaultID := kubectl(t, kubeconfig, "get", "-n", ns, "vault", "shop-vault", "-o", "jsonpath={.status.id}")
	if clientID == "" || vaultURI == "" || vaultID == "" {
		t.Fatalf("exports: clientId %q, vaultUri %q, id %q", clientID, vaultURI, vaultID)
	}
	adminSecrets := secretsClient(t, vaultURI, admin, opts)
	if _, err := adminSecrets.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr(secretValue)}, nil); err != nil {
		t.Fatalf("set secret as the admin: %v", err)
	}
	apply(t, kubeconfig, serviceAccounts(ns, clientID))
	cs := clientset(t, kubeconfig)
	waitWebhook(t, kubeconfig, ns)

	// As root: the app as a real pod on the node, reading the secret every 10 s through the
	// cloud's proxy for pods, with the token the kubelet projects and refreshes.
	var refresh *refreshingPod
	var podEnv map[string]string
	if node {
		podEnv = readPodEnv(t, dir)
		caConfigMap(t, cs, env, ns)
		refresh = startRefreshingPod(t, cs, ns, vaultName, podEnv)
	}

	// What kubelet and app do, on any machine: the mutated pod's token through TokenRequest.
	wi := &wiFlow{t: t, cs: cs, env: env, ns: ns, vaultURI: vaultURI}
	pod := wi.createPod("shop-tr", "app")
	pe := containerEnv(pod)
	for k, want := range map[string]string{
		"AZURE_CLIENT_ID": clientID, "AZURE_TENANT_ID": env["AZURE_TENANT_ID"],
		"AZURE_AUTHORITY_HOST": env["AZURE_AUTHORITY_HOST"], "AZURE_FEDERATED_TOKEN_FILE": "/var/run/secrets/azure/tokens/azure-identity-token",
	} {
		if pe[k] != want {
			t.Errorf("mutated pod: %s=%q, want %q", k, pe[k], want)
		}
	}
	root := t.TempDir()
	wi.project(pod, root)
	if got, err := wi.readSecret(pod, root); err != nil || got != secretValue {
		t.Fatalf("the pod's app reads its secret: %q, %v", got, err)
	}
	if code, out := doctorCLI(t, env, ns, "pod/shop-tr", "--scope", vaultID); code != 0 || !strings.Contains(out, "Key Vault Secrets User") {
		t.Errorf("doctor on a working pod: exit %d\n%s", code, out)
	}

	if node {
		// A service principal's secret from a Kubernetes Secret, on the pod network.
		logs := runToCompletion(t, cs, kubeconfig, clientSecretPod(t, cs, ns, "sp-app", vaultName, "db-password", env, podEnv))
		secretReadLine(t, logs, "db-password", secretValue)
		t.Run("control-plane identities on the node", func(t *testing.T) { controlPlaneOnTheNode(t, env, podEnv, admin) })
		// Pod identity in the same up, while the kubelet's refresh is awaited.
		t.Run("pod identity on the node", func(t *testing.T) { podIdentityOnTheNode(t, env, podEnv, ns, vaultName) })
		refresh.check(t, env, admin, wi)
	}

	// The ways it breaks (last: they change the federated credential the pods use).
	t.Run("a token of another service account", func(t *testing.T) {
		other := wi.createPod("shop-other", "other")
		otherRoot := t.TempDir()
		wi.project(other, otherRoot)
		_, err := wi.readSecret(other, otherRoot)
		wantAADSTS(t, err, "AADSTS700213")
		wantDoctorStep(t, env, ns, "sa/other", "federated-credential")
	})
	t.Run("wrong subject", func(t *testing.T) {
		kubectl(t, kubeconfig, "patch", "-n", ns, "federatedidentitycredential", "shop-app", "--type=merge", "-p", `{"spec":{"subject":"system:serviceaccount:shop:app-typo"}}`)
		wantAADSTS(t, wi.refusedSoon(pod, root), "AADSTS700213")
		wantDoctorStep(t, env, ns, "pod/shop-tr", "federated-credential")
		kubectl(t, kubeconfig, "patch", "-n", ns, "federatedidentitycredential", "shop-app", "--type=merge", "-p", `{"spec":{"subject":"system:serviceaccount:shop:app"}}`)
		wi.worksSoon(pod, root)
	})
	t.Run("wrong audience", func(t *testing.T) {
		kubectl(t, kubeconfig, "patch", "-n", ns, "federatedidentitycredential", "shop-app", "--type=merge", "-p", `{"spec":{"audiences":["api://SomethingElse"]}}`)
		wantAADSTS(t, wi.refusedSoon(pod, root), "AADSTS700213")
		wantDoctorStep(t, env, ns, "pod/shop-tr", "federated-credential")
		kubectl(t, kubeconfig, "patch", "-n", ns, "federatedidentitycredential", "shop-app", "--type=merge", "-p", `{"spec":{"audiences":["api://AzureADTokenExchange"]}}`)
		wi.worksSoon(pod, root)
	})
	t.Run("deleted federated credential", func(t *testing.T) {
		kubectl(t, kubeconfig, "delete", "-n", ns, "federatedidentitycredential", "shop-app", "--timeout=2m")
		wantAADSTS(t, wi.refusedSoon(pod, root), "AADSTS70021:")
		wantDoctorStep(t, env, ns, "pod/shop-tr", "federated-credential")
		apply(t, kubeconfig, manifests)
		wi.worksSoon(pod, root)
	})
	// Last: the cloud's clock moves past the token's expiry and stays there.
	t.Run("expired token", func(t *testing.T) {
		advanceCloudClock(t, env, admin, 2*time.Hour)
		_, err := wi.readSecret(pod, root)
		wantAADSTS(t, err, "AADSTS700024")
		wantDoctorStep(t, env, ns, "pod/shop-tr", "token-exchange")
	})

	stopAndCheck(t, up, dir, syscall.SIGINT)
	if node {
		// Under the node lock: once up stopped, another package's node may own the table.
		if err := devenv.WithNodeLock(t.Context(), 10*time.Minute, func() {
			if out, err := exec.Command("nft", "list", "table", "ip", nodeagent.DefaultTable).CombinedOutput(); err == nil {
				t.Errorf("the node agent's nftables table is left after up stopped:\n%s", out)
			}
		}); err != nil {
			t.Error(err)
		}
	}
}

const secretValue = "s3cr3t-e2e"

// wiManifests is the Azure side of the flow in namespace ns: what a user applies.
func wiManifests(ns, issuer, vaultName, adminObjectID string) string {
	return `apiVersion: resources.azure.com/v1api20200601
kind: ResourceGroup
metadata: {name: wi-shop, namespace: ` + ns + `}
spec: {location: local}
---
apiVersion: managedidentity.azure.com/v1api20230131
kind: UserAssignedIdentity
metadata: {name: shop-app, namespace: ` + ns + `}
spec:
  location: local
  owner: {name: wi-shop}
  operatorSpec:
    configMaps:
      clientId: {name: shop-identity, key: clientId}
      principalId: {name: shop-identity, key: principalId}
      tenantId: {name: shop-identity, key: tenantId}
---
apiVersion: managedidentity.azure.com/v1api20230131
kind: FederatedIdentityCredential
metadata: {name: shop-app, namespace: ` + ns + `}
spec:
  owner: {name: shop-app}
  issuer: ` + issuer + `
  subject: system:serviceaccount:` + ns + `:app
  audiences: [api://AzureADTokenExchange]
---
apiVersion: keyvault.azure.com/v1api20230701
kind: Vault
metadata: {name: shop-vault, namespace: ` + ns + `}
spec:
  location: local
  azureName: ` + vaultName + `
  owner: {name: wi-shop}
  properties:
    tenantIdFromConfig: {name: shop-identity, key: tenantId}
    sku: {family: A, name: standard}
    enableRbacAuthorization: true
---
apiVersion: authorization.azure.com/v1api20220401
kind: RoleAssignment
metadata: {name: shop-app-secrets-user, namespace: ` + ns + `}
spec:
  owner: {name: shop-vault, group: keyvault.azure.com, kind: Vault}
  principalIdFromConfig: {name: shop-identity, key: principalId}
  principalType: ServicePrincipal
  roleDefinitionReference: {wellKnownName: Key Vault Secrets User}
---
apiVersion: authorization.azure.com/v1api20220401
kind: RoleAssignment
metadata: {name: admin-secrets-officer, namespace: ` + ns + `}
spec:
  owner: {name: shop-vault, group: keyvault.azure.com, kind: Vault}
  principalId: ` + adminObjectID + `
  principalType: ServicePrincipal
  roleDefinitionReference: {wellKnownName: Key Vault Secrets Officer}
`
}

// serviceAccounts: app, which the identity trusts, and other, annotated with the same identity
// but not trusted.
func serviceAccounts(ns, clientID string) string {
	sa := func(name string) string {
		return "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: " + name + "\n  namespace: " + ns +
			"\n  annotations: {azure.workload.identity/client-id: \"" + clientID + "\"}\n"
	}
	return sa("app") + "---\n" + sa("other")
}

func apply(t *testing.T, kubeconfig, manifest string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary(t, "kubectl"), "--kubeconfig", kubeconfig, "apply", "-f", "-")
	cmd.Stdin = strings.NewReader(manifest)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// wiFlow does what kubelet and app do for a mutated pod, in the test's process.
type wiFlow struct {
	t        *testing.T
	cs       kubernetes.Interface
	env      map[string]string
	ns       string
	vaultURI string
}

// createPod creates a labelled pod of service account sa that sleeps; the webhook mutates it.
func (w *wiFlow) createPod(name, sa string) *corev1.Pod {
	w.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns, Labels: map[string]string{"azure.workload.identity/use": "true"}},
		Spec: corev1.PodSpec{ServiceAccountName: sa, Containers: []corev1.Container{{
			Name: "app", Image: images.TestApp, ImagePullPolicy: corev1.PullIfNotPresent, Args: []string{"sleep"},
		}}},
	}
	got, err := w.cs.CoreV1().Pods(w.ns).Create(w.t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("create pod %s: %v", name, err)
	}
	return got
}

func containerEnv(p *corev1.Pod) map[string]string {
	m := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		m[e.Name] = e.Value
	}
	return m
}

// project is the kubelet's part: a token of the pod's service account with the audience and
// expiry of the pod's projected volume, bound to the pod, written under root where the pod's
// AZURE_FEDERATED_TOKEN_FILE points.
func (w *wiFlow) project(p *corev1.Pod, root string) {
	w.t.Helper()
	var src *corev1.ServiceAccountTokenProjection
	for _, v := range p.Spec.Volumes {
		if v.Name == "azure-identity-token" && v.Projected != nil {
			src = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	if src == nil {
		w.t.Fatal("the pod has no projected token volume")
	}
	tr, err := w.cs.CoreV1().ServiceAccounts(w.ns).CreateToken(w.t.Context(), p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{src.Audience}, ExpirationSeconds: src.ExpirationSeconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		w.t.Fatalf("token request: %v", err)
	}
	path := filepath.Join(root, containerEnv(p)["AZURE_FEDERATED_TOKEN_FILE"])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		w.t.Fatal(err)
	}
}

// readSecret is the app: WorkloadIdentityCredential from the pod's environment (its authority
// host included; instance discovery off and the cloud's CA, as on the local cloud), and azsecrets
// reading the secret, each time anew (no token cache between calls).
func (w *wiFlow) readSecret(p *corev1.Pod, root string) (string, error) {
	w.t.Helper()
	pe := containerEnv(p)
	return w.readSecretWithFile(p, filepath.Join(root, pe["AZURE_FEDERATED_TOKEN_FILE"]), pe["AZURE_AUTHORITY_HOST"])
}

// readSecretWithFile is readSecret with another token file and authority host.
func (w *wiFlow) readSecretWithFile(p *corev1.Pod, tokenFile, authority string) (string, error) {
	w.t.Helper()
	pe := containerEnv(p)
	opts := clientOptions(w.t, w.env)
	opts.Retry = policy.RetryOptions{MaxRetries: -1}
	opts.Cloud.ActiveDirectoryAuthorityHost = authority
	cred, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
		ClientOptions: opts, ClientID: pe["AZURE_CLIENT_ID"], TenantID: pe["AZURE_TENANT_ID"],
		TokenFilePath: tokenFile, DisableInstanceDiscovery: true,
	})
	if err != nil {
		w.t.Fatal(err)
	}
	got, err := secretsClient(w.t, w.vaultURI, cred, opts).GetSecret(w.t.Context(), "db-password", "", nil)
	if err != nil {
		return "", err
	}
	return *got.Value, nil
}

// refusedSoon waits (bounded) for the manager to carry a change to Azure: until the pod's app is
// refused, and returns the refusal.
func (w *wiFlow) refusedSoon(p *corev1.Pod, root string) error {
	w.t.Helper()
	var last error
	_ = wait.PollUntilContextTimeout(w.t.Context(), 500*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		_, last = w.readSecret(p, root)
		return last != nil, nil
	})
	return last
}

// worksSoon waits (bounded) until the pod's app reads its secret again.
func (w *wiFlow) worksSoon(p *corev1.Pod, root string) {
	w.t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(w.t.Context(), 500*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
		_, last = w.readSecret(p, root)
		return last == nil, nil
	})
	if err != nil {
		w.t.Fatalf("the app does not read its secret again after the fix: %v", last)
	}
}

func wantAADSTS(t *testing.T, err error, code string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), code) {
		t.Fatalf("refused with %v, want %s", err, code)
	}
}

// doctorCLI runs `cerulean doctor workload-identity` with DIR/env's variables, as a user who
// sourced it; it returns the exit code and output.
func doctorCLI(t *testing.T, env map[string]string, ns, target string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), binary(t, "cerulean"), append([]string{"doctor", "workload-identity", "-n", ns, target}, args...)...)
	cmd.Env = os.Environ()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("run doctor: %v", err)
	}
	return 0, string(out)
}

func wantDoctorStep(t *testing.T, env map[string]string, ns, target, step string) {
	t.Helper()
	code, out := doctorCLI(t, env, ns, target)
	if code != 1 || !strings.Contains(out, `result: step "`+step+`" fails`) {
		t.Errorf("doctor %s: exit %d, want 1 with step %s failing\n%s", target, code, step, out)
	}
}

// advanceCloudClock moves the local cloud's clock forward through its admin API.
func advanceCloudClock(t *testing.T, env map[string]string, admin azcore.TokenCredential, by time.Duration) {
	t.Helper()
	tok, err := admin.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{armScope(env)}})
	if err != nil {
		t.Fatal(err)
	}
	body := strings.NewReader(`{"by":"` + by.String() + `"}`)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, env["AZURE_AUTHORITY_HOST"]+"_cerulean/admin/clock/advance", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok.Token)
	opts := clientOptions(t, env)
	resp, err := opts.Transport.Do(req)
	if err != nil {
		t.Fatalf("advance the cloud's clock: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("advance the cloud's clock: %s", resp.Status)
	}
}

// waitWebhook waits until the manager, moments after `up` is ready, has registered its webhook:
// a labelled pod is mutated (server-side dry run).
func waitWebhook(t *testing.T, kubeconfig, ns string) {
	t.Helper()
	manifest := filepath.Join(t.TempDir(), "pod.json")
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"probe","namespace":"` + ns + `","labels":{"azure.workload.identity/use":"true"}},` +
		`"spec":{"serviceAccountName":"app","containers":[{"name":"app","image":"app"}]}}`
	if err := os.WriteFile(manifest, []byte(pod), 0o600); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		out, err := exec.Command(binary(t, "kubectl"), "--kubeconfig", kubeconfig, "create", "--dry-run=server", "-o", "json", "-f", manifest).CombinedOutput()
		return err == nil && strings.Contains(string(out), "azure-identity-token"), nil
	})
	if err != nil {
		t.Fatalf("labelled pods are not mutated: %v", err)
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

// grantNamespace is the cluster admin's NamespaceGrant of the shop's tenant namespace: every
// identity and scope (docs/resources.md, Multi-tenancy, says how to narrow it).
func grantNamespace(t *testing.T, kubeconfig, ns string) {
	t.Helper()
	apply(t, kubeconfig, `apiVersion: cerulean.dev/v1alpha1
kind: NamespaceGrant
metadata: {name: e2e-`+ns+`}
spec:
  namespaces: [`+ns+`]
  identities: ["*"]
  scopes: ["/subscriptions/*"]
`)
}
