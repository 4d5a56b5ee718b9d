package webhooks_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	aadv1 "github.com/cerulean/cerulean/api/aadpodidentity/v1"
	ceruleanv1 "github.com/cerulean/cerulean/api/cerulean/v1alpha1"
	"github.com/cerulean/cerulean/internal/controller/credentials"
	"github.com/cerulean/cerulean/internal/controller/podidentity/podidentitytest"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
	"github.com/cerulean/cerulean/internal/manager"
	"github.com/cerulean/cerulean/internal/metricstest"
	"github.com/cerulean/cerulean/internal/webhook/podidentity"
	"github.com/cerulean/cerulean/internal/webhook/webhooks"
	"github.com/cerulean/cerulean/internal/webhook/webhooktest"
	wi "github.com/cerulean/cerulean/internal/webhook/workloadidentity"
)

func TestMain(m *testing.M) { devenvtest.Main(m) }

// A controller-runtime manager set up the way `cerulean manager` does under `cerulean-local up`:
// certificates of its own, served on loopback, registered by URL; kube-apiserver mutates a
// labelled pod through it, with the service account read from the manager's cache; and pod
// identity's admission check refuses, through the same server, a pod labelled with a binding's
// selector by a user who may not use that binding.
func TestManagerServesTheWebhookOnLoopback(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	podidentitytest.InstallCRDs(t, cp.RESTConfig)
	cs, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	const ns = "managed"
	for _, obj := range []func() error{
		func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
				Name: "app", Annotations: map[string]string{wi.ClientIDAnnotation: "11111111-2222-3333-4444-555555555555"},
			}}, metav1.CreateOptions{})
			return err
		},
	} {
		if err := obj(); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	w, err := webhooks.New(cp.RESTConfig, webhooks.Options{
		Namespace: ns, Host: "127.0.0.1", Port: port,
		WorkloadIdentity: wi.Config{TenantID: "99999999-8888-7777-6666-555555555555", AuthorityHost: "https://127.0.0.1:1/"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ml, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := ml.Addr().String()
	_ = ml.Close()
	mgr, err := ctrl.NewManager(cp.RESTConfig, ctrl.Options{Scheme: podidentitytest.Scheme(t), WebhookServer: w.Server(),
		Metrics: metricsserver.Options{BindAddress: metricsAddr}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Setup(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()
	webhooktest.WaitMutating(t, cp.RESTConfig, ns)
	const series = "azwi_mutation_request_count"
	labels := []string{`namespace="managed"`, `service_name="webhook"`}
	scrape := func() string {
		body, err := metricstest.Scrape("http://" + metricsAddr)
		if err != nil {
			t.Fatal(err)
		}
		return body
	}
	before := metricstest.Sum(scrape(), series, labels...) // WaitMutating's probes count too

	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{wi.UseLabel: "true"}}}
	p.Spec.ServiceAccountName = "app"
	p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
	got, err := cs.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, e := range got.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env[wi.ClientIDEnv] != "11111111-2222-3333-4444-555555555555" || env[wi.AuthorityHostEnv] != "https://127.0.0.1:1/" {
		t.Errorf("pod env %v", env)
	}
	// The manager's metrics endpoint counts the mutation under upstream's name and labels.
	body := scrape()
	if n := metricstest.Sum(body, series, labels...) - before; n != 1 || !strings.Contains(body, "# TYPE azwi_mutation_request histogram") {
		t.Errorf("%s grew by %v for one pod, want 1 (a histogram):\n%s", series, n, grepLines(body, "azwi_"))
	}
	cfg, err := cs.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, wi.ConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.Webhooks[0].ClientConfig.CABundle) != string(w.Rotator().CABundle()) || len(w.Rotator().CABundle()) == 0 {
		t.Error("the configuration does not carry the manager's CA bundle")
	}
	// HTTP/2 is off (rapid reset; Kubebuilder's default): a client offering it gets HTTP/1.1.
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(w.Rotator().CABundle())
	conn, err := tls.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), &tls.Config{RootCAs: roots, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "http/1.1" {
		t.Errorf("the webhook server negotiated %q, want http/1.1", p)
	}
	_ = conn.Close()

	checkPodIdentityAdmission(t, cp.RESTConfig, cs, ns, w)
	checkGrantAdmission(t, cp.RESTConfig)
}

// checkPodIdentityAdmission: user dev may create and update pods in ns, but may "use" binding
// web only once granted; kube-apiserver asks the manager's check on CREATE and on UPDATE.
func checkPodIdentityAdmission(t *testing.T, rc *rest.Config, cs kubernetes.Interface, ns string, w *webhooks.Webhooks) {
	t.Helper()
	ctx := t.Context()
	kc, err := client.New(rc, client.Options{Scheme: podidentitytest.Scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	podidentitytest.GrantAll(t, kc, ns)
	for _, o := range []client.Object{
		&aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "id"}, Spec: aadv1.AzureIdentitySpec{ClientID: "c", ResourceID: "/r"}},
		&aadv1.AzureIdentityBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: aadv1.AzureIdentityBindingSpec{AzureIdentity: "id", Selector: "web"}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pods"}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "update", "patch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev-pods"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pods"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "dev"}}},
	} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	cfg, err := cs.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, podidentity.ConfigurationName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the manager did not register pod identity's check: %v", err)
	}
	if h := cfg.Webhooks[0]; string(h.ClientConfig.CABundle) != string(w.Rotator().CABundle()) || h.ClientConfig.URL == nil ||
		!strings.HasSuffix(*h.ClientConfig.URL, podidentity.Path) {
		t.Errorf("pod identity's configuration: url %v, CA bundle matches %v", h.ClientConfig.URL,
			string(h.ClientConfig.CABundle) == string(w.Rotator().CABundle()))
	}
	devCfg := rest.CopyConfig(rc)
	devCfg.Impersonate = rest.ImpersonationConfig{UserName: "dev", Groups: []string{"system:authenticated"}}
	dev := kubernetes.NewForConfigOrDie(devCfg)
	pod := func(name string, labels map[string]string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
		p.Spec.Containers = []corev1.Container{{Name: "app", Image: "app"}}
		return p
	}
	labelled := map[string]string{aadv1.PodLabel: "web"}

	// kube-apiserver learns of the configuration and the Role through watches: dry-run until
	// the check answers.
	var err2 error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err2 = dev.CoreV1().Pods(ns).Create(ctx, pod("probe", labelled), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err2 != nil && strings.Contains(err2.Error(), "AzureIdentityBinding") || time.Now().After(deadline) {
			break
		}
	}
	if !apierrors.IsForbidden(err2) || !strings.Contains(err2.Error(), "AzureIdentityBinding "+ns+"/web") {
		t.Fatalf("dev created a pod selecting binding web without \"use\" on it: err=%v", err2)
	}
	// A pod that selects no identity is no business of the check.
	if _, err := dev.CoreV1().Pods(ns).Create(ctx, pod("plain", nil), metav1.CreateOptions{}); err != nil {
		t.Fatalf("dev creates an unlabelled pod: %v", err)
	}
	// Relabelling an existing pod is an UPDATE, checked the same way.
	plain, err := dev.CoreV1().Pods(ns).Get(ctx, "plain", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	plain.Labels = labelled
	if _, err := dev.CoreV1().Pods(ns).Update(ctx, plain, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("dev relabelled a pod to select binding web: err=%v", err)
	}
	// Granted "use" on the binding, dev may.
	for _, o := range []client.Object{
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "use-web"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{aadv1.GroupVersion.Group},
			Resources: []string{"azureidentitybindings"}, ResourceNames: []string{"web"}, Verbs: []string{podidentity.UseVerb}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev-use-web"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "use-web"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "dev"}}},
	} {
		if err := kc.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		_, err2 = dev.CoreV1().Pods(ns).Create(ctx, pod("web", labelled), metav1.CreateOptions{})
		if err2 == nil || time.Now().After(deadline) {
			break
		}
	}
	if err2 != nil {
		t.Errorf("dev, granted use on binding web, creates a pod selecting it: %v", err2)
	}
}

