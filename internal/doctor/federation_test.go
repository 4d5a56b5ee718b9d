package doctor_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/arm"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/azure"
	cerucloud "github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/doctor"
	"github.com/cerulean/cerulean/internal/webhook/webhooktest"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

const (
	keyVaultSecretsUser = "4633458b-17de-408a-b874-0445c86b69e6"
	keyVaultOfficer     = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"
	secretValue         = "s3cr3t-federated"
)

// env is the whole flow's state: the cluster, the cloud, the Azure objects.
type env struct {
	t        *testing.T
	kube     *kubernetes.Clientset
	cloud    *cerucloud.Cloud
	offset   *atomic.Int64 // the cloud's clock runs this far ahead of real time
	admin    azcore.TokenCredential
	arm      *arm.ClientOptions
	sub, rg  string
	issuer   string
	identity *armmsi.Identity
	fics     *armmsi.FederatedIdentityCredentialsClient
	vaultURI string
	vaultID  string
	ns       string
}

// setup creates, through the real ARM SDK against the local cloud, what the manifests of the flow
// describe: a resource group, a user-assigned identity, its federated credential for the cluster's
// issuer and the service account app, an RBAC vault with a secret, and Key Vault Secrets User for the
// identity on it; and in the cluster the annotated service account, with the webhook serving.
func setup(t *testing.T, ns string) *env {
	t.Helper()
	cp := devenvtest.ControlPlane(t)
	offset := &atomic.Int64{}
	c := cloudtest.Start(t, cerucloud.Options{
		TrustCAs: [][]byte{cp.CACertPEM}, ARM: cloudtest.FastARM(),
		Clock: func() time.Time { return time.Now().Add(time.Duration(offset.Load())) },
	})
	s := c.Settings()
	e := &env{t: t, cloud: c, offset: offset, admin: cloudtest.OwnerCred(t, c), arm: cloudtest.ARMOptions(c), sub: s.SubscriptionID, rg: "wi", issuer: cp.IssuerURL, ns: ns}
	var err error
	if e.kube, err = kubernetes.NewForConfig(cp.RESTConfig); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cloudtest.CreateGroup(t, c, e.admin, e.arm, "local", e.rg)
	ids, err := armmsi.NewUserAssignedIdentitiesClient(e.sub, e.admin, e.arm)
	if err != nil {
		t.Fatal(err)
	}
	mi, err := ids.CreateOrUpdate(ctx, e.rg, "shop-app", armmsi.Identity{Location: to.Ptr("local")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e.identity = &mi.Identity
	if e.fics, err = armmsi.NewFederatedIdentityCredentialsClient(e.sub, e.admin, e.arm); err != nil {
		t.Fatal(err)
	}
	e.putFIC("shop-app", "system:serviceaccount:"+ns+":app", wi.DefaultAudience)

	v := cloudtest.CreateRBACVault(t, c, e.admin, e.arm, "local", e.rg, "shop"+strings.ReplaceAll(uuid.NewString(), "-", "")[:12])
	e.vaultURI, e.vaultID = *v.Properties.VaultURI, *v.ID
	e.grant(e.vaultID, keyVaultOfficer, s.ObjectID)
	e.grant(e.vaultID, keyVaultSecretsUser, *mi.Properties.PrincipalID)
	adminSecrets, err := azsecrets.NewClient(e.vaultURI, e.admin, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := adminSecrets.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr(secretValue)}, nil); err != nil {
		t.Fatal(err)
	}

	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.kube.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	for _, name := range []string{"app", "other"} {
		sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{wi.ClientIDAnnotation: *mi.Properties.ClientID}}}
		if _, err := e.kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	webhooktest.Start(t, cp.RESTConfig, wi.Config{TenantID: s.TenantID, AuthorityHost: s.AuthorityHost}, ns)
	return e
}

func (e *env) putFIC(name, subject, audience string) {
	e.t.Helper()
	_, err := e.fics.CreateOrUpdate(e.t.Context(), e.rg, "shop-app", name, armmsi.FederatedIdentityCredential{
		Properties: &armmsi.FederatedIdentityCredentialProperties{Issuer: to.Ptr(e.issuer), Subject: to.Ptr(subject), Audiences: []*string{to.Ptr(audience)}},
	}, nil)
	if err != nil {
		e.t.Fatalf("put federated credential: %v", err)
	}
}

