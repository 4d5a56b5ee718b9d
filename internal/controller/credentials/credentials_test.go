package credentials_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/cerulean/cerulean/internal/azure"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/cloud/reqlog"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

const (
	exchangeAudience = "api://AzureADTokenExchange"
	managerSA        = "cerulean-manager"
)

// env is a local cloud that trusts the control plane's service-account issuer, a namespace for
// the manager's service account and one for resources, and a resolver whose global credential
// is the cloud's bootstrap principal.
type env struct {
	c        *cloud.Cloud
	kube     client.Client
	cs       *kubernetes.Clientset
	systemNS string // the manager's
	ns       string // resources'
	settings credentials.Settings
	r        *credentials.Resolver
}

func setup(t *testing.T) *env {
	t.Helper()
	cp := devenvtest.ControlPlane(t)
	e := &env{c: cloudtest.Start(t, cloud.Options{TrustCAs: [][]byte{cp.CACertPEM}})}
	var err error
	if e.kube, err = client.New(cp.RESTConfig, client.Options{}); err != nil {
		t.Fatal(err)
	}
	e.cs = kubernetes.NewForConfigOrDie(cp.RESTConfig)
	e.systemNS, e.ns = e.namespace(t, "system-"), e.namespace(t, "team-")
	if err := e.kube.Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: e.systemNS, Name: managerSA}}); err != nil {
		t.Fatal(err)
	}
	s := e.c.Settings()
	e.settings = credentials.Settings{
		Azure: azure.Config{AuthorityHost: s.AuthorityHost, ResourceManagerEndpoint: s.ResourceManagerEndpoint,
			ResourceManagerAudience: s.ResourceManagerAudience, CAFile: s.CAFile},
		Global: &credentials.Source{SubscriptionID: s.SubscriptionID, TenantID: s.TenantID, ClientID: s.ClientID, ClientSecret: s.ClientSecret},
		// As `cerulean-local up` does: the manager's token from the TokenRequest API, as a kubelet projects it.
		TokenSource: credentials.ServiceAccountTokenSource(e.cs.CoreV1(), e.systemNS, managerSA, time.Now),
	}
	e.r = credentials.NewResolver(e.kube, e.settings)
	return e
}

func (e *env) namespace(t *testing.T, prefix string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}
	if err := e.kube.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func (e *env) saToken(ctx context.Context) (string, error) {
	tr, err := e.cs.CoreV1().ServiceAccounts(e.systemNS).CreateToken(ctx, managerSA, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{exchangeAudience}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// principal creates a service principal with no credential yet.
func (e *env) principal(t *testing.T, name string) entra.Principal {
	t.Helper()
	s := e.c.Settings()
	p, err := e.c.Entra().Directory.CreatePrincipal(t.Context(), entra.Principal{TenantID: s.TenantID, Kind: entra.KindServicePrincipal, DisplayName: name})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (e *env) addSecret(t *testing.T, p entra.Principal) string {
	t.Helper()
	secret, _, err := e.c.Entra().Directory.AddSecret(t.Context(), p.TenantID, p.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// addCertificate registers a new self-signed certificate and returns it with its key as PEM.
func (e *env) addCertificate(t *testing.T, p entra.Principal) []byte {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: p.DisplayName},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	if _, err := e.c.Entra().Directory.AddCertificate(t.Context(), p.TenantID, p.ClientID, cert); err != nil {
		t.Fatal(err)
	}
	pkcs8, _ := x509.MarshalPKCS8PrivateKey(key)
	return append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})...)
}

// federate lets the manager's service account sign in as p.
func (e *env) federate(t *testing.T, p entra.Principal) {
	t.Helper()
	if _, err := e.c.Entra().Directory.PutFederatedCredential(t.Context(), p.TenantID, p.ClientID, entra.FederatedCredential{
		Name: "manager", Issuer: devenvtest.ControlPlane(t).IssuerURL, Subject: "system:serviceaccount:" + e.systemNS + ":" + managerSA,
		Audiences: []string{exchangeAudience},
	}); err != nil {
		t.Fatal(err)
	}
}

// secret writes (creates or replaces) a credential secret in the resources' namespace.
func (e *env) secret(t *testing.T, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, StringData: data}
	err := e.kube.Create(t.Context(), s)
	if client.IgnoreAlreadyExists(err) != nil {
		t.Fatal(err)
	}
	if err != nil {
		var cur corev1.Secret
		if err := e.kube.Get(t.Context(), client.ObjectKeyFromObject(s), &cur); err != nil {
			t.Fatal(err)
		}
		cur.Data, cur.StringData = nil, data
		if err := e.kube.Update(t.Context(), &cur); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) keys(p entra.Principal) map[string]string {
	return map[string]string{"AZURE_SUBSCRIPTION_ID": e.c.Settings().SubscriptionID, "AZURE_TENANT_ID": p.TenantID, "AZURE_CLIENT_ID": p.ClientID}
}

// resource stands for an Azure resource of the manager: any namespaced object with annotations.
func (e *env) resource(name string, annotations map[string]string) client.Object {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name, Annotations: annotations}}
}