// checkGrantAdmission: issue 22's probes of namespace grants at admission. In a namespace no
// grant lists, an AzureIdentity naming someone's identity, a service principal's identity naming
// another namespace's Secret, and a RoleAssignment owned by an arbitrary ARM scope are refused
// at once, each with a message naming the NamespaceGrant field to add; granted, they pass; and a
// namespace with a credential of its own (aso-credential) is limited by Azure, not by grants.
func checkGrantAdmission(t *testing.T, rc *rest.Config) {
	t.Helper()
	ctx := t.Context()
	if err := manager.InstallCRDs(ctx, rc); err != nil {
		t.Fatal(err)
	}
	kc, err := client.New(rc, client.Options{Scheme: podidentitytest.Scheme(t)})
	if err != nil {
		t.Fatal(err)
	}
	const tenant, other = "tenant", "other-team"
	for _, n := range []string{tenant, other} {
		if err := kc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}); err != nil {
			t.Fatal(err)
		}
	}
	const victimID = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/other-team/providers/Microsoft.ManagedIdentity/userAssignedIdentities/deployer"
	const victimScope = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/other-team"
	identity := func() *aadv1.AzureIdentity {
		return &aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "stolen"},
			Spec: aadv1.AzureIdentitySpec{ResourceID: victimID, ClientID: "66666666-6666-6666-6666-666666666666"}}
	}
	spIdentity := func() *aadv1.AzureIdentity {
		return &aadv1.AzureIdentity{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: "sp"}, Spec: aadv1.AzureIdentitySpec{
			Type: aadv1.ServicePrincipal, TenantID: "t", ClientID: "77777777-7777-7777-7777-777777777777",
			ClientPassword: corev1.SecretReference{Namespace: other, Name: "sp-secret"}}}
	}
	roleAssignment := func() *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "authorization.azure.com/v1api20220401", "kind": "RoleAssignment",
			"metadata": map[string]any{"namespace": tenant, "name": "owner-of-victim"},
			"spec": map[string]any{
				"owner":                   map[string]any{"armId": victimScope},
				"principalId":             "00000000-0000-0000-0000-000000000002",
				"roleDefinitionReference": map[string]any{"wellKnownName": "Owner"},
			},
		}}
		return u
	}
	dryRun := func(o client.Object) error { return kc.Create(ctx, o, client.DryRunAll) }
	// kube-apiserver learns of the configurations and CRDs through watches: retry until the
	// checks answer.
	refused := func(what string, o func() client.Object, wants ...string) {
		t.Helper()
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			err = dryRun(o())
			if err != nil && strings.Contains(err.Error(), "denied") || time.Now().After(deadline) {
				break
			}
		}
		if err == nil {
			t.Errorf("%s: admitted", what)
			return
		}
		for _, w := range wants {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: refusal %q does not say %q", what, err, w)
			}
		}
	}
	admitted := func(what string, o func() client.Object) {
		t.Helper()
		var err error
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if err = dryRun(o()); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}
	refused("an ungranted AzureIdentity", func() client.Object { return identity() },
		"namespace "+tenant+" is not granted", victimID, "spec.identities", "NamespaceGrant")
	refused("a service principal with another namespace's Secret", func() client.Object { return spIdentity() },
		other+"/sp-secret", "identity's own namespace")
	refused("a RoleAssignment on an ungranted scope", func() client.Object { return roleAssignment() },
		"global credential", victimScope, "spec.scopes", "NamespaceGrant")

	grant := &ceruleanv1.NamespaceGrant{ObjectMeta: metav1.ObjectMeta{Name: "admission-" + tenant},
		Spec: ceruleanv1.NamespaceGrantSpec{Namespaces: []string{tenant},
			Identities: []string{victimScope, "66666666-6666-6666-6666-666666666666", "77777777-7777-7777-7777-777777777777"},
			Scopes:     []string{victimScope}}}
	if err := kc.Create(ctx, grant); err != nil {
		t.Fatal(err)
	}
	admitted("a granted AzureIdentity", func() client.Object { return identity() })
	admitted("a RoleAssignment on a granted scope", func() client.Object { return roleAssignment() })
	// A grant never makes another namespace's Secret this namespace's credential.
	refused("a granted service principal with another namespace's Secret", func() client.Object { return spIdentity() }, other+"/sp-secret")
	if err := kc.Delete(ctx, grant); err != nil {
		t.Fatal(err)
	}
	refused("a RoleAssignment once its grant is gone", func() client.Object { return roleAssignment() }, victimScope, "NamespaceGrant")

	// The generic kind: every ARM id of its body is a reference (a subnet naming another
	// team's network security group), and a body member that is not an object is refused by
	// the schema.
	generic := func(props any) func() client.Object {
		return func() client.Object {
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "cerulean.dev/v1alpha1", "kind": "AzureResource",
				"metadata": map[string]any{"namespace": tenant, "name": "subnet"},
				"spec": map[string]any{"owner": map[string]any{"armId": victimScope + "/providers/Microsoft.Network/virtualNetworks/v"},
					"type": "Microsoft.Network/virtualNetworks/subnets", "apiVersion": "2024-05-01", "properties": props},
			}}
		}
	}
	const victimNSG = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/victim-nsg/providers/Microsoft.Network/networkSecurityGroups/n"
	regrant := grant.DeepCopy() // the subnet's owner is granted, the NSG is not
	regrant.ResourceVersion, regrant.UID = "", ""
	if err := kc.Create(ctx, regrant); err != nil {
		t.Fatal(err)
	}
	refused("an AzureResource whose body names an ungranted ARM id", generic(map[string]any{"networkSecurityGroup": map[string]any{"id": victimNSG}}),
		"AzureResource "+tenant+"/subnet", victimNSG, "NamespaceGrant")
	admitted("an AzureResource whose body names granted ids only", generic(map[string]any{"addressPrefix": "10.0.0.0/24"}))
	refused("an AzureResource whose properties are not an object", generic("10.0.0.0/24"), "spec.properties", "object")
	if err := kc.Delete(ctx, regrant); err != nil {
		t.Fatal(err)
	}

	// The namespace's own credential: Azure limits what it may do, not grants.
	if err := kc.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: tenant, Name: credentials.NamespaceSecretName},
		StringData: map[string]string{"AZURE_SUBSCRIPTION_ID": "s", "AZURE_TENANT_ID": "t", "AZURE_CLIENT_ID": "c", "AZURE_CLIENT_SECRET": "x"}}); err != nil {
		t.Fatal(err)
	}
	admitted("a RoleAssignment under the namespace's own credential", func() client.Object { return roleAssignment() })

	// An export expression that does not compile is refused at apply, whatever the credential:
	// the controller would refuse it before any ARM write.
	group := func(expr string) func() client.Object {
		return func() client.Object {
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "resources.azure.com/v1api20200601", "kind": "ResourceGroup",
				"metadata": map[string]any{"namespace": tenant, "name": "exported"},
				"spec": map[string]any{"location": "westus2", "operatorSpec": map[string]any{
					"configMapExpressions": []any{map[string]any{"name": "out", "key": "where", "value": expr}},
				}},
			}}
		}
	}
	refused("a ResourceGroup with an export expression that does not compile", group(`self.status.location +`),
		"ResourceGroup "+tenant+"/exported", "configMap expression 0 (out", "Syntax error")
	admitted("a ResourceGroup with a good export expression", group(`self.status.location`))
	genericExpr := func() client.Object {
		return &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cerulean.dev/v1alpha1", "kind": "AzureResource",
			"metadata": map[string]any{"namespace": tenant, "name": "bus"},
			"spec": map[string]any{"owner": map[string]any{"armId": victimScope}, "type": "Microsoft.ServiceBus/namespaces",
				"apiVersion": "2021-11-01", "location": "westus2", "operatorSpec": map[string]any{"action": "listKeys",
					"secretExpressions": []any{map[string]any{"name": "bus", "key": "k", "value": `secret.primaryKey +`}}}},
		}}
	}
	refused("an AzureResource with an export expression that does not compile", genericExpr,
		"AzureResource "+tenant+"/bus", "secret expression 0 (bus", "Syntax error")
}

func grepLines(s, prefix string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