func (e *env) grant(scope, role, principal string) {
	e.t.Helper()
	ras, err := armauthorization.NewRoleAssignmentsClient(e.sub, e.admin, e.arm)
	if err != nil {
		e.t.Fatal(err)
	}
	_, err = ras.Create(e.t.Context(), scope, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{Properties: &armauthorization.RoleAssignmentProperties{
		RoleDefinitionID: to.Ptr("/subscriptions/" + e.sub + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
		PrincipalID:      to.Ptr(principal), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
	}}, nil)
	if err != nil {
		e.t.Fatalf("assign role: %v", err)
	}
}

// createPod creates the app's labelled pod; the webhook mutates it.
func (e *env) createPod(name, sa string) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{wi.UseLabel: "true"}}}
	p.Spec.ServiceAccountName = sa
	p.Spec.Containers = []corev1.Container{{Name: "app", Image: "shop"}}
	got, err := e.kube.CoreV1().Pods(e.ns).Create(e.t.Context(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return got
}

// project does the kubelet's part: a token of the pod's service account with the audience and
// expiry of the pod's projected volume, bound to the pod, written where the pod's
// AZURE_FEDERATED_TOKEN_FILE points (under root, the container's file system).
func (e *env) project(p *corev1.Pod, root string) {
	e.t.Helper()
	var src *corev1.ServiceAccountTokenProjection
	for _, v := range p.Spec.Volumes {
		if v.Name == wi.TokenVolume {
			src = v.Projected.Sources[0].ServiceAccountToken
		}
	}
	if src == nil {
		e.t.Fatal("the pod has no token volume")
	}
	tr, err := e.kube.CoreV1().ServiceAccounts(e.ns).CreateToken(e.t.Context(), p.Spec.ServiceAccountName, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			Audiences: []string{src.Audience}, ExpirationSeconds: src.ExpirationSeconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	path := filepath.Join(root, podEnv(e.t, p)[wi.TokenFileEnv])
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		e.t.Fatal(err)
	}
}

func podEnv(t *testing.T, p *corev1.Pod) map[string]string {
	t.Helper()
	m := map[string]string{}
	for _, v := range p.Spec.Containers[0].Env {
		m[v.Name] = v.Value
	}
	for _, k := range []string{wi.ClientIDEnv, wi.TenantIDEnv, wi.TokenFileEnv, wi.AuthorityHostEnv} {
		if m[k] == "" {
			t.Fatalf("the pod has no %s: %v", k, m)
		}
	}
	return m
}

// readSecret is the app: the real Azure SDK's WorkloadIdentityCredential built from the pod's
// environment (authority host included), and azsecrets reading the vault's secret.
func (e *env) readSecret(p *corev1.Pod, root string) (string, error) {
	e.t.Helper()
	pe := podEnv(e.t, p)
	opts := e.cloud.ClientOptions()
	opts.Retry = policy.RetryOptions{MaxRetries: -1}
	opts.Cloud = cloud.Configuration{ActiveDirectoryAuthorityHost: pe[wi.AuthorityHostEnv]}
	cred, err := azidentity.NewWorkloadIdentityCredential(&azidentity.WorkloadIdentityCredentialOptions{
		ClientOptions: opts, ClientID: pe[wi.ClientIDEnv], TenantID: pe[wi.TenantIDEnv],
		TokenFilePath: filepath.Join(root, pe[wi.TokenFileEnv]), DisableInstanceDiscovery: true,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	secrets, err := azsecrets.NewClient(e.vaultURI, cred, &azsecrets.ClientOptions{ClientOptions: opts, DisableChallengeResourceVerification: true})
	if err != nil {
		e.t.Fatal(err)
	}
	got, err := secrets.GetSecret(e.t.Context(), "db-password", "", nil)
	if err != nil {
		return "", err
	}
	return *got.Value, nil
}

func (e *env) doctor(target, scope string) doctor.Report {
	e.t.Helper()
	s := e.cloud.Settings()
	r, err := doctor.WorkloadIdentity(e.t.Context(), doctor.Options{
		Namespace: e.ns, Target: target, Scope: scope, Kube: devenvtest.ControlPlane(e.t).RESTConfig, ExpectedIssuer: e.issuer,
		Azure: azure.Config{
			TenantID: s.TenantID, SubscriptionID: s.SubscriptionID, ClientID: s.ClientID, ClientSecret: s.ClientSecret,
			AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint, ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile,
		},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	var out bytes.Buffer
	_ = r.Write(&out)
	e.t.Logf("doctor %s:\n%s", target, out.String())
	return r
}

// wantRefused asserts the exchange fails with one of the AADSTS codes, and that the doctor names
// the failing step with exit code 1.
func wantRefused(t *testing.T, err error, codes ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the secret was read, want a refusal with %v", codes)
	}
	for _, c := range codes {
		if strings.Contains(err.Error(), c) {
			return
		}
	}
	t.Fatalf("refused with %v, want %v", err, codes)
}

func wantStep(t *testing.T, r doctor.Report, step string, detail ...string) {
	t.Helper()
	if r.ExitCode() != doctor.ExitFailed {
		t.Errorf("exit code %d, want %d", r.ExitCode(), doctor.ExitFailed)
	}
	f := r.FirstFailure()
	if f == nil || f.Name != step {
		t.Fatalf("first failing step %+v, want %s", f, step)
	}
	if f.Fix == "" {
		t.Errorf("step %s fails without saying how to fix it", step)
	}
	for _, d := range detail {
		if !strings.Contains(f.Detail, d) {
			t.Errorf("step %s detail %q lacks %q", step, f.Detail, d)
		}
	}
}

// The flow end to end: a labelled pod of an annotated service account is mutated at creation;
// with the token the kubelet would project, the Azure SDK in the pod reads the Key Vault secret.
// Then each way it breaks is refused with the AADSTS code users see, and the doctor names the
// failing step.
func TestWorkloadIdentityEndToEnd(t *testing.T) {
	e := setup(t, "shop")
	root := t.TempDir()
	pod := e.createPod("shop", "app")
	e.project(pod, root)
	got, err := e.readSecret(pod, root)
	if err != nil {
		t.Fatalf("the pod reads its secret: %v", err)
	}
	if got != secretValue {
		t.Fatalf("secret %q", got)
	}
	r := e.doctor("pod/shop", e.vaultID)
	if r.ExitCode() != doctor.ExitOK {
		t.Fatalf("doctor on a working pod: exit %d", r.ExitCode())
	}
	for _, s := range r.Steps {
		if s.Status != doctor.Pass {
			t.Errorf("step %s is %s on a working pod", s.Name, s.Status)
		}
	}
	if d := r.Step(doctor.StepRoleAssignments).Detail; !strings.Contains(d, "Key Vault Secrets User") {
		t.Errorf("role assignments %q, want Key Vault Secrets User", d)
	}

	t.Run("wrong subject", func(t *testing.T) {
		e.putFIC("shop-app", "system:serviceaccount:"+e.ns+":app-typo", wi.DefaultAudience)
		defer e.putFIC("shop-app", "system:serviceaccount:"+e.ns+":app", wi.DefaultAudience)
		_, err := e.readSecret(pod, root)
		wantRefused(t, err, "AADSTS700213")
		wantStep(t, e.doctor("pod/shop", ""), doctor.StepFederatedCredential, "subject system:serviceaccount:"+e.ns+":app-typo")
	})
	t.Run("wrong audience", func(t *testing.T) {
		e.putFIC("shop-app", "system:serviceaccount:"+e.ns+":app", "api://SomethingElse")
		defer e.putFIC("shop-app", "system:serviceaccount:"+e.ns+":app", wi.DefaultAudience)
		_, err := e.readSecret(pod, root)
		wantRefused(t, err, "AADSTS700213")
		wantStep(t, e.doctor("pod/shop", ""), doctor.StepFederatedCredential, "audiences [api://SomethingElse]")
	})
	t.Run("a token of another service account", func(t *testing.T) {
		other := e.createPod("other", "other")
		otherRoot := t.TempDir()
		e.project(other, otherRoot)
		_, err := e.readSecret(other, otherRoot)
		wantRefused(t, err, "AADSTS700213")
		wantStep(t, e.doctor("sa/other", ""), doctor.StepFederatedCredential, "subject system:serviceaccount:"+e.ns+":other")
	})
	t.Run("deleted federated credential", func(t *testing.T) {
		if _, err := e.fics.Delete(t.Context(), e.rg, "shop-app", "shop-app", nil); err != nil {
			t.Fatal(err)
		}
		defer e.putFIC("shop-app", "system:serviceaccount:"+e.ns+":app", wi.DefaultAudience)
		_, err := e.readSecret(pod, root)
		wantRefused(t, err, "AADSTS70021:")
		wantStep(t, e.doctor("pod/shop", ""), doctor.StepFederatedCredential, "has no federated credential")
	})
	t.Run("no role at the scope", func(t *testing.T) {
		groupID := "/subscriptions/" + e.sub + "/resourceGroups/" + e.rg
		wantStep(t, e.doctor("pod/shop", groupID), doctor.StepRoleAssignments, "no role assignment at or above")
	})
	t.Run("unlabelled pod", func(t *testing.T) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}
		p.Spec.ServiceAccountName = "app"
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "shop"}}
		if _, err := e.kube.CoreV1().Pods(e.ns).Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		r := e.doctor("pod/plain", "")
		wantStep(t, r, doctor.StepLabel)
		if s := r.Step(doctor.StepMutation); s.Status != doctor.Fail {
			t.Errorf("mutation step %s on an unmutated pod", s.Status)
		}
	})
	// Last: the cloud's clock moves past the token's expiry and stays there.
	t.Run("expired token", func(t *testing.T) {
		if got, err := e.readSecret(pod, root); err != nil || got != secretValue {
			t.Fatalf("before expiry (credentials restored): %q, %v", got, err)
		}
		e.offset.Store(int64(2 * time.Hour))
		_, err := e.readSecret(pod, root)
		wantRefused(t, err, "AADSTS700024")
		wantStep(t, e.doctor("pod/shop", ""), doctor.StepTokenExchange, "AADSTS700024")
	})
}

