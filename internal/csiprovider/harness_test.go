package csiprovider_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/authorization/armauthorization/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/msi/armmsi"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/secrets-store-csi-driver/pkg/util/fileutil"
	"sigs.k8s.io/secrets-store-csi-driver/provider/v1alpha1"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/csiprovider"
	"github.com/cerulean/cerulean/internal/csiprovider/csiprovidertest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

const (
	roleSecretsUser    = "4633458b-17de-408a-b874-0445c86b69e6"
	roleSecretsOfficer = "b86a8fe4-44ce-4948-aee5-eccb2c155cd7"
	location           = "eastus"
)

// env is a local cloud trusting the devenv control plane's issuer, a resource group and a vault
// in RBAC mode, and a provider serving on a unix socket, reached over gRPC as the driver does.
type env struct {
	c       *cloud.Cloud
	s       cloud.Settings
	owner   azcore.TokenCredential
	kube    kubernetes.Interface
	issuer  string
	rg      string
	vault   string // name
	uri     string
	vaultID string
	clock   *cloudtest.Clock
	client  v1alpha1.CSIDriverProviderClient
}

func newEnv(t *testing.T, ttl time.Duration) *env {
	t.Helper()
	cp := devenvtest.ControlPlane(t)
	// One clock for the cloud and the provider: tests move it to age cache entries and to give
	// secret versions distinct creation times.
	clock := cloudtest.NewClock()
	c := cloudtest.Start(t, cloud.Options{TrustCAs: [][]byte{cp.CACertPEM}, ARM: cloudtest.FastARM(), Clock: clock.Now})
	e := &env{c: c, s: c.Settings(), kube: kubernetes.NewForConfigOrDie(cp.RESTConfig), issuer: cp.IssuerURL, rg: "rg-csi", vault: "kv-csi", clock: clock}
	e.owner = cloudtest.OwnerCred(t, c)
	cloudtest.CreateGroup(t, c, e.owner, cloudtest.ARMOptions(c), location, e.rg)
	e.uri, e.vaultID = e.createVault(t, e.vault)
	e.assign(t, e.vaultID, roleSecretsOfficer, e.s.ObjectID) // Owner alone reads no secret
	e.startProvider(t, ttl)
	return e
}