// tokenRequests counts the token requests the cloud's Entra ID has answered.
func (e *env) tokenRequests() int {
	return len(e.c.Requests(reqlog.Filter{Service: "entra", Method: http.MethodPost, PathPrefix: "/" + e.c.Settings().TenantID + "/oauth2/v2.0/token"}))
}

// appID gets an ARM token from cred and returns the application it was issued to.
func (e *env) appID(t *testing.T, cred azcore.TokenCredential) string {
	t.Helper()
	tok, err := cred.GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{cloud.ResourceManagerAudience + ".default"}})
	if err != nil {
		t.Fatalf("get token: %v", err)
	}
	claims, err := e.c.Entra().Verify(t.Context(), tok.Token, func(string) bool { return true })
	if err != nil {
		t.Fatalf("verify token: %v", err)
	}
	return claims.AppID
}

func fresh(t *testing.T, c *credentials.Credential) azcore.TokenCredential {
	t.Helper()
	cred, err := c.Fresh(t.Context())
	if err != nil {
		t.Fatalf("Fresh: %v", err)
	}
	return cred
}

// Each scope and each kind of credential resolves and gets a real token from the local cloud,
// issued to the application it names.
func TestScopesAndKinds(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	s := e.c.Settings()

	// No aso-credential in the namespace: the global credential.
	cred, err := e.r.For(ctx, e.resource("plain", nil))
	if err != nil {
		t.Fatalf("For: %v", err)
	}
	if cred.Source != "global" || cred.ClientID != s.ClientID || cred.SubscriptionID != s.SubscriptionID || cred.Kind != credentials.KindSecret {
		t.Errorf("global credential = %+v", cred)
	}
	if got := e.appID(t, fresh(t, cred)); got != s.ClientID {
		t.Errorf("global token issued to %s, want %s", got, s.ClientID)
	}

	// The namespace's aso-credential, a certificate.
	nsApp := e.principal(t, "namespace-app")
	data := e.keys(nsApp)
	data["AZURE_CLIENT_CERTIFICATE"] = string(e.addCertificate(t, nsApp))
	e.secret(t, "aso-credential", data)
	cred, err = e.r.For(ctx, e.resource("plain", nil))
	if err != nil {
		t.Fatalf("For: %v", err)
	}
	if cred.Source != "namespace "+e.ns+"/aso-credential" || cred.ClientID != nsApp.ClientID || cred.Kind != credentials.KindCertificate {
		t.Errorf("namespace credential = %+v", cred)
	}
	if got := e.appID(t, fresh(t, cred)); got != nsApp.ClientID {
		t.Errorf("certificate token issued to %s, want %s", got, nsApp.ClientID)
	}
	if got := e.appID(t, cred.Cached()); got != nsApp.ClientID {
		t.Errorf("cached certificate token issued to %s", got)
	}

	// A resource's own secret wins over the namespace's: a client secret.
	resApp := e.principal(t, "resource-app")
	data = e.keys(resApp)
	data["AZURE_CLIENT_SECRET"] = e.addSecret(t, resApp)
	e.secret(t, "per-resource", data)
	cred, err = e.r.For(ctx, e.resource("special", map[string]string{credentials.AnnotationCredentialFrom: "per-resource"}))
	if err != nil {
		t.Fatalf("For: %v", err)
	}
	if cred.Source != "secret "+e.ns+"/per-resource" || cred.ClientID != resApp.ClientID || cred.Kind != credentials.KindSecret {
		t.Errorf("per-resource credential = %+v", cred)
	}
	if got := e.appID(t, fresh(t, cred)); got != resApp.ClientID {
		t.Errorf("client-secret token issued to %s, want %s", got, resApp.ClientID)
	}

	// Workload identity: the manager's own service-account token, from the TokenRequest API of the
	// real kube-apiserver, exchanged at Entra ID through a federated credential.
	wiApp := e.principal(t, "workload-app")
	e.federate(t, wiApp)
	data = e.keys(wiApp)
	data["USE_WORKLOAD_IDENTITY_AUTH"] = "true"
	e.secret(t, "workload", data)
	cred, err = e.r.For(ctx, e.resource("wi", map[string]string{credentials.AnnotationCredentialFrom: "workload"}))
	if err != nil {
		t.Fatalf("For: %v", err)
	}
	if cred.Kind != credentials.KindWorkloadIdentity || cred.ClientID != wiApp.ClientID {
		t.Errorf("workload identity credential = %+v", cred)
	}
	if got := e.appID(t, fresh(t, cred)); got != wiApp.ClientID {
		t.Errorf("workload identity token issued to %s, want %s", got, wiApp.ClientID)
	}

	// The global credential from the manager's azure.Config: the bootstrap principal's
	// certificate file.
	t.Run("global certificate from azure.Config", func(t *testing.T) {
		cfg := e.settings.Azure
		cfg.SubscriptionID, cfg.TenantID, cfg.ClientID, cfg.ClientCertificatePath = s.SubscriptionID, s.TenantID, s.ClientID, s.ClientCertificatePath
		settings, err := credentials.SettingsFromConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cred, err := credentials.NewResolver(e.kube, settings).For(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.systemNS, Name: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if cred.Source != "global" || cred.Kind != credentials.KindCertificate {
			t.Errorf("credential = %+v", cred)
		}
		if got := e.appID(t, fresh(t, cred)); got != s.ClientID {
			t.Errorf("token issued to %s, want %s", got, s.ClientID)
		}
		cfg.ClientID = ""
		if settings, err := credentials.SettingsFromConfig(cfg); err != nil || settings.Global != nil {
			t.Errorf("no client id: %+v, %v; want no global credential", settings.Global, err)
		}
	})

	// The global credential as workload identity, reading a projected token file as in a pod.
	t.Run("global workload identity from a token file", func(t *testing.T) {
		tok, err := e.saToken(ctx)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Join(t.TempDir(), "azure-identity-token")
		if err := os.WriteFile(file, []byte(tok), 0o600); err != nil {
			t.Fatal(err)
		}
		vars := map[string]string{"AZURE_SUBSCRIPTION_ID": s.SubscriptionID, "AZURE_TENANT_ID": s.TenantID, "AZURE_CLIENT_ID": wiApp.ClientID,
			"USE_WORKLOAD_IDENTITY_AUTH": "true", "AZURE_FEDERATED_TOKEN_FILE": file}
		global, err := credentials.SourceFromEnv(func(k string) string { return vars[k] })
		if err != nil {
			t.Fatal(err)
		}
		settings := e.settings
		settings.Global, settings.TokenSource = global, nil
		cred, err := credentials.NewResolver(e.kube, settings).For(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.systemNS, Name: "x"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := e.appID(t, fresh(t, cred)); got != wiApp.ClientID {
			t.Errorf("token issued to %s, want %s", got, wiApp.ClientID)
		}
	})
}

// Fresh gives a credential whose first use asks Entra ID for a new token, every time; Cached
// reuses one credential and its token.
func TestFreshRequestsATokenEachTimeCachedDoesNot(t *testing.T) {
	e := setup(t)
	app := e.principal(t, "app")
	data := e.keys(app)
	data["AZURE_CLIENT_SECRET"] = e.addSecret(t, app)
	e.secret(t, "aso-credential", data)

	cred, err := e.r.For(t.Context(), e.resource("r", nil))
	if err != nil {
		t.Fatal(err)
	}
	before := e.tokenRequests()
	for range 3 {
		e.appID(t, fresh(t, cred))
	}
	if got := e.tokenRequests() - before; got != 3 {
		t.Errorf("3 Fresh credentials made %d token requests, want 3", got)
	}

	before = e.tokenRequests()
	for range 3 {
		again, err := e.r.For(t.Context(), e.resource("other", nil))
		if err != nil {
			t.Fatal(err)
		}
		if again.Cached() != cred.Cached() {
			t.Error("Cached differs between resources of one source")
		}
		e.appID(t, again.Cached())
	}
	if got := e.tokenRequests() - before; got != 1 {
		t.Errorf("3 uses of the cached credential made %d token requests, want 1", got)
	}
}

// A rotated secret is used at the next For: the cached credential is replaced.
func TestRotatedSecretIsUsed(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	app := e.principal(t, "app")
	data := e.keys(app)
	data["AZURE_CLIENT_SECRET"] = e.addSecret(t, app)
	e.secret(t, "aso-credential", data)
	first, err := e.r.For(ctx, e.resource("r", nil))
	if err != nil {
		t.Fatal(err)
	}
	e.appID(t, first.Cached())

	// A wrong secret: the very next For uses it, and Entra ID refuses it.
	data["AZURE_CLIENT_SECRET"] = "not-the-secret-4711"
	e.secret(t, "aso-credential", data)
	wrong, err := e.r.For(ctx, e.resource("r", nil))
	if err != nil {
		t.Fatal(err)
	}
	if wrong.Cached() == first.Cached() {
		t.Fatal("the cached credential survived a change of the secret")
	}
	_, err = wrong.Cached().GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{cloud.ResourceManagerAudience + ".default"}})
	if err == nil || !strings.Contains(err.Error(), "AADSTS7000215") {
		t.Errorf("token with a wrong secret: %v", err)
	}
	if err != nil && strings.Contains(err.Error(), "not-the-secret-4711") {
		t.Errorf("error shows the secret: %v", err)
	}

	// Rotated to a new valid secret.
	data["AZURE_CLIENT_SECRET"] = e.addSecret(t, app)
	e.secret(t, "aso-credential", data)
	rotated, err := e.r.For(ctx, e.resource("r", nil))
	if err != nil {
		t.Fatal(err)
	}
	if got := e.appID(t, rotated.Cached()); got != app.ClientID {
		t.Errorf("token after rotation issued to %s", got)
	}
}