// The command reads KUBECONFIG and the cloud's variables and maps the report to exit codes.
func TestCommandExitCodes(t *testing.T) {
	e := setup(t, "shop-cli")
	e.createPod("shop", "app")
	s := e.cloud.Settings()
	vars := map[string]string{
		"KUBECONFIG": devenvtest.ControlPlane(t).Kubeconfig, "AZURE_TENANT_ID": s.TenantID, "AZURE_SUBSCRIPTION_ID": s.SubscriptionID,
		"AZURE_CLIENT_ID": s.ClientID, "AZURE_CLIENT_SECRET": s.ClientSecret, "AZURE_AUTHORITY_HOST": s.AuthorityHost,
		"AZURE_RESOURCE_MANAGER_ENDPOINT": s.ResourceManagerEndpoint, "AZURE_RESOURCE_MANAGER_AUDIENCE": s.ResourceManagerAudience,
		"SSL_CERT_FILE": s.CAFile, "CERULEAN_OIDC_ISSUER": e.issuer,
	}
	run := func(target string, getenv func(string) string) (int, string) {
		var out bytes.Buffer
		err := doctor.RunWorkloadIdentity(t.Context(), doctor.CLIOptions{Namespace: e.ns, Target: target, Getenv: getenv, Out: &out})
		var ee *doctor.ExitError
		switch {
		case err == nil:
			return 0, out.String()
		case errors.As(err, &ee):
			return ee.Code, out.String() + err.Error()
		}
		t.Fatalf("error without an exit code: %v", err)
		return -1, ""
	}
	get := func(k string) string { return vars[k] }
	if code, out := run("pod/shop", get); code != 0 || !strings.Contains(out, "[PASS] token-exchange") {
		t.Errorf("working pod: exit %d\n%s", code, out)
	}
	if code, out := run("pod/missing", get); code != 2 {
		t.Errorf("missing pod: exit %d, want 2\n%s", code, out)
	}
	if code, out := run("deployment/shop", get); code != 2 || !strings.Contains(out, "want pod/NAME or sa/NAME") {
		t.Errorf("bad target: exit %d, want 2\n%s", code, out)
	}
	noAzure := func(k string) string {
		if strings.HasPrefix(k, "AZURE_") {
			return ""
		}
		return vars[k]
	}
	if code, out := run("pod/shop", noAzure); code != 2 || !strings.Contains(out, "cerulean-local cloud env") {
		t.Errorf("without the cloud's variables: exit %d, want 2\n%s", code, out)
	}
	e.putFIC("shop-app", "system:serviceaccount:"+e.ns+":nobody", wi.DefaultAudience)
	code, out := run("pod/shop", get)
	if code != 1 || !strings.Contains(out, "[FAIL] federated-credential") {
		t.Errorf("mismatched credential: exit %d, want 1\n%s", code, out)
	}
	if strings.Contains(out, s.ClientSecret) || strings.Contains(out, "eyJ") {
		t.Error("the report shows a secret or a token")
	}
}

