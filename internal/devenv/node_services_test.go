package devenv_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/keyvault/armkeyvault"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/devenv"
	"github.com/cerulean/cerulean/internal/devenv/devenvtest"
)

// createNamespace creates a namespace for one test and deletes it when the test ends.
func createNamespace(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	if _, err := cs.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.CoreV1().Namespaces().Delete(t.Context(), name, metav1.DeleteOptions{}) })
}

// publishCloudCA writes the cloud's CA to ConfigMap cloud-ca in ns, as `up` does in default.
func publishCloudCA(t *testing.T, cs kubernetes.Interface, ns, caFile string) {
	t.Helper()
	ca, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cloud-ca"}, Data: map[string]string{"ca.crt": string(ca)}}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// trustCloudCA mounts ConfigMap cloud-ca into the pod's first container and names it in
// SSL_CERT_FILE: all a pod needs to reach the cloud under Azure's names.
func trustCloudCA(pod *corev1.Pod) {
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "ca", VolumeSource: corev1.VolumeSource{
		ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cloud-ca"}}}})
	app := &pod.Spec.Containers[0]
	app.VolumeMounts = append(app.VolumeMounts, corev1.VolumeMount{Name: "ca", MountPath: "/ca"})
	app.Env = append(app.Env, corev1.EnvVar{Name: "SSL_CERT_FILE", Value: "/ca/ca.crt"})
}

// runToEnd runs a test-app pod to its end and returns its output; it fails the test unless the
// pod succeeded.
func runToEnd(t *testing.T, cs kubernetes.Interface, cp *devenv.ControlPlane, pod *corev1.Pod) string {
	t.Helper()
	createPod(t, cs, pod)
	got := waitPhase(t, cs, pod.Namespace, pod.Name, corev1.PodSucceeded, corev1.PodFailed)
	out := kubectl(t, cp, "-n", pod.Namespace, "logs", pod.Name)
	if got.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("pod %s: %s\n%s", pod.Name, podStatus(got), out)
	}
	return out
}

// A node started again on the same control plane (`up` resumed on its data directory) writes
// CoreDNS's objects again over the ones it finds: the kube-dns Service keeps its ClusterIP.
func TestDNSObjectsWrittenAgainOnARestart(t *testing.T) {
	devenvtest.Node(t)
	cs := kubernetes.NewForConfigOrDie(devenvtest.ControlPlane(t).RESTConfig)
	if err := devenv.EnsureDNSObjects(t.Context(), cs); err != nil {
		t.Fatalf("writing the DNS objects a second time: %v", err)
	}
	svc, err := cs.CoreV1().Services(metav1.NamespaceSystem).Get(t.Context(), "kube-dns", metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != devenv.DNSServiceIP {
		t.Fatalf("kube-dns after a restart: %v, %v; want ClusterIP %s", svc, err, devenv.DNSServiceIP)
	}
}

// A Deployment-shaped app behind a ClusterIP Service, as a chart has it: a pod reaches it by
// NAME.NAMESPACE.svc.cluster.local, short names resolve through the search list, the
// kubernetes Service too, and a name outside the cluster and Azure's zones is NXDOMAIN (not a
// timeout: CoreDNS answers it at once and asks nobody). The host reaches the ClusterIP too.
func TestServicesAndClusterDNS(t *testing.T) {
	t.Parallel()
	devenvtest.Node(t)
	cp := devenvtest.ControlPlane(t)
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	const ns = "svc-dns"
	createNamespace(t, cs, ns)
	backend := testPod("backend", "serve", ":8080")
	backend.Namespace = ns
	createPod(t, cs, backend)
	svc, err := cs.CoreV1().Services(ns).Create(t.Context(), &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "backend"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "backend"},
			Ports:    []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitPhase(t, cs, ns, "backend", corev1.PodRunning)
	ip := svc.Spec.ClusterIP

	// From the host: the ClusterIP, once kube-proxy has the endpoint (it syncs within a second).
	var body string
	err = wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err = hostGet(ctx, "http://"+ip+"/")
		return err == nil, nil
	})
	if err != nil || !strings.HasPrefix(body, "remote ") {
		t.Fatalf("GET http://%s/ from the host: %v %q", ip, err, body)
	}

	get := testPod("client-get", "get", "http://backend."+ns+".svc.cluster.local/")
	get.Namespace = ns
	if out := runToEnd(t, cs, cp, get); !strings.HasPrefix(out, "remote ") {
		t.Errorf("GET through the Service's name: %q", out)
	}

	look := testPod("client-lookup", "lookup", "backend", "backend."+ns, "backend."+ns+".svc.cluster.local",
		"kubernetes.default", "kube-dns.kube-system.svc.cluster.local", "example.com", "nothing.svc.cluster.local")
	look.Namespace = ns
	out := runToEnd(t, cs, cp, look)
	want := map[string]string{
		"backend": ip, "backend." + ns: ip, "backend." + ns + ".svc.cluster.local": ip,
		"kubernetes.default": devenv.APIServerServiceIP, "kube-dns.kube-system.svc.cluster.local": devenv.DNSServiceIP,
		"example.com": "notfound", "nothing.svc.cluster.local": "notfound",
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, got, _ := strings.Cut(line, " ")
		if w, ok := want[name]; !ok || got != w {
			t.Errorf("lookup %s = %q, want %q", name, got, w)
		}
		delete(want, name)
	}
	if len(want) > 0 {
		t.Errorf("no answer for %v in %q", want, out)
	}
}

