package devenv_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

func TestMain(m *testing.M) { devenvtest.Main(m, devenvtest.WithNode()) }

const azureAudience = "api://AzureADTokenExchange"

// A workload identity token from the TokenRequest API verifies against keys that a caller without
// credentials finds through the issuer's discovery document, exactly as Entra ID fetches them.
func TestServiceAccountTokenVerifiesWithAnonymouslyFetchedKeys(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)

	tr, err := cs.CoreV1().ServiceAccounts("default").CreateToken(ctx, "default", &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{azureAudience}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}

	anon := anonymousClient(cp.CACertPEM)
	keys := fetchIssuerKeys(t, anon, cp.IssuerURL)
	tok, err := jwt.ParseSigned(tr.Status.Token, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatalf("parse token: %v", err)
	}
	var claims jwt.Claims
	if err := tok.Claims(keys, &claims); err != nil {
		t.Fatalf("token does not verify with the issuer's published keys: %v", err)
	}
	if err := claims.ValidateWithLeeway(jwt.Expected{
		Issuer:      cp.IssuerURL,
		Subject:     "system:serviceaccount:default:default",
		AnyAudience: jwt.Audience{azureAudience},
		Time:        time.Now(),
	}, time.Minute); err != nil {
		t.Fatalf("claims: %v", err)
	}
}

// Without Cerulean's anonymous binding the issuer documents are closed to callers without
// credentials, so the test above depends on it.
func TestIssuerDiscoveryNeedsTheAnonymousBinding(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	crbs := cs.RbacV1().ClusterRoleBindings()
	binding, err := crbs.Get(ctx, devenv.AnonymousIssuerDiscoveryBinding, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get binding: %v", err)
	}
	if err := crbs.Delete(ctx, binding.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete binding: %v", err)
	}
	t.Cleanup(func() {
		restored := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: binding.Name}, RoleRef: binding.RoleRef, Subjects: binding.Subjects}
		if _, err := crbs.Create(context.Background(), restored, metav1.CreateOptions{}); err != nil {
			t.Errorf("restore binding: %v", err)
		}
	})

	anon := anonymousClient(cp.CACertPEM)
	// RBAC changes reach the authorizer through an informer: wait until the refusal shows.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		status, _ := get(ctx, anon, cp.IssuerURL+"/.well-known/openid-configuration")
		return status == http.StatusForbidden || status == http.StatusUnauthorized, nil
	})
	if err != nil {
		t.Fatalf("issuer discovery stayed readable anonymously without %s", binding.Name)
	}
}

// The controller manager runs: namespaces finish deleting and owner references garbage-collect.
func TestControllerManagerFinishesNamespacesAndCollectsGarbage(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)

	ns, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "gc-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	cms := cs.CoreV1().ConfigMaps(ns.Name)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create owner: %v", err)
	}
	_, err = cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "dependent", OwnerReferences: []metav1.OwnerReference{{
		APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
	}}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create dependent: %v", err)
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete owner: %v", err)
	}
	waitGone(t, "dependent ConfigMap", func(ctx context.Context) error {
		_, err := cms.Get(ctx, "dependent", metav1.GetOptions{})
		return err
	})

	if err := cs.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete namespace: %v", err)
	}
	waitGone(t, "namespace", func(ctx context.Context) error {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns.Name, metav1.GetOptions{})
		return err
	})
}

// A restart on the same data directory keeps the data and serves the issuer on the same URL, byte
// for byte; a second control plane on a directory in use, or on an unusable one, fails clearly.
// The restart also gives kube-apiserver an environment of its own (APIServerEnv), as the bench does.
func TestRestartResumesWithTheSameIssuer(t *testing.T) {
	// -short skips it on a developer's quick run; CI runs it always.
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("starts two more control planes")
	}
	dir := t.TempDir()
	ctx := t.Context()
	first, err := devenv.Start(ctx, devenv.Options{DataDir: dir})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	cs := kubernetes.NewForConfigOrDie(first.RESTConfig)
	if _, err := cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}

	if _, err := devenv.Start(ctx, devenv.Options{DataDir: dir}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second start on a data directory in use: got %v, want an 'in use' error", err)
	}
	first.Stop()

	second, err := devenv.Start(ctx, devenv.Options{DataDir: dir, APIServerEnv: []string{"GOGC=150"}})
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer second.Stop()
	metrics, err := kubernetes.NewForConfigOrDie(second.RESTConfig).CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("kube-apiserver's metrics: %v", err)
	}
	if !strings.Contains(string(metrics), "\ngo_gc_gogc_percent 150\n") {
		t.Errorf("kube-apiserver started with APIServerEnv GOGC=150 does not report go_gc_gogc_percent 150")
	}
	if second.IssuerURL != first.IssuerURL {
		t.Errorf("issuer changed across restart: %q, then %q", first.IssuerURL, second.IssuerURL)
	}
	cs = kubernetes.NewForConfigOrDie(second.RESTConfig)
	if _, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Errorf("data written before the restart: %v", err)
	}
}