// The doctor, like rollout (both read the Azure SDK's variables), can authenticate with
// workload identity federation: AZURE_FEDERATED_TOKEN_FILE with AZURE_CLIENT_ID and
// AZURE_TENANT_ID, the way a CI system's OIDC token or a pod's projected token is used. Here the
// token is a real kube-apiserver token of a service account the identity trusts, and the
// identity may read the subscription it diagnoses. A missing or empty file, or a token the identity
// does not trust, is refused with an error that says so and carries no token.
func TestDoctorAuthenticatesWithAFederatedTokenFile(t *testing.T) {
	e := setup(t, "wi-fedfile")
	const reader = "acdd72a7-3385-48ef-bd42-f606fba81ae7"
	e.grant("/subscriptions/"+e.sub, reader, *e.identity.Properties.PrincipalID)
	pod := e.createPod("shop", "app")
	e.project(pod, t.TempDir())

	token := func(sa string) string {
		tr, err := e.kube.CoreV1().ServiceAccounts(e.ns).CreateToken(t.Context(), sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{Audiences: []string{wi.DefaultAudience}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	s := e.cloud.Settings()
	file := filepath.Join(t.TempDir(), "oidc-token")
	vars := map[string]string{
		"AZURE_TENANT_ID": s.TenantID, "AZURE_SUBSCRIPTION_ID": s.SubscriptionID, "AZURE_CLIENT_ID": *e.identity.Properties.ClientID,
		"AZURE_FEDERATED_TOKEN_FILE": file, "AZURE_AUTHORITY_HOST": s.AuthorityHost,
		"AZURE_RESOURCE_MANAGER_ENDPOINT": s.ResourceManagerEndpoint, "AZURE_RESOURCE_MANAGER_AUDIENCE": s.ResourceManagerAudience,
		"SSL_CERT_FILE": s.CAFile,
	}
	cfg := azure.ConfigFromEnv(func(k string) string { return vars[k] })
	getToken := func() error {
		cred, err := cfg.Credential()
		if err != nil {
			t.Fatalf("a federated configuration: %v", err)
		}
		_, err = cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{s.ResourceManagerAudience + "/.default"}})
		return err
	}

	if err := os.WriteFile(file, []byte(token("app")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := doctor.WorkloadIdentity(t.Context(), doctor.Options{
		Namespace: e.ns, Target: "pod/shop", Scope: e.vaultID, Kube: devenvtest.ControlPlane(t).RESTConfig, ExpectedIssuer: e.issuer, Azure: cfg,
	})
	if err != nil {
		t.Fatal(err)
	}
	if r.ExitCode() != doctor.ExitOK {
		var out bytes.Buffer
		_ = r.Write(&out)
		t.Fatalf("the doctor with a federated credential: exit %d\n%s", r.ExitCode(), out.String())
	}

	for _, bad := range []struct{ name, content, want string }{
		{"an empty file", "\n", "is empty"},
		{"a token the identity does not trust", token("other"), "AADSTS70021"},
	} {
		if err := os.WriteFile(file, []byte(bad.content), 0o600); err != nil {
			t.Fatal(err)
		}
		err := getToken()
		if err == nil || !strings.Contains(err.Error(), bad.want) || (len(bad.content) > 20 && strings.Contains(err.Error(), bad.content)) {
			t.Errorf("%s: %v, want an error with %q and no token", bad.name, err, bad.want)
		}
	}
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := getToken(); err == nil || !strings.Contains(err.Error(), "federated token file") {
		t.Errorf("a missing file: %v, want an error naming the federated token file", err)
	}
}