func hostGet(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// A pod reads a Key Vault secret with the Azure SDK for Go at its defaults, under the vault's
// public name, given only the cloud's CA: no proxy, no authority or endpoint. CoreDNS forwards
// Azure's zones to the cloud's DNS, which answers the node's address, where the cloud serves
// HTTPS by SNI. A deleted vault stops resolving.
func TestPodReadsKeyVaultSecretUnderAzureNames(t *testing.T) {
	cp := devenvtest.ControlPlane(t)
	devenvtest.Node(t)
	ctx := t.Context()
	cs := kubernetes.NewForConfigOrDie(cp.RESTConfig)
	c := cloudtest.Start(t, cloud.Options{ProxyAddr: "0", ARM: cloudtest.FastARM()})
	if err := c.ServeHTTPSOn(devenv.CloudHTTPSAddr); err != nil {
		t.Fatal(err)
	}
	if _, err := c.ServeDNSOn(devenv.CloudDNSAddr); err != nil {
		t.Fatal(err)
	}
	s := c.Settings()
	owner := cloudtest.OwnerCred(t, c)
	armOpts := cloudtest.ARMOptions(c)
	const rg, vaultName = "rg-names", "kv-names"
	cloudtest.CreateGroup(t, c, owner, armOpts, "eastus", rg)
	vaults, err := armkeyvault.NewVaultsClient(s.SubscriptionID, owner, armOpts)
	if err != nil {
		t.Fatal(err)
	}
	poller, err := vaults.BeginCreateOrUpdate(ctx, rg, vaultName, armkeyvault.VaultCreateOrUpdateParameters{
		Location: to.Ptr("eastus"), Properties: &armkeyvault.VaultProperties{
			TenantID: to.Ptr(s.TenantID),
			SKU:      &armkeyvault.SKU{Family: to.Ptr(armkeyvault.SKUFamilyA), Name: to.Ptr(armkeyvault.SKUNameStandard)},
			AccessPolicies: []*armkeyvault.AccessPolicyEntry{{
				TenantID: to.Ptr(s.TenantID), ObjectID: to.Ptr(s.ObjectID),
				Permissions: &armkeyvault.Permissions{Secrets: []*armkeyvault.SecretPermissions{to.Ptr(armkeyvault.SecretPermissionsAll)}},
			}},
		},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	vault, err := poller.PollUntilDone(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := azsecrets.NewClient(*vault.Properties.VaultURI, owner, &azsecrets.ClientOptions{ClientOptions: cloudtest.NoRetry(c), DisableChallengeResourceVerification: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr("from-the-pod")}, nil); err != nil {
		t.Fatal(err)
	}

	const ns = "azure-names"
	createNamespace(t, cs, ns)
	publishCloudCA(t, cs, ns, s.CAFile)
	if _, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sp"}, StringData: map[string]string{
		"AZURE_TENANT_ID": s.TenantID, "AZURE_CLIENT_ID": s.ClientID, "AZURE_CLIENT_SECRET": s.ClientSecret,
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := testPod("reader")
	pod.Namespace = ns
	app := &pod.Spec.Containers[0]
	app.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sp"}}}}
	app.Env = []corev1.EnvVar{
		{Name: "VAULT_URL", Value: "https://" + vaultName + ".vault.azure.net/"},
		{Name: "SECRET_NAME", Value: "db-password"},
	}
	trustCloudCA(pod)
	out := runToEnd(t, cs, cp, pod)
	if !strings.HasPrefix(out, "read secret db-password version ") {
		t.Fatalf("the pod read %q", out)
	}
	if strings.Contains(out, "from-the-pod") {
		t.Error("the pod printed the secret's value")
	}

	if _, err := vaults.Delete(ctx, rg, vaultName, nil); err != nil {
		t.Fatal(err)
	}
	look := testPod("lookup-deleted", "lookup", vaultName+".vault.azure.net", "management.azure.com")
	look.Namespace = ns
	out = runToEnd(t, cs, cp, look)
	if want := vaultName + ".vault.azure.net notfound\nmanagement.azure.com " + devenv.NodeIP + "\n"; out != want {
		t.Errorf("after the delete, the pod resolves %q, want %q", out, want)
	}
}