// Bad or missing secrets end in sentinel errors that name keys and secrets, never values.
func TestErrors(t *testing.T) {
	e := setup(t)
	ctx := t.Context()
	app := e.principal(t, "app")
	secret := e.addSecret(t, app)
	cert := string(e.addCertificate(t, app))

	for _, tc := range []struct {
		name     string
		data     map[string]string // the per-resource secret; nil = none
		sentinel error
		want     []string
	}{
		{name: "missing secret", sentinel: credentials.ErrSecretNotFound, want: []string{e.ns + "/creds", "serviceoperator.azure.com/credential-from"}},
		{name: "missing keys", data: map[string]string{"AZURE_CLIENT_SECRET": secret},
			sentinel: credentials.ErrInvalidCredential, want: []string{"AZURE_SUBSCRIPTION_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_ID", e.ns + "/creds"}},
		{name: "no way to authenticate", data: e.keys(app), sentinel: credentials.ErrInvalidCredential,
			want: []string{"one of AZURE_CLIENT_SECRET, AZURE_CLIENT_CERTIFICATE or USE_WORKLOAD_IDENTITY_AUTH=true"}},
		{name: "secret and certificate", data: with(e.keys(app), "AZURE_CLIENT_SECRET", secret, "AZURE_CLIENT_CERTIFICATE", cert),
			sentinel: credentials.ErrInvalidCredential, want: []string{"only one of"}},
		{name: "secret and workload identity", data: with(e.keys(app), "AZURE_CLIENT_SECRET", secret, "USE_WORKLOAD_IDENTITY_AUTH", "true"),
			sentinel: credentials.ErrInvalidCredential, want: []string{"only one of"}},
		{name: "bad workload identity flag", data: with(e.keys(app), "USE_WORKLOAD_IDENTITY_AUTH", "yes-"+secret),
			sentinel: credentials.ErrInvalidCredential, want: []string{"USE_WORKLOAD_IDENTITY_AUTH must be true or false"}},
		{name: "certificate that does not parse", data: with(e.keys(app), "AZURE_CLIENT_CERTIFICATE", "-----BEGIN CERTIFICATE-----\n"+secret+"\n-----END CERTIFICATE-----\n"),
			sentinel: credentials.ErrInvalidCredential, want: []string{"parse client certificate", e.ns + "/creds"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := "creds"
			_ = e.kube.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}})
			if tc.data != nil {
				e.secret(t, name, tc.data)
			}
			_, err := e.r.For(ctx, e.resource("r", map[string]string{credentials.AnnotationCredentialFrom: name}))
			if !errors.Is(err, tc.sentinel) {
				t.Fatalf("err = %v, want %v", err, tc.sentinel)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), secret) || strings.Contains(err.Error(), "MII") {
				t.Errorf("error %q shows secret material", err)
			}
		})
	}

	t.Run("no namespace secret and no global credential", func(t *testing.T) {
		settings := e.settings
		settings.Global = nil
		_, err := credentials.NewResolver(e.kube, settings).For(ctx, e.resource("r", nil))
		if !errors.Is(err, credentials.ErrSecretNotFound) || !strings.Contains(err.Error(), e.ns+"/aso-credential") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("workload identity without a token", func(t *testing.T) {
		settings := e.settings
		settings.TokenSource = nil
		e.secret(t, "wi", with(e.keys(app), "USE_WORKLOAD_IDENTITY_AUTH", "true"))
		cred, err := credentials.NewResolver(e.kube, settings).For(ctx, e.resource("r", map[string]string{credentials.AnnotationCredentialFrom: "wi"}))
		if err != nil {
			t.Fatal(err)
		}
		_, err = cred.Cached().GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{cloud.ResourceManagerAudience + ".default"}})
		if err == nil || !strings.Contains(err.Error(), "AZURE_FEDERATED_TOKEN_FILE") {
			t.Errorf("err = %v", err)
		}
	})
}

