package nodeagent_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	azcloud "github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/entra"
	"github.com/cerulean/cerulean/internal/controller/podidentity"
	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/metricstest"
	"github.com/cerulean/cerulean/internal/podidentity/nodeagent"
)

// nmiCount is the number of token requests in aad-pod-identity's NMI histogram.
const nmiCount = "aadpodidentity_nmi_operations_duration_seconds_count"

// staticToken is a credential that hands out one access token: what an app does with the token
// IMDS gave it.
type staticToken string

func (s staticToken) GetToken(context.Context, policy.TokenRequestOptions) (azcore.AccessToken, error) {
	return azcore.AccessToken{Token: string(s), ExpiresOn: time.Now().Add(time.Hour)}, nil
}

// Service-principal AzureIdentities (type 1: the client secret in the clientPassword Secret's
// clientSecret; type 2: a certificate and its key in its certificate key): the node agent gets
// their tokens from Entra ID with the client-credentials flow (the real azidentity against the
// local cloud), and each token reads the Key Vault secret its principal is granted. A missing
// Secret, a Secret the agent may not read and a wrong client secret are refused with a message
// naming the objects and the fix; no secret or token is ever in the agent's log or Events. The
// agent is asked on /host/token/, as a host-network helper does, so no root is needed.
func TestServicePrincipalIdentities(t *testing.T) {
	ctx := t.Context()
	cp := devenvtest.ControlPlane(t)
	podidentitytest.InstallCRDs(t, cp.RESTConfig)
	kc := ok(client.New(cp.RESTConfig, client.Options{Scheme: podidentitytest.Scheme(t)}))
	az := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := az.Settings()
	owner, armOpts := cloudtest.OwnerCred(t, az), cloudtest.ARMOptions(az)
	dir := az.Entra().Directory

	// Two principals: one with a client secret, one with a certificate.
	spSecret := ok(dir.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindServicePrincipal, DisplayName: "sp-secret"}))
	clientSecret, _, err := dir.AddSecret(ctx, s.TenantID, spSecret.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	spCert := ok(dir.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindServicePrincipal, DisplayName: "sp-cert"}))
	certPEM, cert := selfSigned(t, "sp-cert")
	if _, err := dir.AddCertificate(ctx, s.TenantID, spCert.ClientID, cert); err != nil {
		t.Fatal(err)
	}

	// A vault with a secret both may read.
	cloudtest.CreateGroup(t, az, owner, armOpts, "westeurope", "rg")
	v := cloudtest.CreateRBACVault(t, az, owner, armOpts, "westeurope", "rg", "kv-sp")
	env := &azureEnv{c: az, s: s, owner: owner, opts: armOpts}
	assignRole(t, env, *v.ID, roleSecretsOfficer, s.ObjectID)
	assignRole(t, env, *v.ID, roleSecretsUser, spSecret.ObjectID)
	assignRole(t, env, *v.ID, roleSecretsUser, spCert.ObjectID)
	want := "s3cret-" + uuid.NewString()
	adminSecrets := ok(azsecrets.NewClient(*v.Properties.VaultURI, owner, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(az), DisableChallengeResourceVerification: true}))
	if _, err := adminSecrets.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: &want}, nil); err != nil {
		t.Fatal(err)
	}

	// The cluster side: a node (no VM behind it: service principals need none), the users'
	// objects as written for aad-pod-identity, and a pod per identity.
	const ns = "sp"
	node := "sp-node-" + uuid.NewString()[:6]
	for _, o := range []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sp2"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sp-secret"}, Data: map[string][]byte{nodeagent.SecretKeyClientSecret: []byte(clientSecret)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sp-wrong"}, Data: map[string][]byte{nodeagent.SecretKeyClientSecret: []byte("not-" + clientSecret)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sp-cert"}, Data: map[string][]byte{nodeagent.SecretKeyCertificate: certPEM}},
	} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}) })
	podidentitytest.GrantAll(t, kc, ns, "sp2")
	// sp-elsewhere's identity (and pod) live in namespace sp2 and name the Secret sp/sp-secret;
	// sp-missing names no namespace: its own is meant.
	secretNS := map[string]string{"sp-secret": ns, "sp-cert": ns, "sp-missing": "", "sp-wrong": ns, "sp-elsewhere": ns}
	idNS := func(name string) string {
		if name == "sp-elsewhere" {
			return "sp2"
		}
		return ns
	}
	podidentitytest.StartController(t, cp.RESTConfig, podidentity.Options{RetryAfter: time.Second, Compute: &podidentity.ARMCompute{Credential: owner, Options: armOpts}})
	for i, id := range []struct {
		name, secret string
		typ          aadv1.IdentityType
		clientID     string
	}{
		{"sp-secret", "sp-secret", aadv1.ServicePrincipal, spSecret.ClientID},
		{"sp-cert", "sp-cert", aadv1.ServicePrincipalCertificate, spCert.ClientID},
		{"sp-missing", "sp-nothere", aadv1.ServicePrincipal, spSecret.ClientID},
		{"sp-wrong", "sp-wrong", aadv1.ServicePrincipal, spSecret.ClientID},
		{"sp-elsewhere", "sp-secret", aadv1.ServicePrincipal, spSecret.ClientID},
	} {
		objs := []client.Object{
			&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: idNS(id.name), Name: id.name}, Spec: aadv1.AzureIdentitySpec{
				Type: id.typ, ClientID: id.clientID, TenantID: s.TenantID, ClientPassword: corev1.SecretReference{Name: id.secret, Namespace: secretNS[id.name]}}},
			&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: idNS(id.name), Name: id.name}, Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: id.name, Selector: id.name}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: idNS(id.name), Name: "app-" + id.name, Labels: map[string]string{aadv1.PodLabel: id.name}},
				Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}}},
		}
		for _, o := range objs {
			if err := kc.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		p := objs[2].(*corev1.Pod)
		p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.252.0.%d", i+2)}
		if err := kc.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	var logs cloudtest.SyncBuffer
	entraOpts := azcore.ClientOptions{Cloud: azcloud.Configuration{ActiveDirectoryAuthorityHost: s.AuthorityHost}, Transport: &http.Client{Transport: az.Transport()}}
	// startAgent returns the agent's URL and its metrics endpoint's.
	startAgent := func(cfg *rest.Config) (string, string) {
		t.Helper()
		agent, err := nodeagent.New(nodeagent.Options{
			NodeName: node, Config: cfg, Listen: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0", Entra: entraOpts,
			Tokens: &nodeagent.IMDSSource{Endpoint: s.URL, Client: &http.Client{Transport: az.Transport()}},
			IMDS:   ok(url.Parse(s.URL)), IMDSTransport: az.Transport(), AssignWait: 20 * time.Second, FlushPeriod: time.Hour,
			Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		})
		if err != nil {
			t.Fatal(err)
		}
		agentCtx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- agent.Run(agentCtx) }()
		t.Cleanup(func() {
			_ = agent.FlushAudit(context.Background())
			stop()
			if err := <-done; err != nil {
				t.Errorf("agent: %v", err)
			}
		})
		return "http://" + agent.Addr(), "http://" + agent.MetricsAddr()
	}
	base, metricsBase := startAgent(cp.RESTConfig)
	hostToken := func(base, pod string) (int, map[string]any) {
		t.Helper()
		podNS := idNS(strings.TrimPrefix(pod, "app-"))
		req := ok(http.NewRequestWithContext(ctx, http.MethodGet, base+"/host/token/?resource="+url.QueryEscape(vaultResource), nil))
		req.Header.Set("podname", pod)
		req.Header.Set("podns", podNS)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		b := ok(io.ReadAll(resp.Body))
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("answer %s: %v", b, err)
		}
		return resp.StatusCode, out
	}
	var issued []string
	for _, name := range []string{"sp-secret", "sp-cert"} {
		t.Run(name, func(t *testing.T) {
			status, out := hostToken(base, "app-"+name)
			body, _ := out["token"].(map[string]any)
			token, _ := body["access_token"].(string)
			if status != http.StatusOK || token == "" {
				t.Fatalf("token of %s: %d %v", name, status, out)
			}
			issued = append(issued, token)
			claims := ok(az.Entra().Verify(ctx, token, func(aud string) bool { return strings.TrimSuffix(aud, "/") == vaultResource }))
			// appidacr: 1 is a client secret, 2 a certificate (Entra ID's meaning).
			wantApp, wantACR := map[string]string{"sp-secret": spSecret.ClientID, "sp-cert": spCert.ClientID}[name], map[string]string{"sp-secret": "1", "sp-cert": "2"}[name]
			if !strings.EqualFold(claims.AppID, wantApp) || !strings.EqualFold(fmt.Sprint(out["clientid"]), wantApp) || claims.AppIDACR != wantACR {
				t.Errorf("token of %s: appid %s appidacr %s, clientid %v; want %s, %s", name, claims.AppID, claims.AppIDACR, out["clientid"], wantApp, wantACR)
			}
			secrets := ok(azsecrets.NewClient(*v.Properties.VaultURI, staticToken(token), &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(az), DisableChallengeResourceVerification: true}))
			got, err := secrets.GetSecret(ctx, "db-password", "", nil)
			if err != nil || *got.Value != want {
				t.Fatalf("read the secret with %s's token: %v", name, err)
			}
		})
	}

	refused := func(t *testing.T, base, pod string, parts ...string) string {
		t.Helper()
		status, out := hostToken(base, pod)
		msg, _ := out["error_description"].(string)
		if status != http.StatusForbidden || out["error"] != "invalid_identity" {
			t.Fatalf("%s: %d %v, want 403 invalid_identity", pod, status, out)
		}
		for _, p := range parts {
			if !strings.Contains(msg, p) {
				t.Errorf("%s: refusal %q lacks %q", pod, msg, p)
			}
		}
		return msg
	}
	t.Run("missing Secret", func(t *testing.T) {
		refused(t, base, "app-sp-missing", "Secret sp/sp-nothere", "AzureIdentity sp/sp-missing", "was not found")
	})
	t.Run("Secret of another namespace", func(t *testing.T) {
		refused(t, base, "app-sp-elsewhere", "Secret sp/sp-secret", "AzureIdentity sp2/sp-elsewhere", "must be a Secret of its own namespace (sp2)")
	})
	t.Run("wrong client secret", func(t *testing.T) {
		refused(t, base, "app-sp-wrong", "AADSTS7000215", spSecret.ClientID)
	})
	t.Run("Secret the agent may not read", func(t *testing.T) {
		// An agent whose service account reads everything it needs but Secrets.
		sa := "node-agent-" + uuid.NewString()[:6]
		for _, o := range []client.Object{
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: sa}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch", "update"}},
				{APIGroups: []string{aadv1.GroupVersion.Group}, Resources: []string{"*"}, Verbs: []string{"get", "list", "watch"}},
			}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: sa}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: sa},
				Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: sa}}},
		} {
			if err := kc.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		cfg := rest.CopyConfig(cp.RESTConfig)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
		other, otherMetrics := startAgent(cfg)
		refused(t, other, "app-sp-secret", "may not read Secret sp/sp-secret", "grant its service account get on that Secret")
		// Each agent reports on its own registry: this refusal is this agent's alone.
		body := ok(metricstest.Scrape(otherMetrics))
		if got := metricstest.Sum(body, "aadpodidentity_kubernetes_api_operations_errors_count", `operation_type="get_secret"`); got != 1 {
			t.Errorf("the second agent's get_secret errors: %v, want 1", got)
		}
		if got := metricstest.Sum(body, nmiCount, `status_code="403"`); got != 1 {
			t.Errorf("the second agent's refusals: %v, want 1", got)
		}
	})

	// aad-pod-identity's NMI series, after the requests above: two tokens issued, three
	// refusals (two for pods of namespace sp, one of sp2), two tokens from Entra ID and one
	// refused by it, one Secret that was not there.
	body := ok(metricstest.Scrape(metricsBase))
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{nmiCount, []string{`operation_type="/host/token/"`, `status_code="200"`, `namespace="sp"`, `resource="` + vaultResource + `"`}, 2},
		{nmiCount, []string{`operation_type="/host/token/"`, `status_code="403"`, `namespace="sp"`, `resource=""`}, 2},
		{nmiCount, []string{`operation_type="/host/token/"`, `status_code="403"`, `namespace="sp2"`, `resource=""`}, 1},
		{nmiCount, nil, 5},
		{"aadpodidentity_imds_operations_duration_seconds_count", []string{`operation_type="adal_token"`}, 2},
		{"aadpodidentity_imds_operations_errors_count", []string{`operation_type="adal_token"`}, 1},
		{"aadpodidentity_kubernetes_api_operations_errors_count", []string{`operation_type="get_secret"`}, 1},
	} {
		if got := metricstest.Sum(body, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	for _, secret := range append([]string{clientSecret, spSecret.ClientID, spCert.ClientID}, issued...) {
		if strings.Contains(body, secret) {
			t.Errorf("the agent's metrics contain a client secret, a client id or a token")
		}
	}

	// Nothing secret in the agent's log or its Events.
	var evs corev1.EventList
	if err := kc.List(ctx, &evs); err != nil {
		t.Fatal(err)
	}
	all := logs.String()
	for _, e := range evs.Items {
		all += "\n" + e.Message
	}
	for _, secret := range append([]string{clientSecret}, issued...) {
		if strings.Contains(all, secret) {
			t.Errorf("the agent's log or Events contain a client secret or a token")
		}
	}
}

// selfSigned is a certificate and its key as PEM (what the Secret's certificate key holds).
func selfSigned(t *testing.T, cn string) ([]byte, *x509.Certificate) {
	t.Helper()
	key := ok(rsa.GenerateKey(rand.Reader, 2048))
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	der := ok(x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key))
	cert := ok(x509.ParseCertificate(der))
	keyDER := ok(x509.MarshalPKCS8PrivateKey(key))
	out := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})...)
	return out, cert
}