func (e *env) startProvider(t *testing.T, ttl time.Duration) {
	t.Helper()
	p, err := csiprovider.New(csiprovider.Options{
		Azure:          azure.Config{AuthorityHost: e.s.AuthorityHost, CAFile: e.s.CAFile},
		CloudName:      cloud.CloudName,
		VaultLookupURL: e.s.URL + cloud.VaultLookupPath,
		CacheTTL:       ttl,
		Clock:          e.clock.Now,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.client = csiprovidertest.Serve(t, p)
}

func (e *env) createVault(t *testing.T, name string) (uri, id string) {
	t.Helper()
	res := cloudtest.CreateRBACVault(t, e.c, e.owner, cloudtest.ARMOptions(e.c), location, e.rg, name)
	return *res.Properties.VaultURI, *res.ID
}

func (e *env) assign(t *testing.T, scope, role, principalID string) {
	t.Helper()
	c, err := armauthorization.NewRoleAssignmentsClient(e.s.SubscriptionID, e.owner, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(t.Context(), scope, uuid.NewString(), armauthorization.RoleAssignmentCreateParameters{
		Properties: &armauthorization.RoleAssignmentProperties{
			RoleDefinitionID: to.Ptr("/subscriptions/" + e.s.SubscriptionID + "/providers/Microsoft.Authorization/roleDefinitions/" + role),
			PrincipalID:      to.Ptr(principalID), PrincipalType: to.Ptr(armauthorization.PrincipalTypeServicePrincipal),
		},
	}, nil); err != nil {
		t.Fatalf("assign role: %v", err)
	}
}

// identity creates a user-assigned identity through ARM.
func (e *env) identity(t *testing.T, name string) armmsi.Identity {
	t.Helper()
	c, err := armmsi.NewUserAssignedIdentitiesClient(e.s.SubscriptionID, e.owner, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.CreateOrUpdate(t.Context(), e.rg, name, armmsi.Identity{Location: to.Ptr(location)}, nil)
	if err != nil {
		t.Fatalf("create identity: %v", err)
	}
	return res.Identity
}

// federate trusts namespace/sa of the devenv issuer for the identity.
func (e *env) federate(t *testing.T, identity, namespace, sa string) {
	t.Helper()
	c, err := armmsi.NewFederatedIdentityCredentialsClient(e.s.SubscriptionID, e.owner, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateOrUpdate(t.Context(), e.rg, identity, "kube", armmsi.FederatedIdentityCredential{
		Properties: &armmsi.FederatedIdentityCredentialProperties{
			Issuer: to.Ptr(e.issuer), Subject: to.Ptr("system:serviceaccount:" + namespace + ":" + sa),
			Audiences: []*string{to.Ptr(csiprovider.TokenExchangeAudience)},
		},
	}, nil); err != nil {
		t.Fatalf("create federated credential: %v", err)
	}
}

// setSecret writes a new version and returns it.
func (e *env) setSecret(t *testing.T, name, value string) string {
	t.Helper()
	sc, err := azsecrets.NewClient(e.uri, e.owner, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(e.c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	res, err := sc.SetSecret(t.Context(), name, azsecrets.SetSecretParameters{Value: to.Ptr(value)}, nil)
	if err != nil {
		t.Fatalf("set secret %s: %v", name, err)
	}
	return res.ID.Version()
}

// saTokens is the serviceAccount.tokens attribute the driver sends: a real TokenRequest token
// for the audience its CSIDriver asks, keyed by audience.
func (e *env) saTokens(t *testing.T, namespace, sa string) string {
	t.Helper()
	ctx := t.Context()
	if _, err := e.kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	tr, err := e.kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{csiprovider.TokenExchangeAudience}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	b, _ := json.Marshal(map[string]any{csiprovider.TokenExchangeAudience: map[string]string{
		"token": tr.Status.Token, "expirationTimestamp": tr.Status.ExpirationTimestamp.Format(time.RFC3339)}})
	return string(b)
}

// request builds a MountRequest as the driver's node server does: the class's parameters plus
// the pod's attributes, JSON-encoded; the node-publish secret's data, JSON-encoded; the target
// path; and the permission as the JSON of os.FileMode(0644).
func (e *env) request(t *testing.T, params map[string]string, pod string, secrets map[string]string) *v1alpha1.MountRequest {
	t.Helper()
	attrib := map[string]string{
		"keyvaultName": e.vault, "tenantId": e.s.TenantID,
		csiprovider.AttrPodName: pod, csiprovider.AttrPodNamespace: "default",
		"csi.storage.k8s.io/pod.uid": uuid.NewString(), csiprovider.AttrServiceAccount: "default",
		"secretProviderClass": "azure-kv", "csi.storage.k8s.io/ephemeral": "false",
	}
	for k, v := range params {
		attrib[k] = v
	}
	a, _ := json.Marshal(attrib)
	if secrets == nil {
		secrets = map[string]string{}
	}
	s, _ := json.Marshal(secrets)
	perm, _ := json.Marshal(os.FileMode(0o644))
	return &v1alpha1.MountRequest{Attributes: string(a), Secrets: string(s), TargetPath: t.TempDir(), Permission: string(perm)}
}

// mount calls Mount and, as the driver does, writes the response's files into the target path.
func (e *env) mount(t *testing.T, req *v1alpha1.MountRequest) (map[string]string, error) {
	t.Helper()
	resp, err := e.client.Mount(t.Context(), req)
	if err != nil {
		return nil, err
	}
	if err := fileutil.WritePayloads(req.TargetPath, resp.GetFiles()); err != nil {
		t.Fatalf("write payloads: %v", err)
	}
	versions := map[string]string{}
	for _, v := range resp.GetObjectVersion() {
		versions[v.Id] = v.Version
	}
	return versions, nil
}

func readFile(t *testing.T, dir, name string) (string, os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, name)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("read mounted file: %v", err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b), fi.Mode().Perm()
}

// empty fails unless the target path has no files: a failed mount writes nothing.
func empty(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Fatalf("target path has %d entries after a failed mount", len(entries))
	}
}

func objects(items ...string) string {
	s := "array:\n"
	for _, it := range items {
		s += "  - |\n"
		for _, line := range splitLines(it) {
			s += "    " + line + "\n"
		}
	}
	return s
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}