func with(m map[string]string, kv ...string) map[string]string {
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return m
}

// The token source asks the TokenRequest API once per 80% of the token's lifetime, as a kubelet
// rotates a projected token.
func TestServiceAccountTokenSource(t *testing.T) {
	e := setup(t)
	clock := cloudtest.NewClock()
	src := credentials.ServiceAccountTokenSource(e.cs.CoreV1(), e.systemNS, managerSA, clock.Now)
	first, err := src(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(47 * time.Minute)
	if again, _ := src(t.Context()); again != first {
		t.Error("token replaced before 80% of its hour")
	}
	clock.Advance(2 * time.Minute)
	rotated, err := src(t.Context())
	if err != nil || rotated == first {
		t.Errorf("token not rotated after 49 minutes: %v", err)
	}
	if _, err := credentials.ServiceAccountTokenSource(e.cs.CoreV1(), e.systemNS, "nobody", clock.Now)(t.Context()); err == nil ||
		!strings.Contains(err.Error(), "service account "+e.systemNS+"/nobody") {
		t.Errorf("token of a missing service account: %v", err)
	}
}

func TestSourceFromEnv(t *testing.T) {
	env := func(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }
	if s, err := credentials.SourceFromEnv(env(nil)); s != nil || err != nil {
		t.Errorf("no AZURE_CLIENT_ID: %v, %v; want no global credential", s, err)
	}
	file := filepath.Join(t.TempDir(), "client.pem")
	if err := os.WriteFile(file, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := map[string]string{"AZURE_SUBSCRIPTION_ID": "s", "AZURE_TENANT_ID": "t", "AZURE_CLIENT_ID": "c"}
	s, err := credentials.SourceFromEnv(env(with(base, "AZURE_CLIENT_CERTIFICATE_PATH", file)))
	if err != nil || string(s.ClientCertificate) != "PEM" || s.Kind() != credentials.KindCertificate {
		t.Errorf("certificate path: %+v, %v", s, err)
	}
	_, err = credentials.SourceFromEnv(env(map[string]string{"AZURE_CLIENT_ID": "c", "AZURE_CLIENT_SECRET": "hunter2"}))
	if !errors.Is(err, credentials.ErrInvalidCredential) || !strings.Contains(err.Error(), "global credential: ") ||
		!strings.Contains(err.Error(), "AZURE_SUBSCRIPTION_ID, AZURE_TENANT_ID") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("incomplete global credential: %v", err)
	}
	_, err = credentials.SourceFromEnv(env(with(map[string]string{"AZURE_CLIENT_ID": "c"}, "AZURE_CLIENT_CERTIFICATE_PATH", file+".missing")))
	if err == nil || !strings.Contains(err.Error(), "AZURE_CLIENT_CERTIFICATE_PATH") {
		t.Errorf("missing certificate file: %v", err)
	}
}