func TestStartFailsClearly(t *testing.T) {
	ctx := t.Context()
	t.Run("data directory is a file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := devenv.Start(ctx, devenv.Options{DataDir: file})
		if err == nil || !strings.Contains(err.Error(), "unusable") {
			t.Errorf("got %v, want an 'unusable' error", err)
		}
	})
	t.Run("port taken", func(t *testing.T) {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		port := l.Addr().(*net.TCPAddr).Port
		_, err = devenv.Start(ctx, devenv.Options{DataDir: t.TempDir(), APIServerPort: port})
		if !errors.Is(err, devenv.ErrPortInUse) || !strings.Contains(err.Error(), "kube-apiserver") {
			t.Errorf("got %v, want ErrPortInUse naming kube-apiserver", err)
		}
	})
	t.Run("missing binaries", func(t *testing.T) {
		_, err := devenv.Start(ctx, devenv.Options{DataDir: t.TempDir(), BinDir: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "make tools") {
			t.Errorf("got %v, want a hint to run make tools", err)
		}
	})
}

func anonymousClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
}

// fetchIssuerKeys follows the discovery document to jwks_uri, which must be on the issuer's host.
func fetchIssuerKeys(t *testing.T, client *http.Client, issuer string) *jose.JSONWebKeySet {
	t.Helper()
	status, body := get(t.Context(), client, issuer+"/.well-known/openid-configuration")
	if status != http.StatusOK {
		t.Fatalf("anonymous GET discovery: %d %s", status, body)
	}
	var discovery struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &discovery); err != nil {
		t.Fatalf("decode discovery: %v", err)
	}
	if discovery.Issuer != issuer {
		t.Fatalf("discovery issuer %q, want %q", discovery.Issuer, issuer)
	}
	jwksURL, err := url.Parse(discovery.JWKSURI)
	issuerURL, _ := url.Parse(issuer)
	if err != nil || jwksURL.Host != issuerURL.Host {
		t.Fatalf("jwks_uri %q is not served at the issuer's address %q", discovery.JWKSURI, issuerURL.Host)
	}
	status, body = get(t.Context(), client, discovery.JWKSURI)
	if status != http.StatusOK {
		t.Fatalf("anonymous GET jwks: %d %s", status, body)
	}
	var keys jose.JSONWebKeySet
	if err := json.Unmarshal(body, &keys); err != nil {
		t.Fatalf("decode jwks: %v", err)
	}
	return &keys
}

func get(ctx context.Context, client *http.Client, u string) (int, []byte) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, []byte(err.Error())
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, []byte(err.Error())
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body
}

func waitGone(t *testing.T, what string, get func(context.Context) error) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := get(ctx)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("%s was never removed: %v", what, err)
	}
}

// The control plane reports the Kubernetes version it was built from, not v0.0.0.
func TestAPIServerReportsThePinnedVersion(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	mod, err := os.ReadFile("../../hack/tools/kubernetes/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for line := range strings.SplitSeq(string(mod), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "require" && f[1] == "k8s.io/kubernetes" {
			want = f[2]
		}
	}
	if want == "" {
		t.Fatal("hack/tools/kubernetes/go.mod pins no k8s.io/kubernetes")
	}
	v, err := kubernetes.NewForConfigOrDie(cp.RESTConfig).Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("GET /version: %v", err)
	}
	if v.GitVersion != want || v.Major != "1" {
		t.Errorf("/version reports %s (major %q), want %s", v.GitVersion, v.Major, want)
	}
}