// servicePrincipalPod makes a service principal with a client secret, and in namespace ns a
// type-1 AzureIdentity with its Secret, a binding and a Running pod "app" on node that it
// selects (the assignment controller runs too); it returns the principal's client id.
func servicePrincipalPod(t *testing.T, az *cloud.Cloud, cfg *rest.Config, node, ns string) string {
	t.Helper()
	ctx := t.Context()
	s := az.Settings()
	sp := ok(az.Entra().Directory.CreatePrincipal(ctx, entra.Principal{TenantID: s.TenantID, Kind: entra.KindServicePrincipal, DisplayName: ns}))
	secret, _, err := az.Entra().Directory.AddSecret(ctx, s.TenantID, sp.ClientID, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	kc := ok(client.New(cfg, client.Options{Scheme: podidentitytest.Scheme(t)}))
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app", Labels: map[string]string{aadv1.PodLabel: ns}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app"}}}}
	for _, o := range []client.Object{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sp"}, Data: map[string][]byte{nodeagent.SecretKeyClientSecret: []byte(secret)}},
		&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sp"}, Spec: aadv1.AzureIdentitySpec{
			Type: aadv1.ServicePrincipal, ClientID: sp.ClientID, TenantID: s.TenantID, ClientPassword: corev1.SecretReference{Name: "sp", Namespace: ns}}},
		&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "sp"}, Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: "sp", Selector: ns}},
		pod,
	} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = kc.Delete(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}) })
	podidentitytest.GrantAll(t, kc, ns)
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.253.0.2"}
	if err := kc.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	podidentitytest.StartController(t, cfg, podidentity.Options{RetryAfter: time.Second,
		Compute: &podidentity.ARMCompute{Credential: cloudtest.OwnerCred(t, az), Options: cloudtest.ARMOptions(az)}})
	return sp.ClientID
}
